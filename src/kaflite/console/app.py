"""The console: a Starlette app served by uvicorn on the running event loop.

``ConsoleServer(backend, host, port)`` binds its socket (port 0: any free one),
runs ``uvicorn.Server.serve`` as a task of the current loop (the cluster's own,
for an embedded cluster: no thread, no process) and, with it, the background
monitor (cluster changes, the client log, metrics and lag samples). ``stop()``
ends the live streams, the monitor and the server, and closes the console's
clients. Routes: ``docs/console.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Self

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kaflite.console.auth import TokenGuard, is_loopback, new_token
from kaflite.console.backend import ClientBackend
from kaflite.console.credentials import ClusterCredentials
from kaflite.console.health import HealthWatch, health_routes
from kaflite.console.monitor import ClientLog, Monitor
from kaflite.console.openapi import openapi_routes
from kaflite.console.routes_chaos import chaos_routes
from kaflite.console.routes_cluster import cluster_routes
from kaflite.console.routes_groups import group_routes
from kaflite.console.routes_recovery import recovery_routes
from kaflite.console.routes_security import security_routes
from kaflite.console.routes_topics import topic_routes
from kaflite.console.sampler import LagSampler, MetricsSampler
from kaflite.console.streams import Hub
from kaflite.console.web import ApiError, error_response

__all__ = ["Console", "ConsoleServer", "build_app"]

STATIC = Path(str(resources.files("kaflite.console"))) / "static"

FALLBACK_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>kaflite console</title></head><body style="font:14px system-ui;margin:2em">
<h1>kaflite console</h1><p>This build has no console page; the API is here:
<a href="/docs">/docs</a>, <a href="/api/cluster">/api/cluster</a>,
<a href="/api/topics">/api/topics</a>, <a href="/api/groups">/api/groups</a>.</p>
</body></html>"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kaflite")
    except PackageNotFoundError:
        return "0+unknown"


class Console:
    """The console's state, shared by its routes (``request.app.state.console``)."""

    def __init__(self, backend: ClientBackend, token: str | None = None,
                 sampling: bool = True, sample_interval_s: float = 1.0,
                 lag_interval_s: float = 5.0) -> None:
        from kaflite.cluster.metrics import ClusterCollector, registry_of

        self.backend = backend
        self.token = token or new_token()
        self.version = _version()
        self.hub = Hub()
        self.client_log = ClientLog(self.hub)
        self.health = HealthWatch(backend)
        self.sample_interval_s = sample_interval_s
        cluster = backend.cluster_object
        self.cluster_id = cluster.cluster_id if cluster is not None else None
        self.metrics = MetricsSampler(cluster, sample_interval_s) \
            if cluster is not None else None
        self.lag = LagSampler(backend, lag_interval_s) if sampling else None
        self.monitor = Monitor(self.hub, self.client_log, cluster,
                               self.metrics if sampling else None, self.lag,
                               backend=backend if sampling else None)
        self.collector = ClusterCollector(cluster) if cluster is not None else None
        self.metrics_registry = registry_of(self.collector) if self.collector else None

    async def start(self) -> None:
        if self.cluster_id is None:
            with contextlib.suppress(Exception):   # a cluster down now: the page says so
                info = await asyncio.wait_for(self.backend.info(), 10)
                self.cluster_id = str(info["cluster_id"])
        self.monitor.start()

    async def stop(self) -> None:
        self.hub.close()
        await self.monitor.stop()
        await self.health.close()
        await self.backend.close()


async def _page(request: Request) -> Response:
    index = STATIC / "index.html"
    if index.is_file():
        return FileResponse(index, headers={"Cache-Control": "no-cache"})
    return HTMLResponse(FALLBACK_PAGE)


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(ApiError(404, f"no route {request.method} {request.url.path}"))


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return error_response(ApiError(405, f"{request.method} is not supported on "
                                        f"{request.url.path}"))


async def _failed(request: Request, exc: Exception) -> Response:
    return error_response(exc)


class _Errors:
    """ASGI middleware: a route's exception becomes its JSON error answer (never a
    traceback on the console's stderr for a 400)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started or scope["type"] != "http":
                raise
            await error_response(exc)(scope, receive, send)


def build_app(console: Console) -> Starlette:
    routes: list[Route | Mount] = [
        Route("/", _page, include_in_schema=False),
        *openapi_routes(), *cluster_routes(), *topic_routes(), *group_routes(),
        *security_routes(), *chaos_routes(), *health_routes(), *recovery_routes()]
    if STATIC.is_dir():
        routes.append(Mount("/static", StaticFiles(directory=STATIC), name="static"))
    app = Starlette(routes=routes, middleware=[Middleware(_Errors)], exception_handlers={
        404: _not_found, 405: _not_allowed, ApiError: _failed})
    app.state.console = console
    app.state.backend = console.backend
    return app


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process that runs the cluster owns them."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ConsoleServer:
    def __init__(self, backend: ClientBackend, host: str = "127.0.0.1", port: int = 0,
                 token: str | None = None, sampling: bool = True,
                 lag_interval_s: float = 5.0) -> None:
        self.console = Console(backend, token, sampling, lag_interval_s=lag_interval_s)
        self.app = build_app(self.console)
        cluster = backend.cluster_object
        credentials = ClusterCredentials.of(cluster) if cluster is not None else None
        self.asgi = TokenGuard(self.app, self.console.token, loopback_only=is_loopback(host),
                               credentials=credentials)
        self.host, self.port = host, port
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def token(self) -> str:
        return self.console.token

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def console_url(self) -> str:
        """The page's address with the token, as printed at start-up."""
        return f"{self.url}/?token={self.token}"

    async def start(self) -> Self:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self.port = sock.getsockname()[1]
        # log_config=None: uvicorn's loggers go through the application's logging
        config = uvicorn.Config(self.asgi, log_level="warning", log_config=None,
                                lifespan="off", access_log=False,
                                timeout_graceful_shutdown=2, ws="none")
        self._server = _Server(config)
        await self.console.start()
        self._task = asyncio.get_running_loop().create_task(self._server.serve([sock]))
        for _ in range(500):           # until it listens (bounded: 5 s)
            if self._server.started or self._task.done():
                break
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()
            raise RuntimeError("the console's HTTP server stopped at start")
        return self

    async def stop(self) -> None:
        await self.console.stop()
        server, task = self._server, self._task
        self._server = self._task = None
        if server is not None and task is not None:
            server.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(task), 10)
            except TimeoutError:
                server.force_exit = True
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            except Exception:
                pass
