"""Event-loop lag: how late the cluster's event loop runs what is due.

Every broker of an embedded cluster (and the controller) shares one event loop,
so anything that holds the loop (a synchronous disk write, a long computation)
delays every request of every broker by as long. Issue 36 saw a cluster wedged
that way. ``LoopLagMonitor`` measures it the way Node's ``monitorEventLoopDelay``
does: a task asks to wake every ``interval_s`` and records how much later than
asked it woke. That overshoot is what any request arriving at the same moment
would have waited before its handler ran.

It keeps the last ``window`` samples (about 50 s at the default interval) for
percentiles, and the largest ever seen; ``/metrics`` exports them
(``kaflite_event_loop_lag_ms``), and ``benchmarks/`` reads them beside request
round trips.

Where a stall comes from: with ``KAFLITE_LOOP_STALL_MS`` set (or ``stall_ms``), a
watchdog thread looks at the loop every tenth of that; once the loop has not woken
for that long, it logs (``kaflite.loop``, WARNING) the loop thread's stack at that
moment, once per stall, and every garbage collection that took that long. Off by
default: a diagnostic, as py-spy is.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass

__all__ = ["STALL_ENV", "LagSummary", "LoopLagMonitor"]

log = logging.getLogger("kaflite.loop")
STALL_ENV = "KAFLITE_LOOP_STALL_MS"


@dataclass(frozen=True)
class LagSummary:
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float            # within the window
    worst_ms: float          # since the monitor started


class LoopLagMonitor:
    def __init__(self, interval_s: float = 0.05, window: int = 1000,
                 stall_ms: float | None = None) -> None:
        self.interval_s = interval_s
        self._samples: deque[float] = deque(maxlen=window)
        self._worst = 0.0
        self._task: asyncio.Task[None] | None = None
        env = os.environ.get(STALL_ENV)
        self.stall_ms = stall_ms if stall_ms is not None else (float(env) if env else None)
        self._beat = time.perf_counter()
        self._loop_thread = 0
        self._watchdog: threading.Thread | None = None
        self._stopped = threading.Event()
        self._gc_started = 0.0

    def _gc_timer(self, phase: str, info: dict[str, int]) -> None:
        """A collection as long as a stall is one (``gc.callbacks``)."""
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        took_ms = (time.perf_counter() - self._gc_started) * 1000
        if self.stall_ms is not None and took_ms >= self.stall_ms:
            log.warning("garbage collection of generation %s took %.0f ms (%s collected)",
                        info.get("generation"), took_ms, info.get("collected"))

    def start(self) -> None:
        """Start measuring the running loop (again, after a ``stop``)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                 name="loop-lag")
        if self.stall_ms and (self._watchdog is None or not self._watchdog.is_alive()):
            self._loop_thread = threading.get_ident()
            self._stopped.clear()
            self._watchdog = threading.Thread(target=self._watch, name="loop-stall-watch",
                                              daemon=True)
            self._watchdog.start()
            if self._gc_timer not in gc.callbacks:
                gc.callbacks.append(self._gc_timer)

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._stopped.set()
        if self._gc_timer in gc.callbacks:
            gc.callbacks.remove(self._gc_timer)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            asked = self._beat = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            self.record((time.perf_counter() - asked - self.interval_s) * 1000)

    def _watch(self) -> None:
        """Log the loop thread's stack once per stall longer than ``stall_ms``."""
        assert self.stall_ms is not None
        limit = self.stall_ms / 1000 + self.interval_s
        reported = 0.0      # the beat of the stall already reported
        while not self._stopped.wait(limit / 10):
            beat = self._beat
            if beat == reported or time.perf_counter() - beat < limit:
                continue
            reported = beat
            frame = sys._current_frames().get(self._loop_thread)
            if frame is not None:
                stack = "".join(traceback.format_stack(frame)[-25:])
                log.warning("event loop stalled for %.0f ms so far, in:\n%s",
                            (time.perf_counter() - beat) * 1000, stack)

    def record(self, lag_ms: float) -> None:
        lag_ms = max(lag_ms, 0.0)
        self._samples.append(lag_ms)
        self._worst = max(self._worst, lag_ms)

    def summary(self) -> LagSummary:
        ordered = sorted(self._samples)
        if not ordered:
            return LagSummary(0, 0.0, 0.0, 0.0, self._worst)

        def pct(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
        return LagSummary(len(ordered), pct(0.50), pct(0.99), ordered[-1], self._worst)
