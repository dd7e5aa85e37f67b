"""Structured Streaming: micro-batches, restarts, new partitions, data loss, admission control."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import contextlib
import glob
import json
import os
import threading
from typing import Any

import pytest

from kaflite.client import TopicPartition
from kaflite.cluster import Cluster
from kaflite.spark import AVAILABLE_NOW_WRAPPER, enable_available_now
from kaflite.spark.options import parse_source_options
from kaflite.spark.stream import (
    HAS_ADMISSION_CONTROL,
    KafkaStreamReader,
    ReadAllAvailable,
    ReadMaxRows,
)
from tests.conftest import wait_for
from tests.spark.conftest import admin, produce, source, unique

TP = TopicPartition


def values(n0: int, n1: int) -> list[dict[str, Any]]:
    return [{"value": f"v{i}".encode(), "key": str(i).encode()} for i in range(n0, n1)]


def last_offsets(checkpoint: str) -> dict[str, Any]:
    """The newest end offsets Spark wrote to the checkpoint (the source's own JSON)."""
    files = sorted(glob.glob(os.path.join(checkpoint, "offsets", "*")),
                   key=lambda f: int(os.path.basename(f)))
    with open(files[-1]) as f:
        return dict(json.loads(f.read().splitlines()[-1]))


class Collector:
    """A foreachBatch sink that keeps (batch id, partition, offset, value) rows."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int, str]] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        got = [(batch_id, r.partition, r.offset, r.value)
               for r in df.selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
               .collect()]
        with self.lock:
            self.rows += got

    def values(self) -> list[str]:
        with self.lock:
            return [r[3] for r in self.rows]


def test_micro_batches_then_restart_reads_every_record_once(
        spark: Any, kafka: Cluster, servers: str, tmp_path: Any) -> None:
    topic = unique("stream")
    kafka.create_topic(topic, 2, 1)
    # Spark 4.2+ caps every batch at maxOffsetsPerTrigger. Spark 4.0/4.1 give a Python
    # source no limit, and the reader cannot cap the first batch of a run (see the
    # kaflite.spark.stream docstring): there the query starts on 10 records, the bulk
    # comes once that first batch ran, and every later batch must be capped.
    produce(servers, topic, values(0, 1000 if HAS_ADMISSION_CONTROL else 10))
    checkpoint, out = str(tmp_path / "checkpoint"), str(tmp_path / "out")

    def start(trigger: dict[str, Any]) -> Any:
        df = source(spark, servers, stream=True, subscribe=topic, startingOffsets="earliest",
                    maxOffsetsPerTrigger="200")
        return (df.selectExpr("CAST(value AS STRING) AS value").writeStream.format("parquet")
                .option("checkpointLocation", checkpoint).option("path", out)
                .trigger(**trigger).start())

    q = start({"processingTime": "100 milliseconds"})
    try:
        if not HAS_ADMISSION_CONTROL:
            wait_for(lambda: any(p["numInputRows"] for p in q.recentProgress),
                     what="the first micro-batch", timeout=90)
            produce(servers, topic, values(10, 1000))
        wait_for(lambda: sum(p["numInputRows"] for p in q.recentProgress) >= 600,
                 what="three micro-batches", timeout=90)
    finally:
        q.stop()
    progress = [p for p in q.recentProgress if p["numInputRows"]]
    if HAS_ADMISSION_CONTROL:
        assert len(progress) >= 3
        assert all(p["numInputRows"] <= 200 for p in progress)
    else:
        assert progress[0]["numInputRows"] == 10
        assert len(progress) >= 4          # >= 590 more records, at most 200 a batch
        assert all(p["numInputRows"] <= 200 for p in progress[1:])
    stopped_at = last_offsets(checkpoint)
    assert set(stopped_at) == {topic} and set(stopped_at[topic]) == {"0", "1"}

    produce(servers, topic, values(1000, 1500))
    # The stop may have left the newest batch uncommitted. Without their AvailableNow
    # wrapper Spark 4.0/4.1 would run only that batch again and stop (a no-op on 4.2+).
    enable_available_now(spark)
    try:
        q = start({"availableNow": True})
        try:
            assert q.awaitTermination(120), "the AvailableNow query did not finish"
        finally:
            q.stop()
    finally:
        spark.conf.unset(AVAILABLE_NOW_WRAPPER)
    assert q.exception() is None
    rows = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    if HAS_ADMISSION_CONTROL:
        assert all(n <= 200 for n in rows)
    else:
        # Spark 4.0/4.1: the uncommitted batch again, if there was one (capped when it was
        # planned), then the wrapper's one uncapped batch up to the offsets at the start.
        assert len(rows) <= 2 and all(n <= 200 for n in rows[:-1])
        assert rows[-1] == 1500 - sum(stopped_at[topic].values())
    got = [r.value for r in spark.read.parquet(out).collect()]
    assert len(got) == 1500
    assert sorted(got) == sorted(f"v{i}" for i in range(1500))
    end = last_offsets(checkpoint)[topic]
    assert sum(end.values()) == 1500
    reported = q.lastProgress["sources"][0]["latestOffset"]   # reportLatestOffset()
    assert json.loads(reported) == {topic: end}


def test_available_now_runs_read_to_the_end_across_restarts(
        spark: Any, kafka: Cluster, servers: str, tmp_path: Any) -> None:
    topic = unique("availnow")
    kafka.create_topic(topic, 2, 1)
    checkpoint = str(tmp_path / "ck")

    def run(n0: int, n1: int) -> list[int]:
        """Write records n0..n1, run the query to its end; the sizes of its batches."""
        produce(servers, topic, values(n0, n1))
        before = len(sink.rows)
        df = source(spark, servers, stream=True, subscribe=topic, startingOffsets="earliest",
                    maxOffsetsPerTrigger="50")
        q = (df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        try:
            assert q.awaitTermination(120), "the AvailableNow query did not finish"
        finally:
            q.stop()
        assert q.exception() is None
        assert sorted(sink.values()[before:]) == sorted(f"v{i}" for i in range(n0, n1))
        return [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]

    sink = Collector()
    # Spark 4.0/4.1 need their AvailableNow wrapper (a no-op on 4.2+).
    enable_available_now(spark)
    try:
        for n0, n1 in ((0, 120), (120, 250)):      # a new query, then a restart
            sizes = run(n0, n1)
            if HAS_ADMISSION_CONTROL:
                assert len(sizes) >= 3 and all(n <= 50 for n in sizes)
            else:
                # The wrapper asks a Python source for its latest offsets once: one batch.
                assert sizes == [n1 - n0]
    finally:
        spark.conf.unset(AVAILABLE_NOW_WRAPPER)
    assert sorted(sink.values()) == sorted(f"v{i}" for i in range(250))


def test_partition_added_mid_stream_is_read_from_earliest(
        spark: Any, kafka: Cluster, servers: str, tmp_path: Any) -> None:
    topic = unique("grow")
    kafka.create_topic(topic, 1, 1)
    produce(servers, topic, values(0, 10))
    sink = Collector()
    df = source(spark, servers, stream=True, subscribe=topic, startingOffsets="earliest")
    q = (df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck"))
         .trigger(processingTime="200 milliseconds").start())
    try:
        wait_for(lambda: len(sink.values()) >= 10, what="the first 10 records", timeout=90)
        a = admin(servers)
        try:
            a.create_partitions({topic: 2})
        finally:
            a.close()
        produce(servers, topic, [{"value": f"new{i}".encode(), "partition": 1}
                                 for i in range(5)])
        produce(servers, topic, [{"value": b"old10", "partition": 0}])
        wait_for(lambda: len(sink.values()) >= 16, what="records of the new partition",
                 timeout=90)
    finally:
        q.stop()
    assert sorted(sink.values()) == sorted([f"v{i}" for i in range(10)] + ["old10"]
                                           + [f"new{i}" for i in range(5)])
    assert sorted((p, o) for _, p, o, v in sink.rows if v.startswith("new")) == \
        [(1, i) for i in range(5)]


def test_deleted_records_fail_the_query_or_are_skipped(
        spark: Any, kafka: Cluster, servers: str, tmp_path: Any) -> None:
    topic = unique("loss")
    kafka.create_topic(topic, 1, 1)
    produce(servers, topic, values(0, 100))
    checkpoint = str(tmp_path / "ck")

    def run(sink: Collector, **options: str) -> Any:
        df = source(spark, servers, stream=True, subscribe=topic, startingOffsets="earliest",
                    **options)
        q = (df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
        with contextlib.suppress(Exception):   # the failing run raises here
            q.awaitTermination(120)
        return q

    first = Collector()
    assert run(first).exception() is None
    assert sorted(first.values()) == sorted(f"v{i}" for i in range(100))

    produce(servers, topic, values(100, 200))
    a = admin(servers)
    try:
        # exactly 200 records in the log, so offsets 150.. hold v150.. (a duplicate
        # write would shift them and show up below as values under 150)
        end = a.list_offsets({TP(topic, 0): "latest"})[TP(topic, 0)]
        assert end is not None and end.offset == 200, end
        a.delete_records({TP(topic, 0): 150})
    finally:
        a.close()

    failing = Collector()
    q = run(failing)
    assert q.exception() is not None
    message = str(q.exception())
    assert "Cannot fetch offset 100" in message and "failOnDataLoss" in message
    assert failing.rows == []

    skipping = Collector()
    q = run(skipping, failOnDataLoss="false")
    assert q.exception() is None
    assert sorted(skipping.values()) == sorted(f"v{i}" for i in range(150, 200)), \
        sorted(r[1:] for r in skipping.rows)


# -- the driver side, without Spark --------------------------------------------------------
def reader(servers: str, **options: str) -> KafkaStreamReader:
    return KafkaStreamReader(parse_source_options(
        {"kafka.bootstrap.servers": servers, **options}, streaming=True))


def test_driver_offsets_limits_and_new_partitions(kafka: Cluster, servers: str) -> None:
    topic = unique("driver")
    kafka.create_topic(topic, 2, 1)
    produce(servers, topic, [{"value": b"x", "partition": i % 2} for i in range(100)])
    r = reader(servers, subscribe=topic, maxOffsetsPerTrigger="30")
    r2 = reader(servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30")
    try:
        start = r.initialOffset()
        assert start == {topic: {"0": 50, "1": 50}}        # latest, by default
        start = r2.initialOffset()
        assert start == {topic: {"0": 0, "1": 0}}
        assert r2.getDefaultReadLimit() == ReadMaxRows(30)
        end = r2.latestOffset(start, ReadMaxRows(30))
        assert end == {topic: {"0": 15, "1": 15}}
        assert r2.reportLatestOffset() == {topic: {"0": 50, "1": 50}}
        assert r2.metrics(end) == {"minOffsetsBehindLatest": "35",
                                   "maxOffsetsBehindLatest": "35",
                                   "avgOffsetsBehindLatest": "35.0"}
        assert r2.latestOffset(start, ReadAllAvailable()) == {topic: {"0": 50, "1": 50}}
        parts = r2.partitions(start, end)
        assert [str(p.range) for p in parts] == [f"{topic}-0[0, 15)", f"{topic}-1[0, 15)"]
        assert r2.partitions(end, end) == []

        a = admin(servers)
        try:
            a.create_partitions({topic: 3})
        finally:
            a.close()
        produce(servers, topic, [{"value": b"y", "partition": 2} for _ in range(7)])
        later = r2.latestOffset(end, ReadAllAvailable())
        assert later == {topic: {"0": 50, "1": 50, "2": 7}}
        parts = r2.partitions(end, later)
        assert [str(p.range) for p in parts] == [
            f"{topic}-0[15, 50)", f"{topic}-1[15, 50)", f"{topic}-2[0, 7)"]
    finally:
        r.stop()
        r2.stop()


def test_driver_min_offsets_and_available_now(kafka: Cluster, servers: str) -> None:
    topic = unique("admission")
    kafka.create_topic(topic, 1, 1)
    produce(servers, topic, values(0, 10))
    r = reader(servers, subscribe=topic, startingOffsets="earliest",
               minOffsetsPerTrigger="50", maxTriggerDelay="1h")
    try:
        start = r.initialOffset()
        limit = r.getDefaultReadLimit()
        # The first trigger always runs (as in Spark, the delay counts from the last one).
        first = r.latestOffset(start, limit)
        assert first == {topic: {"0": 10}}
        produce(servers, topic, values(10, 20))
        assert r.latestOffset(first, limit) == first          # 10 waiting < 50: held back
        produce(servers, topic, values(20, 70))
        assert r.latestOffset(first, limit) == {topic: {"0": 70}}
        # Trigger.AvailableNow: the target is fixed at the first call after prepare.
        r.prepareForTriggerAvailableNow()
        target = r.latestOffset(first, limit)
        produce(servers, topic, values(70, 80))
        assert r.latestOffset(first, limit) == target == {topic: {"0": 70}}
    finally:
        r.stop()


def test_available_now_wrapper_only_where_needed(spark: Any) -> None:
    session = spark.newSession()           # SQL settings of its own
    assert enable_available_now(session) is not HAS_ADMISSION_CONTROL
    assert session.conf.get(AVAILABLE_NOW_WRAPPER, "false") == \
        ("false" if HAS_ADMISSION_CONTROL else "true")
    assert spark.conf.get(AVAILABLE_NOW_WRAPPER, "false") == "false"


def test_streaming_rejects_ending_offsets(spark: Any, servers: str) -> None:
    # The stream reader is made when the query starts, on the query's thread.
    q = (source(spark, servers, stream=True, subscribe="t", endingOffsets="latest")
         .writeStream.format("console").start())
    with pytest.raises(Exception, match="ending offset not valid in streaming queries"):
        q.awaitTermination(60)
    q.stop()


def test_driver_self_limits_without_admission_control(kafka: Cluster, servers: str) -> None:
    # Spark 4.0/4.1 call latestOffset() with no start and no limit; these are their calls.
    topic = unique("selflimit")
    kafka.create_topic(topic, 1, 1)
    produce(servers, topic, values(0, 100))
    # A new query: latestOffset() first, then initialOffset() for the start of batch 0.
    r = reader(servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30")
    try:
        first = r.latestOffset()
        assert first == {topic: {"0": 100}}         # the first answer is never capped
        start = r.initialOffset()
        assert start == {topic: {"0": 0}}
        r.partitions(start, first)
        produce(servers, topic, values(100, 200))
        second = r.latestOffset()
        assert second == {topic: {"0": 130}}        # capped from the end of the last plan
        r.partitions(first, second)
        assert r.latestOffset() == {topic: {"0": 160}}
    finally:
        r.stop()
    # A restart: Spark first plans the newest batch of the offset log again, as (L, L).
    r = reader(servers, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger="30")
    try:
        seen = {topic: {"0": 160}}
        assert r.partitions(seen, seen) == []
        first = r.latestOffset()
        assert first == {topic: {"0": 200}}         # maybe all of an AvailableNow run
        # The AvailableNow wrapper asks again (for its report) before it plans (seen, first):
        # capped from the previous answer, never behind it.
        assert r.latestOffset() == first
        r.partitions(seen, first)
        produce(servers, topic, values(200, 300))
        assert r.latestOffset() == {topic: {"0": 230}}
    finally:
        r.stop()


def test_driver_initial_offsets_do_not_move(kafka: Cluster, servers: str) -> None:
    # Spark 4.0/4.1 ask for batch 0's end before its start (initialOffset): with
    # startingOffsets=latest, records written in between must not move the start past it.
    topic = unique("initial")
    kafka.create_topic(topic, 1, 1)
    produce(servers, topic, values(0, 10))
    r = reader(servers, subscribe=topic, maxOffsetsPerTrigger="30")
    try:
        end = r.latestOffset()
        produce(servers, topic, values(10, 20))
        assert r.initialOffset() == end == {topic: {"0": 10}}
        assert r.partitions(r.initialOffset(), end) == []
    finally:
        r.stop()
