"""The proxy's HTTP API (Starlette, served by uvicorn on the proxy's own loop).

* ``GET /connections[?client_id=&broker=&closed=1]``: every client connection,
  as the cluster's ``/connections`` lists them (``kaflite connections --proxy
  URL`` prints it), with ``broker`` the upstream node id (-1: bootstrap);
* ``GET /clients``: per-client fan-out and cadences;
* ``GET /brokers``: upstream node id -> upstream address and local port;
* ``GET /metrics``: Prometheus text format.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from kaflite.proxy.server import Proxy

__all__ = ["HttpServer", "make_app"]


def make_app(proxy: Proxy) -> Starlette:
    async def connections(request: Request) -> JSONResponse:
        q = request.query_params
        broker = q.get("broker")
        rows = proxy.registry.connections(q.get("client_id"),
                                          int(broker) if broker is not None else None,
                                          q.get("closed") in ("1", "true"))
        return JSONResponse([r.to_dict() for r in rows])

    async def clients(request: Request) -> JSONResponse:
        return JSONResponse([c.to_dict() for c in proxy.registry.clients()])

    async def brokers(request: Request) -> JSONResponse:
        m = proxy.brokers
        return JSONResponse([{"node_id": n, "upstream": f"{h}:{p}",
                              "local": f"{m.advertised_host}:{m.local.get(n)}"}
                             for n, (h, p) in sorted(m.upstream.items())])

    async def metrics(request: Request) -> Response:
        return Response(proxy.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return Starlette(routes=[Route("/connections", connections), Route("/clients", clients),
                             Route("/brokers", brokers), Route("/metrics", metrics)])


class HttpServer:
    """uvicorn on a socket bound before it starts (so port 0 works)."""

    def __init__(self, proxy: Proxy, host: str, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host = host
        self.port = int(self.sock.getsockname()[1])
        config = uvicorn.Config(make_app(proxy), log_level="warning", lifespan="off",
                                access_log=False)
        self.server = uvicorn.Server(config)
        self.task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.server.serve([self.sock]))
        for _ in range(200):   # bounded: uvicorn starts in a few loop turns
            if self.server.started or self.task.done():
                break
            await asyncio.sleep(0.01)
        if self.task.done():
            self.task.result()

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.task is not None:
            await asyncio.wait_for(self.task, 10)
        self.sock.close()
