"""Keyed timers for the coordinator (Kafka's ``CoordinatorTimer``).

A timer key names one pending deadline: ``heartbeat-<group>-<member>``,
``join-<group>``, ``sync-<group>``. Scheduling a key again replaces its
deadline, and unloading a partition cancels all of its keys at once, so a
member's session can never expire on a broker that no longer coordinates it.

``LoopTimer`` runs on the asyncio loop with wall-clock ``now_ms`` (commit
timestamps and state timestamps are wall-clock in Kafka's records).
``ManualTimer`` is the fake clock for unit tests: time moves only when the
test calls ``advance``.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["LoopTimer", "ManualTimer", "Timer"]

log = logging.getLogger("kaflite.cluster.groups")


class Timer(Protocol):
    def now_ms(self) -> int: ...

    def schedule(self, key: str, delay_ms: float, fn: Callable[[], None]) -> None: ...

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...

    def close(self) -> None: ...


def _run(key: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception:  # a timer bug must not take the loop down
        log.exception("coordinator timer %s failed", key)


class LoopTimer:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self._closed = False

    def now_ms(self) -> int:
        return int(time.time() * 1000)

    def schedule(self, key: str, delay_ms: float, fn: Callable[[], None]) -> None:
        if self._closed:
            return
        self.cancel(key)

        def fire() -> None:
            self._handles.pop(key, None)
            _run(key, fn)

        self._handles[key] = self._loop.call_later(max(delay_ms, 0) / 1000, fire)

    def cancel(self, key: str) -> None:
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def is_scheduled(self, key: str) -> bool:
        return key in self._handles

    def close(self) -> None:
        self._closed = True
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()


class ManualTimer:
    """A fake clock: deadlines fire, in order, only inside ``advance``."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._heap: list[tuple[int, int, str]] = []
        self._live: dict[str, tuple[int, Callable[[], None]]] = {}
        self._seq = itertools.count()
        self._closed = False

    def now_ms(self) -> int:
        return self._now

    def schedule(self, key: str, delay_ms: float, fn: Callable[[], None]) -> None:
        if self._closed:
            return
        seq = next(self._seq)
        self._live[key] = (seq, fn)
        heapq.heappush(self._heap, (self._now + int(max(delay_ms, 0)), seq, key))

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)

    def is_scheduled(self, key: str) -> bool:
        return key in self._live

    def deadline(self, key: str) -> int | None:
        entry = self._live.get(key)
        if entry is None:
            return None
        return next(d for d, s, k in self._heap if k == key and s == entry[0])

    def advance(self, ms: int) -> None:
        target = self._now + ms
        while self._heap and self._heap[0][0] <= target:
            deadline, seq, key = heapq.heappop(self._heap)
            entry = self._live.get(key)
            if entry is None or entry[0] != seq:
                continue  # cancelled or rescheduled
            del self._live[key]
            self._now = max(self._now, deadline)
            _run(key, entry[1])
        self._now = target

    def close(self) -> None:
        self._closed = True
        self._live.clear()
        self._heap.clear()
