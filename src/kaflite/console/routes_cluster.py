"""Console routes about the whole cluster: info, brokers, connections, series, the
client log and the live stream."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from kaflite.console.backend import NotAvailable
from kaflite.console.web import ApiError, Json, answer, backend_of, int_query

__all__ = ["cluster_routes"]


async def info(request: Request) -> Response:
    """The backend (kaflite or kafka), cluster id, bootstrap and features."""
    console = request.app.state.console
    out = await backend_of(request).info()
    out["version"] = console.version
    out["sample_interval_s"] = console.sample_interval_s
    return answer(out)


async def cluster(request: Request) -> Response:
    """Brokers (alive, isolated, running), the controller and partition counts."""
    return answer(await backend_of(request).cluster_info())


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "") in ("1", "true")


def _mine_hidden(request: Request, rows: list[Json]) -> list[Json]:
    """Without ``?console=1`` (or a ``client_id`` filter), the console's own clients'
    rows (``"console": true``) are left out: they only read, for the page itself."""
    if _flag(request, "console") or request.query_params.get("client_id"):
        return rows
    return [r for r in rows if not r.get("console")]


async def connections(request: Request) -> Response:
    """Client connections from the registry
    (?client_id=&broker=&replicas=1&closed=1&console=1)."""
    q = request.query_params
    return answer(_mine_hidden(request, await backend_of(request).connections(
        include_replicas=_flag(request, "replicas"),
        client_id=q.get("client_id"), broker=int_query(request, "broker", 0),
        include_closed=_flag(request, "closed"))))


async def clients(request: Request) -> Response:
    """Per-client fan-out, roles, cadences and principals (?console=1: with the
    console's own clients)."""
    return answer(_mine_hidden(request, await backend_of(request).clients()))


async def client_fan_out(request: Request) -> Response:
    """One client's connections by broker and role (bootstrap, partition-leader,
    group-coordinator...), for the fan-out picture."""
    return answer(await backend_of(request).fan_out(request.path_params["client_id"]))


async def live_fan_out(request: Request) -> Response:
    """The live fan-out: brokers and every open client connection with its roles,
    partitions and request and error counters, for the page to poll (?console=1)."""
    return answer(await backend_of(request).live_fan_out(_flag(request, "console")))


async def series(request: Request) -> Response:
    """Per-second rates by topic, broker and API (?since=T, seconds)."""
    console = request.app.state.console
    if console.metrics is None:
        raise NotAvailable("broker metrics")
    raw = request.query_params.get("since")
    try:
        since = float(raw) if raw else None
    except ValueError:
        raise ApiError(400, f"since must be a number of seconds, got {raw!r}") from None
    return answer({"interval_s": console.metrics.interval_s,
                   "samples": console.metrics.since(since)})


async def events(request: Request) -> Response:
    """The client log (?since=ID&client_id=&kind=)."""
    q = request.query_params
    return answer(request.app.state.console.client_log.since(
        int_query(request, "since", 0), q.get("client_id") or None, q.get("kind") or None))


async def stream(request: Request) -> Response:
    """Server-Sent Events: hello, cluster, log, metrics (?kinds=cluster,log,metrics)."""
    console = request.app.state.console
    kinds = [k for k in request.query_params.get("kinds", "").split(",") if k]
    sub = console.hub.subscribe(kinds)
    hello = {"backend": backend_of(request).kind, "cluster_id": console.cluster_id}
    return StreamingResponse(console.hub.sse(sub, hello), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def cluster_routes() -> list[Route]:
    return [Route("/api/info", info), Route("/api/cluster", cluster),
            Route("/api/connections", connections), Route("/api/clients", clients),
            Route("/api/clients/{client_id}", client_fan_out),
            Route("/api/fanout", live_fan_out),
            Route("/api/series", series), Route("/api/events", events),
            Route("/api/stream", stream)]
