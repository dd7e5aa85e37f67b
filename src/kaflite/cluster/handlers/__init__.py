"""One module per Kafka API; each declares the versions it serves."""

from __future__ import annotations

from kaflite.cluster.handlers._base import Handler

__all__ = ["Handler", "all_handlers"]


def all_handlers() -> dict[int, Handler]:
    from kaflite.cluster.handlers import (
        admin_topics,
        api_versions,
        configs,
        fetch,
        metadata,
        offsets,
        produce,
        reassignment,
    )

    handlers: dict[int, Handler] = {}
    for module in (api_versions, metadata, admin_topics, configs, produce, fetch, offsets,
                   reassignment):
        for h in module.HANDLERS:
            handlers[h.api_key] = h
    return handlers
