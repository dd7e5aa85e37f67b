"""The live fan-out (``GET /api/fanout``): every client connection of the cluster, small.

One row per open client connection (no replica fetchers) with its roles, the partitions it
leads for the client, and two running counters, requests and errors, read from what the
registry already counts (``ApiStats.count`` and ``ApiStats.errors``): nothing is added on
the brokers' request path. The page polls this once a second and draws the differences:
requests since the last poll travel along the edges, new errors flash, connections opened
and closed, and partitions whose connection moved to another broker (re-routes).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from kaflite.console.backend import is_console
from kaflite.console.web import Json

if TYPE_CHECKING:
    from kaflite.cluster.observe import ConnectionRecord, Registry

__all__ = ["connection_row", "fanout_view"]


def connection_row(info: ConnectionRecord) -> Json:
    requests = errors = 0
    for stats in list(info.apis.values()):
        requests += stats.count
        errors += sum(stats.errors.values())
    return {"broker": info.broker_id, "connection_id": info.connection_id,
            "client_id": info.client_id, "host": info.host, "roles": info.roles,
            "partitions": sorted(f"{t}-{p}" for t, p in list(info.partitions)),
            "groups": sorted(info.groups), "requests": requests, "errors": errors,
            "opened_at": round(info.opened_at, 3), "console": is_console(info.client_id)}


def fanout_view(registry: Registry, brokers: list[Json], include_console: bool = False
                ) -> Json:
    """The brokers (as ``/api/cluster``'s) and every open client connection (the
    console's own only with ``include_console``)."""
    rows = [connection_row(i) for i in registry.infos(include_replicas=False)
            if include_console or not is_console(i.client_id)]
    rows.sort(key=lambda r: (str(r["client_id"]), str(r["host"]), r["broker"],
                             r["connection_id"]))
    return {"t": round(time.time(), 3), "brokers": brokers, "connections": rows}
