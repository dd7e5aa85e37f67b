"""The example clickstream pipeline, checked against a plain Python computation."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import json
import random
import time
from typing import Any

from kaflite.cluster import Cluster
from kaflite.pipelines import clickstream
from kaflite.spark import AVAILABLE_NOW_WRAPPER
from tests.spark.clickstream_expected import WINDOW_MS, expected
from tests.spark.conftest import produce, source, unique


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


def test_kaflite_pipeline_keeps_sparks_logs_off_the_terminal(kafka: Cluster, servers: str,
                                                             tmp_path: Any) -> None:
    """Issue 40: ``kaflite pipeline`` printed Spark's WARN lines; they go to the log file
    it names (as the demo's do), and the terminal has the pipeline's own lines only."""
    import os
    import re
    import subprocess
    import sys

    src, dst = unique("clicks"), unique("clicks-per-minute")
    kafka.create_topic(src, 1, 1)
    produce(servers, src, [{"value": json.dumps(e).encode()} for e in events(50)])
    log = tmp_path / "spark.log"
    proc = subprocess.run(
        [sys.executable, "-m", "kaflite.cli", "pipeline", "clickstream", "-b", servers,
         "--events", src, "--results", dst, "--create", "--available-now",
         "--master", "local[1]", "--log-file", str(log)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    out = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 0, out
    assert out[0] == f"clickstream: Spark's logs go to {log}", out
    assert any(line.startswith("clickstream: read 50 events") for line in out), out
    assert not [x for x in out if re.search(r"\b(WARN|INFO|ERROR)\b|log4j|SLF4J|^WARNING", x)]
    assert "SparkContext: Running Spark version" in log.read_text()
