"""One module per Kafka API (or per small family of APIs); each declares its versions.

Every module in this package that defines ``HANDLERS`` (a list of ``Handler``)
is picked up, so adding an API means adding a module.
"""

from __future__ import annotations

import importlib
import pkgutil

from kaflite.cluster.handlers._base import AnyHandler, Handler

__all__ = ["AnyHandler", "Handler", "all_handlers"]


def all_handlers() -> dict[int, AnyHandler]:
    handlers: dict[int, AnyHandler] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for h in getattr(module, "HANDLERS", []):
            if h.api_key in handlers:
                raise RuntimeError(f"API key {h.api_key} has two handlers")
            handlers[h.api_key] = h
    return handlers
