"""A route the page needs that the API contract's per-topic routes make costly.

``GET /api/partitions?internal=1`` answers every topic with its partitions (as
``GET /api/topics/{name}`` does, without the configs) in one request, so the page's
cluster panel loads 10,000 partitions with one round trip instead of one per topic.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kaflite.console.web import ApiError, Json, answer, backend_of
from kaflite.protocol import errors

__all__ = ["page_routes"]


async def partitions(request: Request) -> Response:
    """Every topic (``internal=1``: the internal ones too) with its partitions."""
    backend = backend_of(request)
    internal = request.query_params.get("internal", "") in ("1", "true")
    topics: list[Json] = []
    for listed in await backend.topics(internal):
        try:
            detail = await backend.topic(str(listed["name"]))
        except errors.UnknownTopicOrPartitionError:
            continue                   # deleted since it was listed
        except ApiError as exc:
            if exc.status == 404:
                continue
            raise
        detail.pop("configs", None)
        topics.append(detail)
    return answer({"topics": topics})


def page_routes() -> list[Route]:
    return [Route("/api/partitions", partitions)]
