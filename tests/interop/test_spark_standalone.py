"""The ``kaflite`` format on a real Spark cluster: a standalone master and two workers,
each a JVM of its own (``kaflite.testing.spark_cluster``), and three kaflite brokers.

On ``local[2]`` (tests/spark) the executors share the driver's JVM; here each executor
is a JVM launched by its worker, with Python workers of its own, so the source's and
the sink's clients live in processes the driver does not own. The module checks batch
and streaming reads and writes there, exactly-once output when a worker process (with
its executor) is SIGKILLed in the middle of a micro-batch while a broker is killed too,
and that the brokers' connection registry shows the executors' connections under the
executors' client id, with their roles.

Without Java or PySpark the tests skip, saying why (under CI=true they fail).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflite.client.sync import Producer
from kaflite.testing import KafliteCluster
from tests.interop._clients import create_topic, run, uid
from tests.interop.conftest import make_target, started, unavailable

pytestmark = pytest.mark.interop

PARTITIONS = 3
STREAM_CLIENT_ID = "spark-source-executor"      # SourceOptions.executor_client_id()


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[KafliteCluster]:
    """Three kaflite brokers; topics of three replicas, two of them in sync at least."""
    target = make_target("kaflite-3", request, config={"min.insync.replicas": 2})
    assert isinstance(target, KafliteCluster)
    for started_target in started(target):
        assert isinstance(started_target, KafliteCluster)
        yield started_target


@pytest.fixture(scope="module")
def standalone() -> Iterator[Any]:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        unavailable("PySpark", str(exc))
    from kaflite.spark._session import NoJavaError, require_java
    from kaflite.testing.spark_cluster import SparkStandalone

    try:
        require_java()
    except NoJavaError as exc:
        unavailable("Spark", str(exc))
    with SparkStandalone(workers=2) as spark_cluster:
        yield spark_cluster


@pytest.fixture(scope="module")
def spark(cluster: KafliteCluster, standalone: Any) -> Iterator[Any]:
    """A driver in this process on the standalone master (stopped before the brokers)."""
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        pytest.fail("a SparkContext of another module is still running in this process")
    session = standalone.session("kaflite-standalone-interop",
                                 **{"spark.task.maxFailures": "8"})
    try:
        assert session.sparkContext.master == standalone.master_url
        yield session
    finally:
        session.stop()


def produce(servers: str, topic: str, n: int, prefix: str = "k") -> list[str]:
    keys = [f"{prefix}{i:05d}" for i in range(n)]
    with Producer({"bootstrap.servers": servers, "linger.ms": 5}) as p:
        for key in keys:
            p.produce(topic, f"value-{key}".encode(), key=key.encode())
        p.flush()
    return keys


def options(servers: str, **more: str) -> dict[str, str]:
    return {"kafka.bootstrap.servers": servers, **more}


def sink_rows(spark: Any, out: Path) -> list[Any]:
    """The file sink's committed rows (read through its ``_spark_metadata`` log)."""
    if not (out / "_spark_metadata").exists():
        return []
    rows: list[Any] = spark.read.parquet(str(out)).collect()
    return rows


def test_batch_write_then_read(cluster: KafliteCluster, spark: Any) -> None:
    """``df.write.format("kaflite")`` from two executors, then ``spark.read`` of the
    topic: every record once, at contiguous offsets of each partition."""
    servers = cluster.bootstrap_servers
    topic = uid("standalone-batch")
    run(create_topic(servers, topic, PARTITIONS, 3))
    n = 600
    df = (spark.range(n).repartition(2)
          .selectExpr("format_string('k%05d', id) AS key", "CAST(id AS STRING) AS value"))
    df.write.format("kaflite").options(**options(servers, topic=topic)).mode("append").save()

    got = (spark.read.format("kaflite").options(**options(servers, subscribe=topic)).load()
           .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value",
                       "partition", "offset").collect())
    assert sorted(int(r.value) for r in got) == list(range(n))
    assert all(r.key == f"k{int(r.value):05d}" for r in got)
    by_partition = Counter(r.partition for r in got)
    for p in range(PARTITIONS):
        assert sorted(r.offset for r in got if r.partition == p) == \
            list(range(by_partition[p]))


