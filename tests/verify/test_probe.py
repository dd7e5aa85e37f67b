"""The ApiVersions probe of ``kaflite.verify`` (``_probe``): it times real answers, and
counts a broker that does not answer as unreachable instead of timing it."""

from __future__ import annotations

import socket
import time

from kaflite.cluster import Cluster
from kaflite.verify._probe import ApiVersionsProbe


def test_the_probe_times_every_broker_and_counts_a_dead_one() -> None:
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with Cluster(brokers=2) as cluster:
        probe = ApiVersionsProbe(f"{cluster.bootstrap_servers},{dead}", interval_s=0.02).start()
        deadline = time.monotonic() + 20
        while len(probe.rtts_ms) < 10 or probe.unreachable < 5:
            assert time.monotonic() < deadline, "the probe did not run"
            time.sleep(0.05)
        stats = probe.stop()
    assert stats["apiversions probes"] >= 10
    # Two live brokers answered every round; the dead address never did.
    assert abs(stats["apiversions probes"] - 2 * stats["apiversions unreachable"]) <= 2
    assert 0 <= stats["apiversions p99 (ms)"] <= stats["apiversions worst (ms)"]
