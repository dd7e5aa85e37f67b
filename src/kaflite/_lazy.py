"""Package names that are imported on first use (PEP 562).

A package's ``__init__`` that imports all of its modules makes every import of any one
of them pay for all: ``from kaflite.client.consumer._types import TopicPartition`` runs
``kaflite/client/consumer/__init__.py`` first. That matters where processes are short
and many: Spark starts a Python worker process for each planning step of a query, and
each used to import the whole client (about a second) to unpickle the data source.

    __getattr__, __dir__ = lazy_names(__name__, {"Consumer": "._consumer", ...})

Type checkers read the same names from imports under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, where: Mapping[str, str]
               ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: each name of ``where`` is imported
    from its module (absolute, or relative to ``package``) when first asked for, and kept."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
