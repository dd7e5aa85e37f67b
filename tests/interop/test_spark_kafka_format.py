"""Spark's own Kafka connector (the ``kafka`` format, ``spark-sql-kafka-0-10``) against a
three-broker kaflite cluster, topics of three replicas: batch writes and reads, a
streaming read whose offsets live in its checkpoint, stopped in the middle of its backlog
and restarted (exactly once into a file sink), and a streaming write (Spark's Kafka sink).

The connector is Java: the driver lists offsets with kafka-clients' Admin, the executors
read with its KafkaConsumer and write with its KafkaProducer (idempotent by default), so
this also drives kaflite's broker with the Java client the way Spark does. Its jars come
from ``tools/ensure_spark_kafka.sh`` (Maven Central, cached outside the repository) and
are handed to Spark as local files in ``spark.jars``: the session resolves nothing at run
time. Without Java, Maven or PySpark the tests skip, saying why (under CI=true they fail).

One SparkSession for the module: the jars must be on the JVM's classpath from its start,
so a session started earlier in the same process (without them) cannot be reused. The
tests take the cluster first, so that the session stops before the brokers do (the
connector's cached producer would otherwise retry the stopped brokers while it stops).
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflite.client.sync import Producer
from kaflite.testing import KafliteCluster
from tests.interop._clients import create_topic, read_to_end, run, uid
from tests.interop.conftest import ROOT, ensured_path, make_target, started, unavailable

pytestmark = pytest.mark.interop

ENSURE_SPARK_KAFKA = ROOT / "tools" / "ensure_spark_kafka.sh"
PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
PARTITIONS = 3


@pytest.fixture(scope="module")
def spark_kafka_jars() -> str:
    """The connector's jars, comma-separated, for ``spark.jars``."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        unavailable("PySpark", str(exc))
    return str(ensured_path(ENSURE_SPARK_KAFKA, "Spark's Kafka connector", 600,
                            env={"PYTHON": sys.executable}))


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[KafliteCluster]:
    """Three kaflite brokers (as the other interop modules make them)."""
    target = make_target("kaflite-3", request)
    assert isinstance(target, KafliteCluster)
    for started_target in started(target):
        assert isinstance(started_target, KafliteCluster)
        yield started_target


@pytest.fixture(scope="module")
def spark(spark_kafka_jars: str) -> Iterator[Any]:
    from pyspark import SparkContext

    import kaflite.spark

    if SparkContext._gateway is not None:   # (PySpark has no public check)
        pytest.fail("a JVM was started earlier in this process without the connector's "
                    "jars; run this module in a pytest process of its own")
    try:
        session = kaflite.spark.local_session("kaflite-spark-kafka-interop",
                                              **{"spark.jars": spark_kafka_jars})
    except kaflite.spark.NoJavaError as exc:
        unavailable("Spark", str(exc))
    try:
        conf = session.sparkContext.getConf()
        assert conf.get("spark.jars.packages", None) is None, "Spark would resolve jars online"
        # The `kafka` format's provider is the jar from the cache, not one found elsewhere.
        jvm = session.sparkContext._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        where = (jvm.java.lang.Class.forName(PROVIDER, False, loader)
                 .getProtectionDomain().getCodeSource().getLocation().getPath())
        assert where in spark_kafka_jars.split(","), where
        yield session
    finally:
        session.stop()


def produce(servers: str, topic: str, keys: list[str]) -> None:
    """``key`` -> ``value-<key>`` into ``topic``, every one acknowledged."""
    with Producer({"bootstrap.servers": servers, "linger.ms": 5}) as p:
        for key in keys:
            p.produce(topic, f"value-{key}".encode(), key=key.encode())
        p.flush()


