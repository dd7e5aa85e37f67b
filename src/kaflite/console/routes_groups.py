"""Console routes for consumer groups: list, describe (members, offsets, lag), lag
history, a share group's partitions and in-flight records, reset offsets (empty groups
only) and delete."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kaflite.console.groups import (
    RESET_KINDS,
    delete_group,
    describe_group,
    list_groups,
    reset_group,
)
from kaflite.console.share_groups import DEFAULT_LIMIT, MAX_LIMIT, share_in_flight
from kaflite.console.web import (
    ApiError,
    answer,
    backend_of,
    body_of,
    int_field,
    int_query,
    topic_name,
)

__all__ = ["group_routes"]


async def groups(request: Request) -> Response:
    """Every group: type, state, members and total lag."""
    return answer(await list_groups(backend_of(request)))


async def group(request: Request) -> Response:
    """One group: members with assignments, committed offsets and lag per partition."""
    return answer(await describe_group(backend_of(request), request.path_params["group"]))


async def share_partitions(request: Request) -> Response:
    """A share group's partitions: start offset (SPSO) and lag, and on a kaflite cluster
    the in-flight records (state, holder, delivery count; the first ``limit`` per
    partition, 50 unless asked, at most 1000) with the count in each state."""
    limit = int_query(request, "limit", lo=0, hi=MAX_LIMIT)
    return answer(await share_in_flight(backend_of(request), request.path_params["group"],
                                        DEFAULT_LIMIT if limit is None else limit))


async def lag_history(request: Request) -> Response:
    console = request.app.state.console
    g = request.path_params["group"]
    lag = console.lag
    return answer({"group_id": g, "interval_s": lag.interval_s if lag else None,
                   "points": lag.points(g) if lag else []})


async def reset(request: Request) -> Response:
    """Reset committed offsets: {to: earliest|latest|timestamp|offset|shift|duration,
    timestamp, offset, shift, duration_ms, topic, partitions}."""
    g = request.path_params["group"]
    body = await body_of(request)
    to = body.get("to")
    if to not in RESET_KINDS:
        raise ApiError(400, f"to must be one of {', '.join(RESET_KINDS)}, got {to!r}")
    timestamp = int_field(body, "timestamp", lo=0) if to == "timestamp" else None
    offset = int_field(body, "offset", lo=0) if to == "offset" else None
    shift = int_field(body, "shift") if to == "shift" else None
    duration_ms = int_field(body, "duration_ms", lo=1) if to == "duration" else None
    topic = None if body.get("topic") is None else topic_name(body.get("topic"))
    parts = body.get("partitions")
    partitions: list[int] | None = None
    if parts is not None:
        if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in parts):
            raise ApiError(400, "partitions must be a list of partition numbers")
        if topic is None:
            raise ApiError(400, "partitions need a topic")
        partitions = list(parts)
    offsets = await reset_group(backend_of(request), g, str(to), timestamp=timestamp,
                                offset=offset, topic=topic, partitions=partitions,
                                shift=shift, duration_ms=duration_ms)
    return answer({"group_id": g, "offsets": offsets})


async def delete(request: Request) -> Response:
    g = request.path_params["group"]
    await delete_group(backend_of(request), g)
    return answer({"deleted": g})


def group_routes() -> list[Route]:
    return [Route("/api/groups", groups), Route("/api/groups/{group}", group),
            Route("/api/groups/{group}/lag-history", lag_history),
            Route("/api/groups/{group}/share-partitions", share_partitions),
            Route("/api/groups/{group}/reset", reset, methods=["POST"]),
            Route("/api/groups/{group}", delete, methods=["DELETE"])]
