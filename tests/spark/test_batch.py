"""Batch reads through Spark: ranges, headers, timestamps, assign, subscribePattern."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import json
import time
from typing import Any

import pytest

from kaflite.cluster import Cluster
from tests.spark.conftest import produce, source, unique

pytestmark = pytest.mark.usefixtures("spark")

NOW = int(time.time() * 1000)


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.selectExpr(
        "partition", "offset", "CAST(key AS STRING)", "CAST(value AS STRING)",
        "unix_millis(timestamp)", "timestampType", "topic").collect())


@pytest.fixture(scope="module")
def topic(kafka: Cluster, servers: str) -> tuple[str, list[tuple[Any, ...]]]:
    """A 3-partition topic of 300 records, and what a full read must return."""
    name = unique("batch")
    kafka.create_topic(name, 3, 1)
    records = [{"value": f"v{i}".encode(), "key": f"k{i}".encode(), "partition": i % 3,
                "timestamp": NOW - 300_000 + i * 1000} for i in range(300)]
    produce(servers, name, records)
    expected = sorted((i % 3, i // 3, f"k{i}", f"v{i}", NOW - 300_000 + i * 1000, 0, name)
                      for i in range(300))
    return name, expected


def test_full_read_has_every_record_once(spark: Any, servers: str,
                                         topic: tuple[str, list[Any]]) -> None:
    name, expected = topic
    df = source(spark, servers, subscribe=name)
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert rows(df) == expected


def test_exact_offset_ranges(spark: Any, servers: str, topic: tuple[str, list[Any]]) -> None:
    name, expected = topic
    start = {name: {"0": 10, "1": -2, "2": 50}}
    end = {name: {"0": 20, "1": 5, "2": -1}}
    df = source(spark, servers, subscribe=name, startingOffsets=json.dumps(start),
                endingOffsets=json.dumps(end))
    want = [r for r in expected if (r[0] == 0 and 10 <= r[1] < 20) or (r[0] == 1 and r[1] < 5)
            or (r[0] == 2 and r[1] >= 50)]
    assert len(want) == 10 + 5 + 50
    assert rows(df) == want


def test_timestamp_options(spark: Any, servers: str, topic: tuple[str, list[Any]]) -> None:
    name, expected = topic
    # Records i = 30..119 have timestamps in [t0 + 30s, t0 + 120s).
    t0 = NOW - 300_000
    df = source(spark, servers, subscribe=name, startingTimestamp=str(t0 + 30_000),
                endingTimestamp=str(t0 + 120_000))
    assert rows(df) == [r for r in expected if t0 + 30_000 <= r[4] < t0 + 120_000]
    by_partition = json.dumps({name: {"0": t0 + 150_000, "1": t0, "2": t0 + 299_000}})
    df = source(spark, servers, subscribe=name, startingOffsetsByTimestamp=by_partition)
    assert rows(df) == [r for r in expected if (r[0] == 0 and r[4] >= t0 + 150_000)
                        or r[0] == 1 or (r[0] == 2 and r[4] >= t0 + 299_000)]


def test_timestamp_without_match_follows_the_strategy(spark: Any, servers: str,
                                                      topic: tuple[str, list[Any]]) -> None:
    name, _ = topic
    future = str(NOW + 3_600_000)
    with pytest.raises(Exception, match="No offset matched from request of topic-partition"):
        source(spark, servers, subscribe=name, startingTimestamp=future).collect()
    df = source(spark, servers, subscribe=name, startingTimestamp=future,
                startingOffsetsByTimestampStrategy="latest")
    assert df.count() == 0


def test_headers(spark: Any, kafka: Cluster, servers: str) -> None:
    name = unique("headers")
    kafka.create_topic(name, 1, 1)
    produce(servers, name, [
        {"value": b"a", "headers": [("trace", b"1"), ("empty", None)]},
        {"value": b"b"},
        {"value": b"c", "headers": [("trace", b"3"), ("trace", b"4")]},
    ])
    df = source(spark, servers, subscribe=name, includeHeaders="true")
    assert df.schema["headers"].dataType.simpleString() == \
        "array<struct<key:string,value:binary>>"
    got = [(r.value, None if r.headers is None else [(h.key, h.value) for h in r.headers])
           for r in df.orderBy("offset").collect()]
    assert got == [(b"a", [("trace", b"1"), ("empty", None)]), (b"b", None),
                   (b"c", [("trace", b"3"), ("trace", b"4")])]
    assert "headers" not in source(spark, servers, subscribe=name).columns


def test_assign_json(spark: Any, servers: str, topic: tuple[str, list[Any]]) -> None:
    name, expected = topic
    df = source(spark, servers, assign=json.dumps({name: [0, 2]}))
    assert rows(df) == [r for r in expected if r[0] in (0, 2)]


def test_subscribe_pattern(spark: Any, kafka: Cluster, servers: str) -> None:
    prefix = unique("pattern").replace("-", "_")
    for name in (f"{prefix}.a", f"{prefix}.b", f"x{prefix}"):
        kafka.create_topic(name, 1, 1)
    produce(servers, f"{prefix}.a", [{"value": b"a%d" % i} for i in range(3)])
    produce(servers, f"{prefix}.b", [{"value": b"b%d" % i} for i in range(5)])
    produce(servers, f"x{prefix}", [{"value": b"x%d" % i} for i in range(7)])
    df = source(spark, servers, subscribePattern=f"{prefix}\\..*")
    got = sorted((r.topic, r.value) for r in df.collect())
    assert got == sorted([(f"{prefix}.a", b"a%d" % i) for i in range(3)]
                         + [(f"{prefix}.b", b"b%d" % i) for i in range(5)])


def test_min_partitions_and_max_records_split_tasks(spark: Any, servers: str,
                                                    topic: tuple[str, list[Any]]) -> None:
    name, expected = topic
    df = source(spark, servers, subscribe=name, minPartitions="9")
    assert df.rdd.getNumPartitions() == 9
    assert rows(df) == expected
    df = source(spark, servers, subscribe=name, maxRecordsPerPartition="30")
    assert df.rdd.getNumPartitions() == 12    # 100 records per partition → 4 tasks each
    assert rows(df) == expected


def test_rejected_options_fail_at_load(spark: Any, servers: str) -> None:
    with pytest.raises(Exception, match=r"Kafka option 'auto\.offset\.reset' is not supported"):
        source(spark, servers, subscribe="t", **{"kafka.auto.offset.reset": "earliest"}).count()
    with pytest.raises(Exception, match="starting offset can't be latest for batch queries"):
        source(spark, servers, subscribe="t", startingOffsets="latest").count()
    with pytest.raises(Exception, match="fixed schema"):
        (spark.read.format("kaflite").schema("value string")
         .option("kafka.bootstrap.servers", servers).option("subscribe", "t").load().count())


def test_repeated_reads_reuse_the_executors_connections(spark: Any, kafka: Cluster,
                                                        servers: str,
                                                        topic: tuple[str, list[Any]]) -> None:
    """Each query has its own group id, but the executors keep one client per config.

    (They used to make a client per query and never close it: every read left
    a connection to every broker in every Python worker.)
    """
    name, expected = topic

    def executor_connections() -> set[tuple[int, int]]:
        return {(c.broker, c.connection_id) for c in
                kafka.connections(client_id="spark-relation-executor")}

    for _ in range(2):   # let the Python workers make their clients
        assert source(spark, servers, subscribe=name).count() == len(expected)
    before = executor_connections()
    assert before
    for _ in range(4):
        assert source(spark, servers, subscribe=name).count() == len(expected)
    # A Python worker that ran none of the first reads may still connect once.
    assert len(executor_connections() - before) <= 2


def test_executors_follow_leader_epoch_changes(spark: Any, kafka: Cluster, servers: str) -> None:
    """The executors' cached clients hold leader epochs; after the epoch moves (the
    leader stays on its broker, or leaves and comes back), reads still return all."""
    name = unique("epoch")
    kafka.create_topic(name, 1, 2)
    produce(servers, name, [{"value": f"v{i}".encode(), "partition": 0} for i in range(50)])
    for _ in range(2):   # the Python workers make and cache their clients
        assert source(spark, servers, subscribe=name).count() == 50
    leader = kafka.controller.topics[name].partitions[0].leader
    other = next(r for r in kafka.controller.topics[name].partitions[0].replicas if r != leader)
    kafka.move_leader(name, 0, leader)            # same broker, new epoch
    assert source(spark, servers, subscribe=name).count() == 50
    kafka.move_leader(name, 0, other)             # away ...
    kafka.move_leader(name, 0, leader)            # ... and back
    produce(servers, name, [{"value": f"w{i}".encode(), "partition": 0} for i in range(10)])
    assert source(spark, servers, subscribe=name).count() == 60


def test_read_committed_skips_aborted_transactions(spark: Any, kafka: Cluster,
                                                   servers: str) -> None:
    """``kafka.isolation.level=read_committed``: the data of aborted transactions is not
    read, and the same producer's committed data after an abort is (the executors
    apply Kafka's consumer rule to the aborted ranges the leader lists)."""
    from kaflite.client import sync as ksync

    name = unique("txn")
    kafka.create_topic(name, 1, 1)
    with ksync.Producer({"bootstrap.servers": servers,
                         "transactional.id": unique("spark-tid")}) as p:
        p.init_transactions()
        for i, commit in enumerate([True, False, True, False, True]):
            p.begin_transaction()
            for j in range(3):
                p.send(name, f"t{i}-{j}".encode(), partition=0)
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
    want = sorted(f"t{i}-{j}" for i in (0, 2, 4) for j in range(3))
    deadline = time.monotonic() + 30
    while True:  # the last commit's marker is written just after EndTxn is answered
        got = sorted(r[0] for r in source(
            spark, servers, subscribe=name, **{"kafka.isolation.level": "read_committed"}
        ).selectExpr("CAST(value AS STRING)").collect())
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got == want
    everything = source(spark, servers, subscribe=name).count()
    assert everything == 15
