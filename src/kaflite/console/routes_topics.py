"""Console routes for topics: list, describe, create, delete, add partitions, alter
configs, browse messages and produce with a trace."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kaflite.console.browse import ISOLATIONS, Browse, browse
from kaflite.console.trace import produce_traced
from kaflite.console.web import (
    ApiError,
    JsonBody,
    answer,
    backend_of,
    body_of,
    int_field,
    int_query,
    topic_name,
)

__all__ = ["topic_routes"]

MAX_PARTITIONS = 100_000


async def list_topics(request: Request) -> Response:
    """Every topic with partition count, replication factor, messages and size."""
    internal = request.query_params.get("internal", "") in ("1", "true")
    return answer(await backend_of(request).topics(internal))


async def list_partitions(request: Request) -> Response:
    """Every topic with its partitions (leader, replicas, ISR, offsets, size), as
    /api/topics/{name} without the configs, for the cluster page (?internal=1)."""
    internal = request.query_params.get("internal", "") in ("1", "true")
    return answer({"topics": await backend_of(request).partitions(internal)})


async def get_topic(request: Request) -> Response:
    """Partitions (leader, replicas, ISR, offsets, size) and configs of one topic."""
    return answer(await backend_of(request).topic(topic_name(request.path_params["name"])))


def _configs(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(400, f"{what} must be an object of config names to values")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(v, (str, int, float)) or isinstance(v, bool):
            raise ApiError(400, f"config {k!r}: the value must be a string, got {v!r}")
        out[str(k)] = str(v)
    return out


async def create_topic(request: Request) -> Response:
    """Create a topic: {name, partitions=1, replication_factor=-1, configs={}}."""
    body = await body_of(request)
    name = topic_name(body.get("name"))
    partitions = int_field(body, "partitions", 1, 1, MAX_PARTITIONS)
    rf = int_field(body, "replication_factor", -1, -1, 32767)
    if rf == 0:
        raise ApiError(400, "replication_factor must be at least 1 (or -1 for the default)")
    backend = backend_of(request)
    await backend.create_topic(name, partitions, rf, _configs(body.get("configs"), "configs"))
    return answer(await backend.topic(name), 201)


async def delete_topic(request: Request) -> Response:
    name = topic_name(request.path_params["name"])
    await backend_of(request).delete_topic(name)
    return answer({"deleted": name})


async def add_partitions(request: Request) -> Response:
    """Raise a topic's partition count: {count} (the new total)."""
    name = topic_name(request.path_params["name"])
    count = int_field(await body_of(request), "count", None, 1, MAX_PARTITIONS)
    await backend_of(request).add_partitions(name, count)
    return answer({"topic": name, "partitions": count})


async def alter_configs(request: Request) -> Response:
    """Set and delete topic configs: {set: {name: value}, delete: [name]}."""
    name = topic_name(request.path_params["name"])
    body = await body_of(request)
    changes: dict[str, str | None] = dict(_configs(body.get("set"), "set"))
    deleted = body.get("delete") or []
    if not isinstance(deleted, list) or not all(isinstance(d, str) for d in deleted):
        raise ApiError(400, "delete must be a list of config names")
    changes.update({d: None for d in deleted})
    if not changes:
        raise ApiError(400, "nothing to change: give set or delete")
    backend = backend_of(request)
    await backend.alter_configs(name, changes)
    return answer({"topic": name, "configs": (await backend.topic(name))["configs"]})


def browse_query(request: Request, topic: str) -> Browse:
    q = request.query_params
    partition = int_query(request, "partition", 0)
    offset = int_query(request, "offset")
    timestamp = int_query(request, "timestamp", 0)
    start = q.get("from", "latest")
    if start not in ("earliest", "latest"):
        raise ApiError(400, f"from must be earliest or latest, got {start!r}")
    if offset is not None and timestamp is not None:
        raise ApiError(400, "give offset or timestamp, not both")
    value = offset if offset is not None else timestamp
    if offset is not None:
        start = "offset"
    elif timestamp is not None:
        start = "timestamp"
    isolation = q.get("isolation", "read_uncommitted")
    if isolation not in ISOLATIONS:
        raise ApiError(400, f"isolation must be read_uncommitted or read_committed, got "
                            f"{isolation!r}")
    return Browse(topic, None if partition is None else [partition], start, value,
                  int_query(request, "limit", 1, 500) or 50, isolation,
                  q.get("search") or None, int_query(request, "max_scan", 1, 1_000_000)
                  or 10_000)


async def messages(request: Request) -> Response:
    """Browse records (?partition=&offset=|timestamp=|from=&limit=&isolation=&search=)."""
    name = topic_name(request.path_params["name"])
    return answer(await browse(backend_of(request), browse_query(request, name)))


def _text(body: JsonBody, name: str) -> bytes | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string or null, got {value!r}")
    return value.encode()


def _headers(value: object) -> list[tuple[str, bytes | None]]:
    if value is None:
        return []
    items = list(value.items()) if isinstance(value, dict) else value
    if not isinstance(items, list):
        raise ApiError(400, "headers must be an object or a list of [name, value] pairs")
    out: list[tuple[str, bytes | None]] = []
    for item in items:
        if not isinstance(item, (list, tuple)) or len(item) != 2 or \
                not isinstance(item[0], str) or not isinstance(item[1], (str, type(None))):
            raise ApiError(400, f"a header must be a [name, value] pair of strings, got "
                                f"{item!r}")
        out.append((item[0], None if item[1] is None else item[1].encode()))
    return out


async def produce(request: Request) -> Response:
    """Produce one record: {topic, key, value, headers, partition}; the answer has the
    client's steps."""
    body = await body_of(request)
    topic = topic_name(body.get("topic"))
    key, value = _text(body, "key"), _text(body, "value")
    headers = _headers(body.get("headers"))
    partition = None if body.get("partition") is None else int_field(body, "partition",
                                                                      lo=0)
    backend = backend_of(request)
    await backend.partition_count(topic)          # 404 before anything is sent
    return answer(await produce_traced(backend, topic, key, value, headers, partition))


def topic_routes() -> list[Route]:
    return [Route("/api/topics", list_topics), Route("/api/partitions", list_partitions),
            Route("/api/topics", create_topic, methods=["POST"]),
            Route("/api/topics/{name}", get_topic),
            Route("/api/topics/{name}", delete_topic, methods=["DELETE"]),
            Route("/api/topics/{name}/partitions", add_partitions, methods=["POST"]),
            Route("/api/topics/{name}/configs", alter_configs, methods=["POST"]),
            Route("/api/topics/{name}/messages", messages),
            Route("/api/produce", produce, methods=["POST"])]
