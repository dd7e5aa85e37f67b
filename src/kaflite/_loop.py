"""Event loops: uvloop where it is installed, asyncio's own loop otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["new_event_loop", "run"]

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Like ``asyncio.run``, on uvloop when available."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)
