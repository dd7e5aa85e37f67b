"""The example clickstream pipeline, checked against a plain Python computation."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from typing import Any

from kaflite.cluster import Cluster
from kaflite.pipelines import clickstream
from kaflite.spark import AVAILABLE_NOW_WRAPPER
from tests.spark.conftest import produce, source, unique

WINDOW_MS = 60_000
WATERMARK_MS = 60_000


def events(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """n events over about five minutes, slightly out of order, then one late straggler."""
    rng = random.Random(seed)
    t0 = (int(time.time() * 1000) // WINDOW_MS - 10) * WINDOW_MS
    out = []
    for i in range(n):
        action = rng.choice(["view", "view", "view", "click", "click", "purchase"])
        out.append({"user": f"u{rng.randrange(20)}", "page": rng.choice(["/", "/cart", "/p/1"]),
                    "action": action,
                    "amount": round(rng.uniform(1, 50), 2) if action == "purchase" else 0.0,
                    "ts": t0 + i * 300_000 // n + rng.randrange(-2000, 2000)})
    return out


def expected(evts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What append mode must emit: every window the watermark has passed."""
    watermark = max(e["ts"] for e in evts) - WATERMARK_MS
    acc: dict[tuple[str, int], dict[str, Any]] = defaultdict(
        lambda: {"events": 0, "views": 0, "clicks": 0, "purchases": 0, "revenue": 0.0})
    for e in evts:
        start = e["ts"] // WINDOW_MS * WINDOW_MS
        a = acc[(e["page"], start)]
        a["events"] += 1
        a["views"] += e["action"] == "view"
        a["clicks"] += e["action"] == "click"
        a["purchases"] += e["action"] == "purchase"
        a["revenue"] += e["amount"] if e["action"] == "purchase" else 0.0
    out = {}
    for (page, start), a in acc.items():
        if start + WINDOW_MS <= watermark:
            out[f"{page}|{start}"] = {"page": page, "window_start": start,
                                      "window_end": start + WINDOW_MS, **a,
                                      "revenue": round(a["revenue"], 2)}
    return out


def test_clickstream_aggregates_match_python(spark: Any, kafka: Cluster, servers: str,
                                             tmp_path: Any) -> None:
    src, dst = unique("clicks"), unique("clicks-per-minute")
    kafka.create_topic(src, 2, 1)
    kafka.create_topic(dst, 1, 1)
    evts = events(600)
    produce(servers, src, [{"value": json.dumps(e).encode(), "key": e["user"].encode()}
                           for e in evts])
    parquet = str(tmp_path / "parquet")
    try:
        queries = clickstream.start(spark, servers, src, dst, str(tmp_path / "checkpoint"),
                                    parquet=parquet, available_now=True)
        for q in queries:
            q.awaitTermination(180)
            assert q.exception() is None
    finally:
        # On Spark 4.0/4.1 the pipeline enabled the AvailableNow wrapper on the session.
        for q in spark.streams.active:
            q.stop()
        spark.conf.unset(AVAILABLE_NOW_WRAPPER)
    want = expected(evts)
    assert len(want) >= 9          # three pages over at least three closed windows
    records = source(spark, servers, subscribe=dst).selectExpr(
        "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value").collect()
    got = {r.key: json.loads(r.value) for r in records}
    assert len(records) == len(got)            # append mode: one final row per window
    for row in got.values():
        row["revenue"] = round(row["revenue"], 2)
    assert got == want
    from_parquet = {f"{r.page}|{r.window_start}": r.events for r in spark.read.parquet(parquet)
                    .collect()}
    assert from_parquet == {k: v["events"] for k, v in want.items()}


def test_cli_parses_its_options() -> None:
    args = clickstream.build_parser().parse_args(
        ["--bootstrap", "b:9092", "--master", "local[2]", "--available-now"])
    assert args.master == "local[2]" and args.events == "clicks" and args.available_now


def kaflite(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "kaflite.cli", *args], capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    return proc


def test_cli_generate_then_pipeline(kafka: Cluster, servers: str, tmp_path: Any) -> None:
    """kaflite produce --generate clickstream, then kaflite pipeline clickstream (bounded)."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("PySpark needs a Java 17+ runtime")
    src, dst = unique("gen-clicks"), unique("gen-results")
    kaflite("produce", "-t", src, "-b", servers, "--create", "--generate", "clickstream",
            "--count", "500", "--span", "300", "--seed", "11")
    evts = [json.loads(line) for line in kaflite(
        "consume", "-t", src, "-b", servers, "-e", "-f", "%s\\n").stdout.splitlines()]
    assert len(evts) == 500
    run = kaflite("pipeline", "clickstream", "-b", servers, "--events", src, "--results", dst,
                  "--create", "--available-now", "--timeout", "240", "--master", "local[2]",
                  "--checkpoint", str(tmp_path / "checkpoint"),
                  "--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
                  "--conf", "spark.driver.bindAddress=127.0.0.1", timeout=300)
    assert "read 500 events" in run.stdout and "stopped after" not in run.stdout, run.stdout
    rows = [line.split("\t", 1) for line in kaflite(
        "consume", "-t", dst, "-b", servers, "-e", "-f", "%k\\t%s\\n").stdout.splitlines()]
    got = {key: json.loads(value) for key, value in rows}
    assert len(got) == len(rows)               # append mode: one final row per window
    for row in got.values():
        row["revenue"] = round(row["revenue"], 2)
    want = expected(evts)
    assert len(want) >= 7 * 2                  # seven pages over at least two closed windows
    assert got == want
