"""One module per Kafka API (or per small family of APIs); each declares its versions.

Every module in this package that defines ``HANDLERS`` (a list of ``Handler``)
is picked up, so adding an API means adding a module.

A schema may mark its newest version unstable (``latestVersionUnstable``: Kafka
4.4's InitProducerId v6). As Kafka's broker, kaflite then
serves and advertises that version only with ``unstable.api.versions.enable``;
otherwise a request at it is refused as any unsupported version is.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

from kaflite.cluster.handlers._base import AnyHandler, Handler
from kaflite.protocol.messages import REGISTRY

__all__ = ["AnyHandler", "Handler", "all_handlers"]


def all_handlers(unstable: bool = False) -> dict[int, AnyHandler]:
    """Every handler; without ``unstable``, none serves a version its schema calls unstable."""
    handlers: dict[int, AnyHandler] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for h in getattr(module, "HANDLERS", []):
            if h.api_key in handlers:
                raise RuntimeError(f"API key {h.api_key} has two handlers")
            api = REGISTRY[h.api_key]
            if not unstable and api.latest_version_unstable \
                    and h.max_version == api.max_version:
                h = dataclasses.replace(h, max_version=h.max_version - 1)
            handlers[h.api_key] = h
    return handlers
