"""One module per Kafka API (or per small family of APIs); each declares its versions.

Every module in this package that defines ``HANDLERS`` (a list of ``Handler``)
is picked up, so adding an API means adding a module.

Kafka 4.4's schemas mark one newest version unstable (``latestVersionUnstable``):
InitProducerId v6 (KIP-939). As Kafka's broker, kaflite serves and advertises it
only with ``unstable.api.versions.enable``; otherwise a request at it is refused as
any unsupported version is. (The shared, older schemas still flag EndTxn v5,
ConsumerGroupHeartbeat v1 and the share-group state RPCs, which Kafka 4.4 serves as
stable versions: the list below is Kafka 4.4's, not those flags.)
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

from kaflite.cluster.handlers._base import AnyHandler, Handler
from kaflite.protocol.messages import InitProducerIdRequest

__all__ = ["UNSTABLE_VERSIONS", "AnyHandler", "Handler", "all_handlers"]

# api key: the version Kafka 4.4 leaves unstable (its schemas' latestVersionUnstable)
UNSTABLE_VERSIONS = {InitProducerIdRequest.API_KEY: 6}


def all_handlers(unstable: bool = False) -> dict[int, AnyHandler]:
    """Every handler; without ``unstable``, none serves a version Kafka 4.4 calls unstable."""
    handlers: dict[int, AnyHandler] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for h in getattr(module, "HANDLERS", []):
            if h.api_key in handlers:
                raise RuntimeError(f"API key {h.api_key} has two handlers")
            newest = UNSTABLE_VERSIONS.get(h.api_key)
            if not unstable and newest is not None and h.max_version >= newest:
                h = dataclasses.replace(h, max_version=newest - 1)
            handlers[h.api_key] = h
    return handlers
