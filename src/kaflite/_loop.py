"""Event loops: uvloop where it is installed, asyncio's own loop otherwise.

``LoopThread`` is the one "event loop in a background thread" of the project:
the sync cluster, the sync client façade and the Spark executors' clients each
run their coroutines on one, and so all of them get the same loop (uvloop when
installed). ``SharedLoop`` starts one per process on first use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread", "SharedLoop", "new_event_loop", "run"]

T = TypeVar("T")
START_TIMEOUT_S = 10.0


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


class LoopThread:
    """An event loop running for ever in a daemon thread named ``name``."""

    def __init__(self, name: str) -> None:
        self.loop = new_event_loop()
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self.loop.run_forever()

        self.thread = threading.Thread(target=main, name=name, daemon=True)
        self.thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"the {name} event loop did not start")

    @property
    def closed(self) -> bool:
        return self.loop.is_closed()

    def in_loop(self) -> bool:
        """Is the caller running on this loop's thread?"""
        return threading.current_thread() is self.thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result (from another thread)."""
        return self.submit(coro).result(timeout)

    def stop(self, timeout: float = START_TIMEOUT_S) -> None:
        """Stop the loop, wait for its thread, and close it."""
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)
        if not self.thread.is_alive():
            self.loop.close()


class SharedLoop:
    """One ``LoopThread`` per process, started on first use (again, if it was closed)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._current: LoopThread | None = None

    def get(self) -> LoopThread:
        with self._lock:
            if self._current is None or self._current.closed:
                self._current = LoopThread(self.name)
            return self._current
