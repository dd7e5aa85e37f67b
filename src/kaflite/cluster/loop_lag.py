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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass

__all__ = ["LagSummary", "LoopLagMonitor"]


@dataclass(frozen=True)
class LagSummary:
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float            # within the window
    worst_ms: float          # since the monitor started


class LoopLagMonitor:
    def __init__(self, interval_s: float = 0.05, window: int = 1000) -> None:
        self.interval_s = interval_s
        self._samples: deque[float] = deque(maxlen=window)
        self._worst = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start measuring the running loop (again, after a ``stop``)."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                 name="loop-lag")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.interval_s)
            self.record((time.perf_counter() - asked - self.interval_s) * 1000)

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
