"""Who is asking: the principal and host of a connection, and the check helpers.

Handlers (and the request gate, ``_gate``) ask ``allows(broker, conn, op, type,
name)``; with no authorizer configured that is ``True`` at once, so an unsecured
cluster pays nothing. The principal is the connection's (SASL or TLS, else
``User:ANONYMOUS``), the host is its peer address.

The cluster's own brokers talk to each other over ordinary connections (replica
fetchers, transaction markers); they register those here (``inter_broker``) and
are treated as super users on them, as Kafka's brokers are when their principal
is in ``super.users``. A connection is recognized by its client-side address,
which only the registering broker's socket can have.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from kaflite.security.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection
    from kaflite.net.connection import BrokerConnection

__all__ = ["NOT_REQUESTED", "SUPPORTED_OPERATIONS", "allows", "allows_any", "allows_cluster",
           "authorized_operations", "inter_broker", "is_inter_broker"]

Op = AclOperation
#: what a describe reports for a resource of each type (Kafka's ``AclEntry.supportedOperations``;
#: a 4.4 broker without an authorizer answers 8096 for the cluster, 3576 for a topic)
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    # 4.4's AclEntry (javap of kafka-server-4.4.0.jar) lists the config operations too:
    # a group has configs since KIP-848
    ResourceType.GROUP: (Op.READ, Op.DELETE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION,
                           Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE),
}
#: the ``authorized_operations`` of a describe that did not ask for them (Integer.MIN_VALUE)
NOT_REQUESTED = -(1 << 31)

_BROKER_CLIENTS: weakref.WeakSet[BrokerConnection] = weakref.WeakSet()
_SEEN: weakref.WeakKeyDictionary[ServerConnection, bool] = weakref.WeakKeyDictionary()


def inter_broker(conn: BrokerConnection) -> BrokerConnection:
    """Mark a broker's (open) connection to another broker as inter-broker traffic."""
    _BROKER_CLIENTS.add(conn)
    return conn


def is_inter_broker(conn: ServerConnection) -> bool:
    known = _SEEN.get(conn)
    if known is None:
        peer = conn.info.peer
        known = _SEEN[conn] = any(c.local_address == peer and c.connected
                                  for c in list(_BROKER_CLIENTS))
    return known


def allows(broker: Broker, conn: ServerConnection, operation: AclOperation,
           resource_type: ResourceType, name: str) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return is_inter_broker(conn) or authorizer.authorize(
        conn.info.principal, conn.info.host, operation, resource_type, name)


def authorized_operations(broker: Broker, conn: ServerConnection, resource_type: ResourceType,
                          name: str) -> int:
    """The bit field of the operations ``conn``'s principal may do on the resource (Kafka's
    ``authorizedOperations``): one bit per ``AclOperation`` code."""
    bits = 0
    for op in SUPPORTED_OPERATIONS[resource_type]:
        if allows(broker, conn, op, resource_type, name):
            bits |= 1 << int(op)
    return bits


def allows_cluster(broker: Broker, conn: ServerConnection, operation: AclOperation) -> bool:
    return allows(broker, conn, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allows_any(broker: Broker, conn: ServerConnection, operation: AclOperation,
               resource_type: ResourceType) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return is_inter_broker(conn) or authorizer.authorize_any(
        conn.info.principal, conn.info.host, operation, resource_type)
