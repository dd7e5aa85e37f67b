"""Broker mapping: each upstream broker gets a local port, and every address the
upstream gives a client is rewritten to the proxy's own.

Theory of operation
-------------------
The proxy learns the upstream brokers from the responses that name them
(Metadata, DescribeCluster, FindCoordinator and the KIP-951 node endpoints of
Produce and Fetch): ``learn`` records the upstream ``(host, port)`` of a node
id, and ``rewrite`` replaces it in the response with the proxy's advertised host
and the node's local port. A node id seen for the first time gets its port on
demand (``BrokerMap.port_for`` calls the proxy's ``open_listener`` hook, which
binds a socket at once, so the port is known before the response leaves).

Ports are stable: with a fixed ``broker_port_base`` node ``n`` listens on
``base + n`` (Kroxylicious's port-per-broker scheme); with base 0 each node gets
a free port the first time it is seen and keeps it for the proxy's life.

With SNI routing (``host_for``) every broker is advertised at the proxy's one
port under a host name of its own (``broker-<id>.<suffix>``), and the TLS
ClientHello's server name says which broker a connection is for.

Only node ids of 0 or more are rewritten: an error answer's ``-1`` node (no
coordinator) keeps its empty host.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Protocol

from kaflite.protocol.messages import (
    DescribeClusterResponse,
    FetchResponse,
    FindCoordinatorResponse,
    MetadataResponse,
    ProduceResponse,
    Struct,
)
from kaflite.protocol.primitives import ZERO_UUID

__all__ = ["REWRITTEN_APIS", "BrokerMap"]

PRODUCE, FETCH, METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER = 0, 1, 3, 10, 60
REWRITTEN_APIS = frozenset({METADATA, FIND_COORDINATOR, DESCRIBE_CLUSTER})
# The first versions whose responses may carry KIP-951 node endpoints.
NODE_ENDPOINT_VERSIONS = {PRODUCE: 10, FETCH: 16}


class _Endpoint(Protocol):
    host: str
    port: int


class BrokerMap:
    """Upstream node id <-> upstream address <-> local port."""

    def __init__(self, advertised_host: str, open_listener: Callable[[int], int],
                 broker_port_base: int = 0,
                 host_for: Callable[[int], str] | None = None) -> None:
        self.advertised_host = advertised_host
        self.host_for = host_for            # SNI routing: node id -> its host name
        self._open = open_listener          # node id -> bound local port
        self.broker_port_base = broker_port_base
        self.upstream: dict[int, tuple[str, int]] = {}   # node id -> upstream address
        self.local: dict[int, int] = {}                  # node id -> local port
        self.topic_names: dict[uuid.UUID, str] = {}      # learned from Metadata

    def port_for(self, node_id: int) -> int:
        port = self.local.get(node_id)
        if port is None:
            port = self.local[node_id] = self._open(node_id)
        return port

    def upstream_of(self, node_id: int) -> tuple[str, int] | None:
        return self.upstream.get(node_id)

    def node_at(self, host: str, port: int) -> int | None:
        """The node at an upstream address, if one answer named it (by port where the
        host is spelled another way: 127.0.0.1 or localhost)."""
        by_port = [n for n, (h, p) in self.upstream.items() if p == port]
        exact = [n for n in by_port if self.upstream[n][0] == host]
        found = exact or by_port
        return found[0] if len(found) == 1 else None

    def resolve_topic(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_names.get(topic_id)

    def upstream_ports(self) -> set[int]:
        return {port for _, port in self.upstream.values()}

    # -- rewriting ------------------------------------------------------------------
    def _swap(self, node_id: int, endpoint: _Endpoint) -> None:
        if node_id < 0 or not endpoint.host:
            return
        self.upstream[node_id] = (endpoint.host, endpoint.port)
        endpoint.host = self.advertised_host if self.host_for is None else self.host_for(node_id)
        endpoint.port = self.port_for(node_id)

    def needs_decode(self, api_key: int, version: int) -> bool:
        """Must a response of this API and version be decoded to be rewritten?"""
        if api_key in REWRITTEN_APIS:
            return True
        first = NODE_ENDPOINT_VERSIONS.get(api_key)
        return first is not None and version >= first

    def rewrite(self, api_key: int, version: int, body: Struct) -> bool:
        """Rewrite every broker address in ``body``; True if anything changed."""
        changed = False
        if isinstance(body, MetadataResponse):
            for b in body.brokers:
                self._swap(b.node_id, b)
                changed = True
            for t in body.topics:
                if t.name and t.topic_id != ZERO_UUID:
                    self.topic_names[t.topic_id] = t.name
        elif isinstance(body, DescribeClusterResponse):
            for d in body.brokers:
                self._swap(d.broker_id, d)
                changed = True
        elif isinstance(body, FindCoordinatorResponse):
            for c in body.coordinators:
                self._swap(c.node_id, c)
                changed = True
            if not body.coordinators and body.host:
                self._swap(body.node_id, body)
                changed = True
        elif isinstance(body, ProduceResponse | FetchResponse):
            for e in body.node_endpoints:
                self._swap(e.node_id, e)
                changed = True
        return changed
