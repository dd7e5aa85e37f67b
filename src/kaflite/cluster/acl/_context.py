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

__all__ = ["allows", "allows_any", "allows_cluster", "inter_broker", "is_inter_broker"]

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


def allows_cluster(broker: Broker, conn: ServerConnection, operation: AclOperation) -> bool:
    return allows(broker, conn, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def allows_any(broker: Broker, conn: ServerConnection, operation: AclOperation,
               resource_type: ResourceType) -> bool:
    authorizer = broker.authorizer
    if authorizer is None:
        return True
    return is_inter_broker(conn) or authorizer.authorize_any(
        conn.info.principal, conn.info.host, operation, resource_type)