def test_stream_available_now_with_max_offsets(cluster: KafliteCluster, spark: Any,
                                               tmp_path: Path) -> None:
    """``trigger(availableNow=True)`` with ``maxOffsetsPerTrigger``: the backlog in
    several bounded micro-batches, then the query stops; every record once in the sink."""
    servers = cluster.bootstrap_servers
    topic = uid("standalone-avnow")
    run(create_topic(servers, topic, PARTITIONS, 3))
    keys = produce(servers, topic, 500)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (spark.readStream.format("kaflite")
             .options(**options(servers, subscribe=topic, startingOffsets="earliest",
                                maxOffsetsPerTrigger="120")).load()
             .selectExpr("CAST(key AS STRING) AS key", "partition", "offset")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not finish"
        assert query.exception() is None
        sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    finally:
        query.stop()
    assert sum(sizes) == len(keys) and max(sizes) <= 120 and len(sizes) >= 5, sizes
    rows = sink_rows(spark, out)
    assert Counter(r.key for r in rows) == Counter(keys)


def _executor_pids(standalone: Any) -> set[int]:
    """Every process under a worker JVM: executor JVMs and their Python workers."""
    import psutil

    pids: set[int] = set()
    for pid in standalone.worker_pids():
        if pid is not None:
            pids |= {c.pid for c in psutil.Process(pid).children(recursive=True)}
    return pids


def _peer_pids(peers: set[int]) -> set[int]:
    """The processes of this machine that own the TCP client ports ``peers``."""
    import psutil

    return {c.pid for c in psutil.net_connections("tcp")
            if c.laddr and c.laddr.port in peers and c.pid is not None}


def test_registry_shows_the_executors_connections(cluster: KafliteCluster, spark: Any,
                                                  standalone: Any, tmp_path: Path) -> None:
    """While a stream runs, the brokers' registry lists connections under the executors'
    client id with the partition-leader role for the topic's partitions, and the
    processes at their other ends are the workers' children (executors' Python)."""
    pytest.importorskip("psutil")
    servers = cluster.bootstrap_servers
    topic = uid("standalone-registry")
    run(create_topic(servers, topic, PARTITIONS, 3))
    produce(servers, topic, 300)
    query = (spark.readStream.format("kaflite")
             .options(**options(servers, subscribe=topic, startingOffsets="earliest",
                                maxOffsetsPerTrigger="100")).load()
             .selectExpr("CAST(key AS STRING) AS key")
             .writeStream.format("noop").trigger(processingTime="500 milliseconds").start())
    try:
        deadline = time.monotonic() + 60
        while sum(p["numInputRows"] for p in query.recentProgress) < 300:
            assert query.exception() is None and time.monotonic() < deadline, \
                query.recentProgress
            time.sleep(0.2)
        conns = cluster.cluster.connections(client_id=STREAM_CLIENT_ID)
        assert conns, [c.client_id for c in cluster.cluster.connections()]
        leaders = [c for c in conns if "partition-leader" in c.roles]
        assert leaders, [c.roles for c in conns]
        assert {p for c in leaders for p in c.partitions} >= {
            f"{topic}-{p}" for p in range(PARTITIONS)}, [c.partitions for c in leaders]
        clients = [c for c in cluster.cluster.clients() if c.client_id == STREAM_CLIENT_ID]
        assert clients and all(c.roles.get("partition-leader") for c in clients), clients
        owners = _peer_pids({int(c.peer.rsplit(":", 1)[1]) for c in leaders})
        executors = _executor_pids(standalone)
        assert owners and owners <= executors, (owners, executors)
    finally:
        query.stop()


def test_exactly_once_when_a_worker_and_a_broker_are_killed(
        cluster: KafliteCluster, spark: Any, standalone: Any, tmp_path: Path) -> None:
    """A stream of slow micro-batches into a parquet sink; while one runs, SIGKILL a
    worker (its JVM, its executor, the executor's Python workers) and kill a broker at
    the same moment, then restart both. The query carries on (the lost tasks run
    again) and the sink holds every record exactly once."""
    pytest.importorskip("psutil")
    from pyspark.sql.functions import col, udf

    servers = cluster.bootstrap_servers
    topic = uid("standalone-kill")
    run(create_topic(servers, topic, PARTITIONS, 3, {"min.insync.replicas": "2"}))
    keys = produce(servers, topic, 900)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    @udf("string")
    def slow(key: str) -> str:     # ~1 s a task of 50 rows: batches of 2-3 s
        time.sleep(0.02)
        return key

    @udf("int")
    def attempt() -> int:          # which attempt of its task wrote the row
        from pyspark import TaskContext

        context = TaskContext.get()
        return context.attemptNumber() if context is not None else -1

    query = (spark.readStream.format("kaflite")
             .options(**options(servers, subscribe=topic, startingOffsets="earliest",
                                maxOffsetsPerTrigger="150")).load()
             .select(slow(col("key").cast("string")).alias("key"), "partition", "offset",
                     attempt.asNondeterministic()().alias("attempt"))
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="200 milliseconds").start())
    tracker = spark.sparkContext.statusTracker()
    try:
        deadline = time.monotonic() + 90
        while not [p for p in query.recentProgress if p["numInputRows"]]:
            assert query.exception() is None and time.monotonic() < deadline
            time.sleep(0.1)
        # The broker that leads partition 0 for the executors' fetches.
        victim = next(c.broker for c in cluster.cluster.connections(client_id=STREAM_CLIENT_ID)
                      if f"{topic}-0" in c.partitions)
        while _running_tasks(tracker) < 2:     # both executors inside a micro-batch
            assert query.exception() is None and time.monotonic() < deadline
            time.sleep(0.02)
        killed_batch = len(query.recentProgress)
        doomed = _children(standalone.worker_pids()[0])
        t0 = time.monotonic()
        standalone.kill_worker(0)
        cluster.kill(victim)
        gone = time.monotonic() + 5
        while [pid for pid in doomed if _alive(pid)]:
            assert time.monotonic() < gone, f"outlived their worker: {doomed}"
            time.sleep(0.05)
        time.sleep(1)
        cluster.restart(victim)
        standalone.restart_worker(0)
        restarted = time.monotonic() - t0
        deadline = time.monotonic() + 120
        while len(sink_rows(spark, out)) < len(keys):
            assert query.exception() is None, query.exception()
            assert time.monotonic() < deadline, (len(sink_rows(spark, out)), len(keys))
            time.sleep(1)
        caught_up = time.monotonic() - t0
        durations = [p["durationMs"].get("triggerExecution") for p in query.recentProgress]
        print(f"killed worker 0 ({len(doomed)} processes) and broker {victim} in batch "
              f"{killed_batch}; both back in {restarted:.1f} s, backlog done in "
              f"{caught_up:.1f} s; trigger durations ms: {durations}")
    finally:
        query.stop()
    rows = sink_rows(spark, out)
    assert Counter(r.key for r in rows) == Counter(keys)
    assert len({(r.partition, r.offset) for r in rows}) == len(keys)
    assert standalone.alive_workers() == 2
    # Which task attempts wrote the rows, for the report. Not asserted: in CI the kill
    # landed while two tasks ran (the wait above) and Spark logged "Lost executor 1 ...
    # worker lost", yet every row came from attempt 0 (a stage Spark resubmits after an
    # executor loss numbers its tasks' attempts from 0 again).
    attempts = Counter(r.attempt for r in rows)
    print(f"rows by task attempt: {dict(attempts)}")


def _running_tasks(tracker: Any) -> int:
    stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
    return sum(s.numActiveTasks for s in stages if s is not None)


def _children(pid: int | None) -> list[int]:
    import psutil

    assert pid is not None
    return [c.pid for c in psutil.Process(pid).children(recursive=True)]


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
