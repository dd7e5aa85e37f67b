"""The event-loop lag monitor (``kaflite.cluster.loop_lag``): a loop held by
synchronous work shows as lag, in the summary and in ``/metrics``."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.loop_lag import LoopLagMonitor
from kaflite.cluster.metrics import registry_for, render


def test_a_held_loop_shows_as_lag() -> None:
    async def main() -> None:
        monitor = LoopLagMonitor(interval_s=0.01)
        monitor.start()
        await asyncio.sleep(0.1)
        time.sleep(0.3)                 # the loop is held: the monitor wakes 0.3 s late
        await asyncio.sleep(0.05)
        await monitor.stop()
        lag = monitor.summary()
        assert lag.samples >= 2
        assert lag.worst_ms >= 250 and lag.max_ms == lag.worst_ms
        assert lag.p50_ms < lag.max_ms

    asyncio.run(main())


def _hold_the_loop(seconds: float) -> None:
    time.sleep(seconds)


def test_a_stall_logs_where_the_loop_was(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        monitor = LoopLagMonitor(interval_s=0.01, stall_ms=100)
        monitor.start()
        await asyncio.sleep(0.1)
        _hold_the_loop(0.5)
        await asyncio.sleep(0.1)
        await monitor.stop()

    with caplog.at_level(logging.WARNING, logger="kaflite.loop"):
        asyncio.run(main())
    stalls = [r.getMessage() for r in caplog.records if r.name == "kaflite.loop"]
    assert len(stalls) == 1, stalls          # one report per stall
    assert "event loop stalled" in stalls[0] and "_hold_the_loop" in stalls[0]


def test_the_cluster_exports_its_loop_lag() -> None:
    with Cluster(brokers=1) as cluster:
        deadline = time.monotonic() + 10
        while cluster.loop_lag.summary().samples == 0:
            assert time.monotonic() < deadline, "the monitor never ran"
            time.sleep(0.05)
        text = render(registry_for(cluster)).decode()
    lines = [line for line in text.splitlines() if line.startswith("kaflite_event_loop_lag_ms")]
    assert {line.split('"')[1] for line in lines} == {"p50", "p99", "max", "worst"}