def kafka_options(servers: str, **options: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": servers, **options}


def java_clients(cluster: KafliteCluster) -> dict[str, dict[str, int]]:
    """Requests sent by each Java client (ApiVersions' software name), by client id."""
    seen: dict[str, dict[str, int]] = {}
    for c in cluster.cluster.clients(include_closed=True):
        if c.software_name == "apache-kafka-java":
            requests = seen.setdefault(f"{c.client_id} {c.software_version}", {})
            for api, n in c.requests.items():
                requests[api] = requests.get(api, 0) + n
    return seen


def test_batch_write_then_read(cluster: KafliteCluster, spark: Any) -> None:
    """``df.write.format("kafka")`` with keys, partitions and headers, then
    ``spark.read.format("kafka")``: the same records as kaflite's consumer reads."""
    servers = cluster.bootstrap_servers
    topic = uid("spark-kafka-batch")
    run(create_topic(servers, topic, PARTITIONS, 3))
    n = 300
    rows = [(f"k{i}", f"v{i}".encode(), i % PARTITIONS, [("h", str(i).encode())])
            for i in range(n)]
    df = spark.createDataFrame(
        rows, "key string, value binary, partition int, "
              "headers array<struct<key: string, value: binary>>")
    (df.write.format("kafka").options(**kafka_options(servers, topic=topic))
     .mode("append").save())

    # What kaflite stored, read back with kaflite's own consumer.
    stored = run(read_to_end(servers, topic, PARTITIONS, want=n))
    by_offset = {(r.partition, r.offset): r for r in stored}
    assert len(stored) == n == len(by_offset)
    assert sorted((r.key, r.value, r.partition) for r in stored) == sorted(
        (k.encode(), v, p) for k, v, p, _ in rows)
    assert [(h[0], bytes(h[1])) for h in stored[0].headers] == \
        [("h", stored[0].key.removeprefix(b"k"))]

    # Spark's batch read: every record once, at the offsets kaflite gave it.
    got = (spark.read.format("kafka")
           .options(**kafka_options(servers, subscribe=topic, includeHeaders="true"))
           .load().collect())
    assert len(got) == n
    for row in got:
        rec = by_offset.pop((row.partition, row.offset))
        assert (bytes(row.key), bytes(row.value), row.topic) == (rec.key, rec.value, topic)
        assert [(h.key, bytes(h.value)) for h in row.headers] == [
            (k, bytes(v)) for k, v in rec.headers]
    assert not by_offset
    for p in range(PARTITIONS):    # offsets 0..99 in each partition, none skipped
        assert sorted(r.offset for r in got if r.partition == p) == list(range(n // PARTITIONS))

    # A bounded read: the offsets JSON of Spark's options, ending before the end.
    ending = json.dumps({topic: {str(p): 10 for p in range(PARTITIONS)}})
    part = (spark.read.format("kafka")
            .options(**kafka_options(servers, subscribe=topic, endingOffsets=ending))
            .load().select("partition", "offset").collect())
    assert sorted((r.partition, r.offset) for r in part) == [
        (p, o) for p in range(PARTITIONS) for o in range(10)]

    java = java_clients(cluster)
    assert any(r.get("Produce") and r.get("InitProducerId") for r in java.values()), java
    assert any(r.get("Fetch") for r in java.values()), java
    assert any(r.get("ListOffsets") for r in java.values()), java


def _sink_rows(spark: Any, out: Path) -> list[Any]:
    """The file sink's committed output (read through its ``_spark_metadata`` log)."""
    if not (out / "_spark_metadata").exists():
        return []
    rows: list[Any] = spark.read.parquet(str(out)).collect()
    return rows


def _checkpoint_offsets(checkpoint: Path, topic: str) -> dict[int, int]:
    """The source offsets of the checkpoint's newest batch."""
    newest = max((f for f in (checkpoint / "offsets").iterdir() if f.name.isdigit()),
                 key=lambda f: int(f.name))
    source = json.loads(newest.read_text().splitlines()[-1])
    return {int(p): o for p, o in source[topic].items()}


def test_streaming_read_exactly_once_across_restart(cluster: KafliteCluster, spark: Any,
                                                    tmp_path: Path) -> None:
    """A stream of the ``kafka`` format into a parquet sink, stopped while part of its
    backlog is unread, restarted from its checkpoint after more records arrived: every
    record in the sink exactly once, and the checkpoint's offsets at the topic's end."""
    servers = cluster.bootstrap_servers
    topic = uid("spark-kafka-stream")
    run(create_topic(servers, topic, PARTITIONS, 3))
    first = [f"a{i:03d}" for i in range(150)]
    produce(servers, topic, first)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start(trigger: dict[str, Any], per_trigger: int) -> Any:
        stream = (spark.readStream.format("kafka")
                  .options(**kafka_options(servers, subscribe=topic,
                                           startingOffsets="earliest",
                                           maxOffsetsPerTrigger=str(per_trigger)))
                  .load()
                  .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                              "partition", "offset"))
        return (stream.writeStream.format("parquet").option("path", str(out))
                .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())

    # Run 1: 20 offsets a trigger, every 2 s, stopped after its first non-empty batch.
    query = start({"processingTime": "2 seconds"}, 20)
    try:
        deadline = time.monotonic() + 60
        while not any(p["numInputRows"] for p in query.recentProgress):
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, "no batch in 60 s"
            time.sleep(0.1)
    finally:
        query.stop()
    partial = _sink_rows(spark, out)
    assert 0 < len(partial) < len(first), f"{len(partial)} rows: not stopped mid-backlog"

    # More records, then run 2 from the same checkpoint until everything is read.
    second = [f"b{i:03d}" for i in range(150)]
    produce(servers, topic, second)
    query = start({"availableNow": True}, 100)
    try:
        assert query.awaitTermination(120), "the available-now run did not finish"
        assert query.exception() is None, query.exception()
    finally:
        query.stop()

    rows = _sink_rows(spark, out)
    keys = Counter(r.key for r in rows)
    assert not [k for k, c in keys.items() if c > 1], "records written to the sink twice"
    assert sorted(keys) == sorted(first + second), "records lost"
    assert all(r.value == f"value-{r.key}" for r in rows)
    ends = Counter(r.partition for r in rows)
    assert _checkpoint_offsets(checkpoint, topic) == {p: ends[p] for p in range(PARTITIONS)}
    # Each partition's offsets once each, from 0: none skipped, none twice.
    for p in range(PARTITIONS):
        assert sorted(r.offset for r in rows if r.partition == p) == list(range(ends[p]))


def _failed_tasks(spark: Any, job_group: str) -> int:
    """Failed task attempts in the jobs of a group (a streaming query's jobs are in the
    group of its run id)."""
    tracker = spark.sparkContext.statusTracker()
    failed = 0
    for job in tracker.getJobIdsForGroup(job_group):
        info = tracker.getJobInfo(job)
        for stage in info.stageIds if info else ():
            stage_info = tracker.getStageInfo(stage)
            failed += stage_info.numFailedTasks if stage_info else 0
    return failed


def test_streaming_write_to_kafka_sink(cluster: KafliteCluster, spark: Any,
                                       tmp_path: Path) -> None:
    """``writeStream.format("kafka")``: a topic copied to another by a stream, run twice
    from its checkpoint. Spark's Kafka sink is at least once (a retried task sends its
    rows again), so a lost record fails and a duplicate is reported as a warning."""
    servers = cluster.bootstrap_servers
    source, sink = uid("spark-kafka-from"), uid("spark-kafka-to")
    run(create_topic(servers, source, PARTITIONS, 3))
    run(create_topic(servers, sink, PARTITIONS, 3))
    checkpoint = tmp_path / "checkpoint"

    failed_tasks = 0

    def copy() -> None:
        nonlocal failed_tasks
        query = (spark.readStream.format("kafka")
                 .options(**kafka_options(servers, subscribe=source,
                                          startingOffsets="earliest"))
                 .load().selectExpr("key", "value")
                 .writeStream.format("kafka")
                 .options(**kafka_options(servers, topic=sink))
                 .option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        try:
            assert query.awaitTermination(120), "the available-now copy did not finish"
            assert query.exception() is None, query.exception()
        finally:
            query.stop()
        failed_tasks += _failed_tasks(spark, str(query.runId))

    first = [f"a{i:03d}" for i in range(100)]
    produce(servers, source, first)
    copy()
    second = [f"b{i:03d}" for i in range(100)]
    produce(servers, source, second)
    copy()

    written = run(read_to_end(servers, sink, PARTITIONS, want=len(first) + len(second)))
    keys = Counter(r.key.decode() for r in written)
    assert sorted(keys) == sorted(first + second), "records lost (or foreign ones written)"
    assert all(r.value == b"value-" + r.key for r in written)
    assert sum(_checkpoint_offsets(checkpoint, source).values()) == len(first) + len(second)
    twice = {k: c for k, c in keys.items() if c > 1}
    # Only a task that failed and ran again may send its rows twice; with none, a
    # duplicate means the restart read what the checkpoint said was done.
    assert not twice or failed_tasks, f"{len(twice)} records written twice with no task " \
                                      f"retried: {sorted(twice)[:10]}"
    if twice:
        warnings.warn(f"Spark's Kafka sink wrote {len(twice)} records more than once after "
                      f"{failed_tasks} failed tasks (at least once by design)", stacklevel=1)
