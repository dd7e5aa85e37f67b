"""Writes through the kaflite sink, read back through the kaflite source."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from typing import Any

import pytest

from kaflite.cluster import Cluster
from tests.spark.conftest import produce, source, unique

ROW_SCHEMA = ("key string, value binary, topic string, partition int, "
              "headers array<struct<key:string,value:binary>>")


def read_back(spark: Any, servers: str, topic: str) -> list[tuple[Any, ...]]:
    df = source(spark, servers, subscribe=topic, includeHeaders="true")
    return sorted(
        (r.partition, r.key, r.value,
         None if r.headers is None else tuple((h.key, h.value) for h in r.headers))
        for r in df.collect())


def test_write_then_read_back(spark: Any, kafka: Cluster, servers: str) -> None:
    a, b = unique("out-a"), unique("out-b")
    kafka.create_topic(a, 3, 1)
    kafka.create_topic(b, 2, 1)
    data = [
        ("k1", b"v1", a, 2, [("h", b"1"), ("n", None)]),
        ("k2", b"v2", a, 0, None),
        (None, b"v3", b, 1, [("only", b"x")]),
        ("k4", None, b, 0, None),                       # a tombstone
    ]
    df = spark.createDataFrame(data, ROW_SCHEMA)
    df.write.format("kaflite").option("kafka.bootstrap.servers", servers).mode("append").save()
    assert read_back(spark, servers, a) == [
        (0, b"k2", b"v2", None), (2, b"k1", b"v1", (("h", b"1"), ("n", None)))]
    assert read_back(spark, servers, b) == [
        (0, b"k4", None, None), (1, None, b"v3", (("only", b"x"),))]


def test_topic_option_overrides_the_column(spark: Any, kafka: Cluster, servers: str) -> None:
    target = unique("override")
    kafka.create_topic(target, 1, 1)
    df = spark.createDataFrame([("k", "text", "elsewhere")], "key string, value string, "
                                                            "topic string")
    (df.write.format("kaflite").option("kafka.bootstrap.servers", servers)
     .option("topic", target).mode("append").save())
    assert read_back(spark, servers, target) == [(0, b"k", b"text", None)]


@pytest.mark.parametrize(("ddl", "options", "message"), [
    ("key string", {"topic": "t"}, "Required attribute 'value' not found"),
    ("value int", {"topic": "t"}, "value attribute type must be a string or binary"),
    ("key int, value string", {"topic": "t"}, "key attribute type must be a string or binary"),
    ("value string", {}, "topic option required when no 'topic' attribute is present"),
    ("value string, topic int", {}, "Topic type must be a string"),
    ("value string, partition string", {"topic": "t"}, "partition attribute type must be an "
                                                       "int"),
])
def test_sink_schema_errors(spark: Any, servers: str, ddl: str, options: dict[str, str],
                            message: str) -> None:
    df = spark.createDataFrame([], ddl)
    w = df.write.format("kaflite").option("kafka.bootstrap.servers", servers).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    with pytest.raises(Exception) as info:
        w.save()
    assert message in str(info.value)


def test_save_modes(spark: Any, servers: str) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    w = df.write.format("kaflite").option("kafka.bootstrap.servers", servers).option("topic", "t")
    with pytest.raises(Exception) as info:
        w.mode("overwrite").save()
    assert "Save mode Overwrite not allowed for Kafka" in str(info.value)
    # Spark refuses these for any Python data source, before the source is asked.
    for mode in ("errorifexists", "ignore"):
        with pytest.raises(Exception) as info:
            w.mode(mode).save()
        assert "UNSUPPORTED_DATA_SOURCE_SAVE_MODE" in str(info.value)


def test_streaming_write(spark: Any, kafka: Cluster, servers: str, tmp_path: Any) -> None:
    src, dst = unique("copy-in"), unique("copy-out")
    kafka.create_topic(src, 2, 1)
    kafka.create_topic(dst, 1, 1)
    produce(servers, src, [{"value": b"m%d" % i, "key": b"%d" % i} for i in range(50)])
    q = (source(spark, servers, stream=True, subscribe=src, startingOffsets="earliest")
         .selectExpr("key", "value").writeStream.format("kaflite")
         .option("kafka.bootstrap.servers", servers).option("topic", dst)
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None
    got = read_back(spark, servers, dst)
    assert sorted((k, v) for _, k, v, _ in got) == sorted((b"%d" % i, b"m%d" % i)
                                                          for i in range(50))
