"""The main job, end to end: `kaflite demo --json`, its summary and the story it tells."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from kaflite.demo.run import DemoOptions, phase_titles

# a line Spark's or Java's logging writes (log4j's layouts, the JVM's own warnings)
NOISE = re.compile(r"\b(TRACE|DEBUG|INFO|WARN|ERROR)\b \w+: |log4j|^WARNING: |SLF4J|py4j")


def run_demo(tmp_path: Path, *args: str) -> tuple[dict, list[str]]:  # type: ignore[type-arg]
    proc = subprocess.run(
        [sys.executable, "-m", "kaflite.cli", "demo", "--json",
         "--log-file", str(tmp_path / "logs" / "demo.log"), *args],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "COLUMNS": "240"},  # wider than the story may be
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    summary: dict = json.loads(proc.stdout)  # type: ignore[type-arg]
    summary["_returncode"] = proc.returncode
    return summary, proc.stderr.splitlines()


def nones(value: object, path: str = "") -> list[str]:
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nones(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in nones(v, f"{path}[{i}]")]
    return [path] if value is None else []


def check_story(s: dict, lines: list[str], opts: DemoOptions) -> str:  # type: ignore[type-arg]
    """What the demo prints (on stderr with --json); returns the log file's text."""
    # The plan comes first: what the run starts, breaks and checks, and where logs go.
    assert lines[0].startswith("kaflite demo: the plan"), lines[:3]
    first_step = next(i for i, line in enumerate(lines) if line.startswith("step "))
    plan = [line.strip() for line in lines[:first_step]]
    for label in ("start:", "break:", "check:", "logs:"):
        assert any(line.startswith(label) for line in plan), (label, plan)
    # Every line fits in 100 columns; no None anywhere, printed or in the JSON.
    assert not [line for line in lines if cell_len(line) > 100]
    assert not [line for line in lines if re.search(r"\bNone\b", line)]
    assert not nones(s), nones(s)
    # Every phase is announced, numbered, as it starts, in order.
    titles = phase_titles(opts)
    announced = [line for line in lines if re.match(r"step \d+/\d+: ", line)]
    assert announced == [f"step {i}/{len(titles)}: {t}" for i, t in enumerate(titles, 1)]
    assert s["phases"] == titles
    # The status lines name the step under way (never "step: -").
    status = [line for line in lines if re.match(r"\[\d\d:\d\d:\d\d\] ", line)]
    assert status and all(re.match(r"\[..:..:..\] step \d+/\d+ \w", line) for line in status)
    # Spark's and Java's logs go to the file the summary names, not to the terminal.
    assert not [line for line in lines if NOISE.search(line)]
    summary_at = next(i for i, line in enumerate(lines) if "summary" in line and "─" in line)
    log_file = Path(s["log_file"])
    assert any(str(log_file) in line for line in lines[summary_at:])
    assert log_file.is_file()
    return log_file.read_text(errors="replace")


@pytest.mark.timeout_demo
def test_demo_with_spark_loses_nothing_tours_every_fault_and_checks_spark(
        tmp_path: Path) -> None:
    s, lines = run_demo(tmp_path, "--duration", "40")
    assert s["_returncode"] == 0, (s["checks"], s["failed_sends"], s["spark"])
    spark = s["spark"]
    assert spark["ok"] and spark["windows"] >= 10, spark
    assert spark["results"] >= spark["windows"] and not spark["missing"] and not spark["wrong"]
    assert s["ok"] and all(s["checks"].values())
    assert s["produced"] > 1000 and s["lost"] == 0 and s["consumed"] == s["produced"]
    # Issue 40: records flow from the traffic phase on, no faster than the plan's rate
    # (31,660 in "60 s" at 400/s had 11,120 sent while Spark started)
    assert s["produced"] <= s["rate"] * (s["producing_s"] + 1), s
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
    # Spark's clients have short, readable ids; they report nothing of themselves.
    spark_ids = {cid for cid in s["clients"] if cid.startswith("spark-")}
    assert {"spark-sink", "spark-source-executor"} <= spark_ids, spark_ids
    assert all(len(cid) <= 32 and "reported_by_client" not in s["clients"][cid]
               for cid in spark_ids), spark_ids
    log = check_story(s, lines, DemoOptions(brokers=3, spark=True, faults=True))
    assert "INFO SparkContext: Running Spark version" in log
    assert re.search(r"INFO MicroBatchExecution: ", log)


@pytest.mark.timeout_demo
def test_demo_without_spark_or_faults(tmp_path: Path) -> None:
    s, lines = run_demo(tmp_path, "--duration", "15", "--no-spark", "--no-faults")
    assert s["_returncode"] == 0 and s["ok"], (s["checks"], s["failed_sends"])
    assert s["tour"] == [] and s["spark"]["detail"] == "Spark off (--no-spark)"
    assert s["produced"] > 0 and s["lost"] == 0
    check_story(s, lines, DemoOptions(brokers=3, spark=False, faults=False))


@pytest.mark.timeout_demo
def test_demo_with_kip848_consumers_tours_every_fault(tmp_path: Path) -> None:
    s, lines = run_demo(tmp_path, "--duration", "20", "--no-spark", "--group-protocol",
                        "consumer")
    assert s["_returncode"] == 0 and s["ok"], (s["checks"], s["failed_sends"])
    assert s["produced"] > 0 and s["lost"] == 0
    assert [t["status"] for t in s["tour"]] == ["done"] * len(s["tour"]) and s["tour"]
    # The consumers were KIP-848 members: they joined with ConsumerGroupHeartbeat, and the
    # third one's arrival moved partitions by revocation, not by a JoinGroup round.
    seen = [line for t in s["tour"] for line in t["observed"]]
    assert any("joined group demo-group as" in line and "member epoch" in line
               for line in seen), seen
    assert any("group.protocol=consumer" in line for line in lines)
    check_story(s, lines, DemoOptions(brokers=3, spark=False, faults=True,
                                      group_protocol="consumer"))
