"""The cluster's HTTP API (``kaflite up --http-port N``): the kaflite console.

It used to be a hand-written HTTP/1.1 server; it is now the console's Starlette
app under uvicorn (``kaflite.console``), on the cluster's own event loop, with
the same routes and JSON (``/connections``, ``/clients``, ``/cluster``,
``/faults``, ``/metrics`` and the fault routes; ``docs/console.md``). State
changes need the console token (``api.token``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.console.app import ConsoleServer
from kaflite.console.embedded import EmbeddedBackend, cluster_view
from kaflite.console.web import ApiError as HttpError

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster

__all__ = ["HttpApi", "HttpError", "cluster_view"]


class HttpApi(ConsoleServer):
    """The console of a kaflite cluster in this process."""

    def __init__(self, cluster: Cluster, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, sampling: bool = True,
                 lag_interval_s: float = 5.0) -> None:
        super().__init__(EmbeddedBackend(cluster), host, port, token, sampling, lag_interval_s)
