"""Which client connection is which, for any client against any upstream.

The proxy keeps one ``ConnectionRecord`` (the cluster's registry row,
``kaflite.cluster.observe``) per downstream connection and feeds it with the
same ``record_request`` the brokers use: the roles (bootstrap, partition-leader
with its partitions, group-coordinator with its groups, txn-coordinator, admin)
are inferred from the decoded requests and responses exactly as a kaflite
broker infers them from its own, so they work against Tansu or Apache Kafka
too. ``broker_id`` is the upstream node id the connection goes to, -1 for a
bootstrap connection (the proxy's own port, any upstream broker).

Snapshots and per-client summaries are the cluster's (``snapshot``,
``summarize``), so ``kaflite connections --proxy URL`` prints them with the same
tables as for a cluster.
"""

from __future__ import annotations

import time
from collections import deque

from kaflite.cluster.observe import (
    CLOSED_KEPT,
    ClientSnapshot,
    ConnectionRecord,
    ConnectionSnapshot,
    snapshot,
    summarize,
)

__all__ = ["BOOTSTRAP_NODE", "ProxyRegistry"]

BOOTSTRAP_NODE = -1


class ProxyRegistry:
    def __init__(self) -> None:
        self._ids = 0
        self.open: dict[int, ConnectionRecord] = {}
        self.closed: deque[ConnectionRecord] = deque(maxlen=CLOSED_KEPT)
        # (downstream peer, upstream local address) of each open connection, for `ss`
        self.upstream_sockets: dict[int, tuple[str, str]] = {}

    def opened(self, peer: str, node_id: int | None, security_protocol: str) -> ConnectionRecord:
        self._ids += 1
        record = ConnectionRecord(self._ids, BOOTSTRAP_NODE if node_id is None else node_id,
                                  peer, security_protocol=security_protocol)
        self.open[record.connection_id] = record
        return record

    def closed_now(self, record: ConnectionRecord) -> None:
        if self.open.pop(record.connection_id, None) is not None:
            record.closed_at = time.time()
            self.closed.append(record)
        self.upstream_sockets.pop(record.connection_id, None)

    def records(self, include_closed: bool = False) -> list[ConnectionRecord]:
        out = list(self.open.values())
        if include_closed:
            out += list(self.closed)
        return out

    def connections(self, client_id: str | None = None, broker: int | None = None,
                    include_closed: bool = False) -> list[ConnectionSnapshot]:
        rows = [r for r in self.records(include_closed)
                if (client_id is None or r.client_id == client_id)
                and (broker is None or r.broker_id == broker)]
        return [snapshot(r) for r in sorted(rows, key=lambda r: (str(r.client_id), r.broker_id,
                                                                 r.connection_id))]

    def clients(self) -> list[ClientSnapshot]:
        return summarize(self.records())
