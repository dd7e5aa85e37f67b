"""The demo's Spark step: the clickstream pipeline (kaflite.spark) on the events topic.

It runs ``kaflite.pipelines.clickstream`` on a local Spark session: Structured
Streaming reads ``events`` through the ``kaflite`` source, computes per-page
counts in 10-second event-time windows with a 5-second watermark, and writes
each window's final row to ``results`` through the ``kaflite`` sink.

At the end it checks the results against a plain Python computation over the
events the producer had acknowledged: every window the watermark has passed
must be in ``results``, exactly once, with exactly the expected counts.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict

from kaflite.pipelines.events import ClickEvent
from kaflite.pipelines.spark_logs import quiet_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["WATERMARK_MS", "WINDOW_MS", "SparkCheck", "SparkStep", "Window", "expected_windows"]

WINDOW_MS = 10_000
WATERMARK_MS = 5_000


class Counts(TypedDict):
    events: int
    views: int
    clicks: int
    purchases: int
    revenue: float


class Window(Counts):
    """One result row of the pipeline: a page's counts in one event-time window."""

    page: str
    window_start: int       # epoch ms
    window_end: int


class SparkCheck(TypedDict):
    """The Spark step's verdict (in the demo's summary)."""

    ok: bool
    detail: str
    windows: NotRequired[int]
    results: NotRequired[int]
    missing: NotRequired[list[str]]
    wrong: NotRequired[list[str]]


def expected_windows(events: Sequence[ClickEvent], watermark: int,
                     window_ms: int = WINDOW_MS) -> dict[str, Window]:
    """Per ``page|window_start``: the counts of every ``window_ms`` window closed by
    ``watermark`` (the demo's windows by default; the clickstream pipeline's are 60 s)."""
    acc: dict[tuple[str, int], Counts] = defaultdict(
        lambda: {"events": 0, "views": 0, "clicks": 0, "purchases": 0, "revenue": 0.0})
    for e in events:
        start = e["ts"] // window_ms * window_ms
        a = acc[(e["page"], start)]
        a["events"] += 1
        a["views"] += e["action"] == "view"
        a["clicks"] += e["action"] == "click"
        a["purchases"] += e["action"] == "purchase"
        a["revenue"] += e["amount"] if e["action"] == "purchase" else 0.0
    return {f"{page}|{start}": {"page": page, "window_start": start,
                                "window_end": start + window_ms, **a,
                                "revenue": round(a["revenue"], 2)}
            for (page, start), a in acc.items() if start + window_ms <= watermark}


class SparkStep:
    def __init__(self, bootstrap: str, events: str, results: str, enabled: bool,
                 log_file: Path) -> None:
        self.bootstrap = bootstrap
        self.log_file = log_file
        self.events = events
        self.results = results
        self.enabled = enabled
        self.status = "off (--no-spark)" if not enabled else "starting"
        self._spark: SparkSession | None = None
        self._queries: list[StreamingQuery] = []
        self._checkpoint = tempfile.mkdtemp(prefix="kaflite-demo-spark-")
        self._batches: dict[int, int] = {}     # batch id -> events it read
        self._started = time.monotonic()

    def start(self) -> None:
        if not self.enabled:
            return
        try:
            import kaflite.spark
            from kaflite.pipelines import clickstream
        except ImportError as exc:
            self.status = f"unavailable: {exc}"
            return
        self._spark = quiet_session("kaflite-demo", self.log_file, {
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
            "spark.ui.showConsoleProgress": "false"})
        kaflite.spark.register(self._spark)
        self._queries = clickstream.start(
            self._spark, self.bootstrap, self.events, self.results, self._checkpoint,
            window="10 seconds", watermark="5 seconds", trigger_interval="3 seconds")
        self._started = time.monotonic()
        self.status = "running"

    def describe(self) -> str:
        """A one-line status for the view: the micro-batches done and the events they
        read, or, before the first one is done, what the query is doing (its first batch
        reads everything since the start and warms Spark's Python workers up: it takes
        many times as long as the next ones)."""
        if self.status != "running" or not self._queries:
            return self.status
        query = self._queries[0]
        for p in query.recentProgress:    # the last 100 updates; kept here by batch id
            if int(p["numInputRows"]) or int(p["batchId"]) not in self._batches:
                self._batches[int(p["batchId"])] = int(p["numInputRows"])
        done = {b: n for b, n in self._batches.items() if n}
        if done:
            plural = "es" if len(done) > 1 else ""
            return f"running, {len(done)} micro-batch{plural}, {sum(done.values())} events read"
        message = str(query.status.get("message") or "starting").lower()
        return f"running {time.monotonic() - self._started:.0f}s, no micro-batch done yet " \
               f"({message})"

    def _results(self, spark: SparkSession) -> dict[str, Window]:
        rows = (spark.read.format("kaflite")
                .option("kafka.bootstrap.servers", self.bootstrap)
                .option("subscribe", self.results).load()
                .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
                .collect())
        out: dict[str, Window] = {}
        self._duplicates = 0
        for r in rows:
            if r.key in out:
                self._duplicates += 1
            value: Window = json.loads(r.value)
            value["revenue"] = round(value.get("revenue") or 0.0, 2)
            out[r.key] = value
        return out

    def finish(self, events: Sequence[ClickEvent], timeout: float = 90) -> SparkCheck:
        """Wait for the closed windows to reach ``results``, then compare."""
        if not self.enabled:
            return {"ok": True, "detail": "Spark off (--no-spark)"}
        if not self._queries or self._spark is None:
            return {"ok": False, "detail": self.status}
        # The last event sets the watermark; windows ending before it are final.
        watermark = max(e["ts"] for e in events) - WATERMARK_MS if events else 0
        want = expected_windows(events, watermark)
        deadline = time.monotonic() + timeout
        got: dict[str, Window] = {}
        while time.monotonic() < deadline:
            if self._queries[0].exception() is not None:
                return {"ok": False, "detail": f"query failed: {self._queries[0].exception()}"}
            got = self._results(self._spark)
            if set(want) <= set(got):
                break
            time.sleep(2)
        missing = sorted(set(want) - set(got))
        wrong = sorted(k for k in want if k in got and got[k] != want[k])
        ok = bool(want) and not missing and not wrong and not self._duplicates
        self.status = "verified" if ok else "mismatch"
        detail = (f"{len(want)} closed windows, {len(got)} result rows: "
                  f"{len(missing)} missing, {len(wrong)} wrong, {self._duplicates} duplicated")
        return {"ok": ok, "detail": detail, "windows": len(want), "results": len(got),
                "missing": missing[:5], "wrong": wrong[:5]}

    def stop(self) -> None:
        for q in self._queries:
            with contextlib.suppress(Exception):  # stopping is best effort at shutdown
                q.stop()
        self._queries = []
        if self._spark is not None:
            self._spark.stop()
            self._spark = None
        shutil.rmtree(self._checkpoint, ignore_errors=True)
