"""The main job, end to end: `kaflite demo --json` and its summary."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_demo(*args: str) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run(
        [sys.executable, "-m", "kaflite.cli", "demo", "--json", *args],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    summary: dict = json.loads(proc.stdout)  # type: ignore[type-arg]
    summary["_returncode"] = proc.returncode
    return summary


@pytest.mark.timeout_demo
def test_demo_with_spark_loses_nothing_tours_every_fault_and_checks_spark() -> None:
    s = run_demo("--duration", "60")
    assert s["_returncode"] == 0, (s["checks"], s["spark"])
    spark = s["spark"]
    assert spark["ok"] and spark["windows"] >= 10, spark
    assert spark["results"] >= spark["windows"] and not spark["missing"] and not spark["wrong"]
    assert s["ok"] and all(s["checks"].values())
    assert s["produced"] > 1000 and s["lost"] == 0 and s["consumed"] == s["produced"]
    steps = {t["step"]: t for t in s["tour"]}
    assert len(steps) == 5 and all(t["status"] == "done" for t in steps.values())
    moved = steps["move the leader of partition 0"]
    assert any("NOT_LEADER_OR_FOLLOWER" in o or "leader" in o for o in moved["observed"])
    coord = steps["move the group coordinator"]
    assert any("coordinator" in o for o in coord["observed"])
    added = steps["add a third consumer"]
    assert any("revoked" in o or "assigned" in o or "rebalance" in o for o in added["observed"])
    assert "back in the ISR" in steps["restart broker 2"]["happened"]
    # Every consumer has exactly one coordinator connection and leader connections,
    # as the brokers' registry sees them and as the client reports itself.
    for name in ("consumer-1", "consumer-2", "consumer-3"):
        c = s["clients"][name]
        assert c["roles"].get("group-coordinator") == 1, (name, c)
        assert c["roles"].get("partition-leader", 0) >= 1, (name, c)
        # to within a connection still being opened or closed at the snapshot
        assert abs(c["connections"] - c["reported_by_client"]) <= 1, (name, c)
        assert c["heartbeat_interval_ms"] is not None


@pytest.mark.timeout_demo
def test_demo_without_spark_or_faults() -> None:
    s = run_demo("--duration", "15", "--no-spark", "--no-faults")
    assert s["_returncode"] == 0 and s["ok"], s["checks"]
    assert s["tour"] == [] and s["spark"]["detail"] == "Spark off (--no-spark)"
    assert s["produced"] > 0 and s["lost"] == 0
