"""Units of the data source that need no Spark session: options, offsets, Arrow."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import inspect
import itertools
import os
import random
from typing import Any

import pyarrow as pa
import pytest

from kaflite.client import TopicPartition
from kaflite.protocol.records import Compression, encode_batch, iter_batches
from kaflite.spark import arrow as arrow_mod
from kaflite.spark.arrow import ColumnBuilder
from kaflite.spark.offsets import (
    OffsetRange,
    from_json,
    offsets_behind_latest,
    plan_ranges,
    rate_limit,
    to_json,
)
from kaflite.spark.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    KafkaOptionError,
    LatestOffsets,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    client_config,
    parse_sink_options,
    parse_source_options,
    parse_time_ms,
)
from kaflite.spark.reader import executor_params
from kaflite.spark.schema import arrow_schema

TP = TopicPartition
BASE = {"kafka.bootstrap.servers": "localhost:9092"}


def src(streaming: bool = False, **kw: str):  # type: ignore[no-untyped-def]
    return parse_source_options({**BASE, **kw}, streaming)


# -- options ----------------------------------------------------------------------------
def test_defaults_follow_spark() -> None:
    batch = src(subscribe="a")
    stream = src(True, subscribe="a")
    assert isinstance(batch.starting, EarliestOffsets)
    assert isinstance(batch.ending, LatestOffsets)
    assert isinstance(stream.starting, LatestOffsets)
    assert stream.ending is None
    assert batch.fail_on_data_loss and stream.fail_on_data_loss
    assert not batch.include_headers
    assert stream.max_trigger_delay_ms == 15 * 60 * 1000
    assert batch.group_id_prefix == "spark-kafka-relation"
    assert stream.group_id_prefix == "spark-kafka-source"
    # kaflite joins no group: the prefix names the clients (their client.id) instead,
    # Spark's defaults shortened, with 8 hex digits of the query's id: short and readable.
    assert stream.client_id("driver-0") == f"spark-source-{stream.unique_group_id[:8]}-driver-0"
    assert batch.client_id("driver-0").startswith("spark-relation-")
    assert batch.executor_client_id() == "spark-relation-executor"
    mine = src(subscribe="a", groupIdPrefix="etl")
    assert mine.client_id("driver-0") == f"etl-{mine.unique_group_id[:8]}-driver-0"
    assert mine.group_id("executor").startswith("etl-")
    assert mine.group_id("executor").endswith("-executor")
    # Executors keep their clients from query to query: their id names no query.
    assert mine.executor_client_id() == "etl-executor"


def test_executor_params_of_two_queries_share_a_client() -> None:
    first, second = executor_params(src(subscribe="a")), executor_params(src(subscribe="b"))
    assert first.config == second.config        # the same cached client in a worker
    assert dict(first.config)["client.id"] == "spark-relation-executor"
    assert first.group_id != second.group_id     # Spark's per-query group id, for messages
    assert first.group_id.startswith("spark-kafka-relation-")


def test_option_names_are_case_insensitive() -> None:
    o = src(True, SUBSCRIBEPATTERN="ev.*", MaxOffsetsPerTrigger="10", failondataloss="FALSE",
            INCLUDEHEADERS="true")
    assert o.strategy == SubscribePattern("ev.*")
    assert o.max_offsets_per_trigger == 10
    assert not o.fail_on_data_loss
    assert o.include_headers


def test_strategies() -> None:
    assert src(subscribe=" a, b ,").strategy == Subscribe(("a", "b"))
    assign = src(assign='{"t":[0,2],"u":[1]}').strategy
    assert assign == Assign((TP("t", 0), TP("t", 2), TP("u", 1)))
    assert SubscribePattern("ev.*").matches("events")
    assert not SubscribePattern("ev").matches("events")   # whole-name match, as Java's


@pytest.mark.parametrize(("options", "message"), [
    ({}, "One of the following options must be specified for Kafka source: assign, "
         "subscribe, subscribePattern"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be "
                                                "specified"),
    ({"subscribe": " , "}, "No topics to subscribe to as specified value for option "
                           "'subscribe' is ' , '"),
    ({"subscribePattern": "  "}, "Pattern to subscribe is empty"),
    ({"assign": "t"}, "No topicpartitions to assign as specified value for option 'assign' "
                      "is 't'"),
    ({"assign": '{"t":"x"}'}, 'Expected e.g. {"topicA":[0,1],"topicB":[0,1]}'),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"},
     "Kafka option 'auto.offset.reset' is not supported"),
    ({"subscribe": "a", "kafka.key.deserializer": "x"},
     "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte arrays"),
    ({"subscribe": "a", "kafka.value.deserializer": "x"},
     "Kafka option 'value.deserializer' is not supported"),
    ({"subscribe": "a", "kafka.enable.auto.commit": "true"},
     "Kafka option 'enable.auto.commit' is not supported"),
    ({"subscribe": "a", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "a", "maxRecordsPerPartition": "-5"}, "maxRecordsPerPartition must be "
                                                         "positive"),
    ({"subscribe": "a", "startingOffsets": "latest"},
     "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'},
     "startingOffsets for a-0 can't be latest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": "earliest"},
     "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "endingOffsets": '{"a":{"3":-2}}'},
     "ending offset for a-3 can't be earliest for batch queries on Kafka"),
    ({"subscribe": "a", "startingOffsets": "{nope"},
     'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got {nope'),
    ({"subscribe": "a", "startingTimestamp": "soon"}, "Expected a single long value, got soon"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "'failOnDataLoss' must be 'true' or"),
    ({"subscribe": "a", "startingOffsetsByTimestampStrategy": "nearest"},
     "startingOffsetsByTimestampStrategy must be 'error' or 'latest'"),
])
def test_batch_option_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaOptionError) as info:
        parse_source_options({**BASE, **options}, False)
    assert message in str(info.value)


def test_bootstrap_servers_required() -> None:
    with pytest.raises(KafkaOptionError) as info:
        parse_source_options({"subscribe": "a"}, False)
    assert str(info.value) == ("Option 'kafka.bootstrap.servers' must be specified for "
                               "configuring Kafka consumer")


@pytest.mark.parametrize(("options", "message"), [
    ({"endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
    ({"endingOffsetsByTimestamp": '{"a":{"0":1}}'}, "ending timestamp not valid in streaming "
                                                    "queries"),
    ({"endingTimestamp": "1"}, "ending timestamp not valid in streaming queries"),
    ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
     "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5)."),
    ({"maxOffsetsPerTrigger": "lots"}, "'maxOffsetsPerTrigger' must be a positive integer"),
    ({"maxTriggerDelay": "soon"}, "Invalid time string"),
])
def test_stream_option_errors(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaOptionError) as info:
        parse_source_options({**BASE, "subscribe": "a", **options}, True)
    assert message in str(info.value)


def test_offset_precedence_is_sparks() -> None:
    # A global timestamp beats offsets by timestamp, which beat offsets.
    o = src(subscribe="a", startingTimestamp="1000", startingOffsetsByTimestamp='{"a":{"0":5}}',
            startingOffsets='{"a":{"0":7}}', startingOffsetsByTimestampStrategy="latest")
    assert o.starting == GlobalTimestamp(1000, "latest")
    o = src(subscribe="a", startingOffsetsByTimestamp='{"a":{"0":5}}',
            startingOffsets='{"a":{"0":7}}')
    assert o.starting == SpecificTimestamps({TP("a", 0): 5}, "error")
    o = src(subscribe="a", startingOffsets='{"a":{"0":7,"1":-2}}', endingOffsets='{"a":{"0":9}}')
    assert o.starting == SpecificOffsets({TP("a", 0): 7, TP("a", 1): -2})
    assert o.ending == SpecificOffsets({TP("a", 0): 9})


def test_batch_ignores_trigger_options() -> None:
    o = src(subscribe="a", maxOffsetsPerTrigger="10", minOffsetsPerTrigger="5")
    assert o.max_offsets_per_trigger is None and o.min_offsets_per_trigger is None


def test_time_strings() -> None:
    assert parse_time_ms("15m") == 900_000
    assert parse_time_ms("10s") == 10_000
    assert parse_time_ms("250ms") == 250
    assert parse_time_ms("2h") == 7_200_000
    assert parse_time_ms("100") == 100


def test_kafka_passthrough() -> None:
    o = src(subscribe="a", **{"kafka.fetch.max.bytes": "1000", "kafka.linger.ms": "7",
                              "kafka.no.such.thing": "1", "kafka.client.id": "mine",
                              "kafka.isolation.level": "read_committed"})
    consumer = client_config(o.kafka_params, "consumer", o.client_id("executor"))
    assert consumer["fetch.max.bytes"] == "1000"
    assert consumer["client.id"] == "mine"
    assert "linger.ms" not in consumer            # a producer property: not the consumer's
    assert "no.such.thing" not in consumer        # unknown: logged and ignored
    assert o.isolation_level == 1
    producer = client_config(o.kafka_params, "producer", "x")
    assert producer["linger.ms"] == "7" and "fetch.max.bytes" not in producer


def test_sink_options() -> None:
    s = parse_sink_options({**BASE, "topic": " out ", "kafka.acks": "1"})
    assert s.topic == "out" and s.kafka_params["acks"] == "1"
    for options, message in [
        ({"kafka.key.serializer": "x"}, "Kafka option 'key.serializer' is not supported as "
                                        "keys are serialized with ByteArraySerializer."),
        ({"kafka.value.serializer": "x"}, "Kafka option 'value.serializer' is not supported"),
    ]:
        with pytest.raises(KafkaOptionError) as info:
            parse_sink_options({**BASE, **options})
        assert message in str(info.value)
    with pytest.raises(KafkaOptionError) as info:
        parse_sink_options({"topic": "x"})
    assert "'kafka.bootstrap.servers' must be specified" in str(info.value)


# -- offsets ---------------------------------------------------------------------------------
def test_offset_json_is_sparks_and_round_trips() -> None:
    offsets = {TP("b", 1): 7, TP("a", 10): 3, TP("a", 2): 5}
    j = to_json(offsets)
    assert list(j) == ["a", "b"] and list(j["a"]) == ["2", "10"]
    assert j == {"a": {"2": 5, "10": 3}, "b": {"1": 7}}
    assert from_json(j) == offsets


def test_rate_limit_is_proportional_to_backlog() -> None:
    start = {TP("t", 0): 0, TP("t", 1): 100, TP("t", 2): 50}
    latest = {TP("t", 0): 900, TP("t", 1): 200, TP("t", 2): 50}
    end = rate_limit(100, start, latest)
    assert end == {TP("t", 0): 90, TP("t", 1): 110, TP("t", 2): 50}
    # A small partition is not starved: its share rounds up to one offset.
    end = rate_limit(10, {TP("t", 0): 0, TP("t", 1): 0}, {TP("t", 0): 10_000, TP("t", 1): 1})
    assert end[TP("t", 1)] == 1
    # New partitions start from their earliest offsets.
    end = rate_limit(10, {TP("t", 0): 0}, {TP("t", 0): 10, TP("t", 1): 30}, {TP("t", 1): 20})
    assert end == {TP("t", 0): 5, TP("t", 1): 25}
    # Less backlog than the limit: everything.
    assert rate_limit(1000, start, latest) == latest


def test_plan_ranges_min_partitions_and_max_records() -> None:
    big = OffsetRange("t", 0, 0, 1000)
    small = OffsetRange("t", 1, 0, 10)
    empty = OffsetRange("t", 2, 5, 5)
    assert plan_ranges([big, small, empty]) == [big, small]
    split = plan_ranges([big, small, empty], min_partitions=5)
    assert [r for r in split if r.partition == 1] == [small]
    zero = [r for r in split if r.partition == 0]
    assert len(zero) == 4
    assert zero[0].from_offset == 0 and zero[-1].until_offset == 1000
    assert all(a.until_offset == b.from_offset for a, b in itertools.pairwise(zero))
    capped = plan_ranges([big, small], max_records_per_partition=300)
    assert [r.size for r in capped] == [250, 250, 250, 250, 10]
    both = plan_ranges([big], min_partitions=2, max_records_per_partition=300)
    assert max(r.size for r in both) <= 300 and sum(r.size for r in both) == 1000


def test_offsets_behind_latest() -> None:
    m = offsets_behind_latest({TP("t", 0): 5, TP("t", 1): 10}, {TP("t", 0): 9, TP("t", 1): 10})
    assert m == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "4",
                 "avgOffsetsBehindLatest": "2.0"}


# -- Arrow ----------------------------------------------------------------------------------
def test_schema_is_exactly_pysparks_arrow_schema() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import to_arrow_schema

    from kaflite.spark.datasource import spark_schema

    # PySpark 4.0 asks for UTC timestamps with timestamp_utc=True (its default); later
    # versions take the time zone by name.
    utc: dict[str, Any] = ({"timezone": "UTC"}
                           if "timezone" in inspect.signature(to_arrow_schema).parameters
                           else {"timestamp_utc": True})
    for headers in (False, True):
        assert arrow_schema(headers).equals(to_arrow_schema(spark_schema(headers), **utc))


def _batches(shape: str, rng: random.Random) -> list[bytes]:
    """Record batches of assorted shapes, as producers write them."""
    out = []
    base = 0
    for _ in range(4):
        n = rng.choice([1, 15, 16, 63, 64, 65, 200, 1000])
        ts0 = 1_700_000_000_000 + rng.randrange(10**6)
        if shape == "uniform":
            values: list[bytes | None] = [os.urandom(100) for _ in range(n)]
            keys: list[bytes | None] | None = None
            ts = [ts0 + i // 10 for i in range(n)]
            headers = None
        elif shape == "keys-and-slow-clock":
            values = [os.urandom(20) for _ in range(n)]
            keys = [b"%08d" % i for i in range(n)]
            ts = [ts0 + i * 97 for i in range(n)]          # deltas of one to three bytes
            headers = None
        elif shape == "varied":
            values = [None if rng.random() < 0.1 else os.urandom(rng.randrange(0, 300))
                      for _ in range(n)]
            keys = [None if rng.random() < 0.5 else os.urandom(rng.randrange(1, 9))
                    for _ in range(n)]
            ts = [ts0 - rng.randrange(100) for _ in range(n)]
            headers = None
        elif shape == "compressed-log-append-time":
            values = [b"x" * 50 for _ in range(n)]
            keys = None
            ts = [ts0 + i for i in range(n)]
            headers = None
            out.append(bytes(encode_batch(values, timestamps=ts, base_offset=base,
                                          compression=Compression.ZSTD,
                                          log_append_time=rng.random() < 0.5)))
            base += n
            continue
        else:  # headers
            values = [os.urandom(10) for _ in range(n)]
            keys = None
            ts = [ts0] * n
            headers = [(("h", b"1"), ("g", None)) if i % 3 else () for i in range(n)]
        out.append(bytes(encode_batch(values, keys=keys, timestamps=ts, headers=headers,
                                      base_offset=base)))
        base += n
    return out


@pytest.mark.parametrize("shape", ["uniform", "keys-and-slow-clock", "varied", "headers",
                                   "compressed-log-append-time"])
def test_fast_path_equals_list_path(shape: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(shape)
    data = b"".join(_batches(shape, rng))
    batches = list(iter_batches(data))
    total = sum(b.record_count for b in batches)
    for lo, hi in [(0, 10**9), (1, total - 1), (total // 3, total // 2), (5, 6)]:
        fast = ColumnBuilder("topic", 3, include_headers=True)
        for b in batches:
            fast.add(b, lo, hi)
        got = fast.build()
        with monkeypatch.context() as m:
            m.setattr(arrow_mod, "_runs", lambda *a: None)
            slow = ColumnBuilder("topic", 3, include_headers=True)
            for b in batches:
                slow.add(b, lo, hi)
            want = slow.build()
        assert got is not None and want is not None
        assert got.equals(want)
        assert got.column("offset").to_pylist() == list(range(max(lo, 0), min(hi, total)))
    # The strided path really ran where records line up (and not where they cannot).
    strided = [arrow_mod._runs(*_where(b)) is not None for b in batches]
    assert any(strided) == (shape not in ("varied", "headers"))


def _where(b: Any) -> tuple[Any, int, int, int]:
    buf, start, end = arrow_mod._in_place(b.records_buffer())
    return buf, b.record_count, start, end


def test_in_place_finds_the_buffer_a_view_is_of() -> None:
    frame = bytearray(os.urandom(1000))
    buf, start, end = arrow_mod._in_place(memoryview(frame)[100:300])
    assert buf is frame and (start, end) == (100, 300)
    data = bytes(frame)
    buf, start, end = arrow_mod._in_place(memoryview(data)[7:9])
    assert buf is data and (start, end) == (7, 9)
    import array as array_mod
    other = array_mod.array("B", frame)            # neither bytes nor bytearray: a copy
    buf, start, end = arrow_mod._in_place(memoryview(other)[10:20])
    assert buf == bytes(frame[10:20]) and (start, end) == (0, 10)


def test_records_read_in_place_inside_a_larger_frame() -> None:
    """Batches at an offset in a frame, with other bytes after them, and released after."""
    import sys

    first = encode_batch([b"%03d" % i for i in range(200)], base_offset=0)
    second = encode_batch([b"x" * 50] * 100, base_offset=200)
    frame = bytearray(os.urandom(77)) + first + second + bytearray(b"\x00" * 300)
    baseline = sys.getrefcount(frame)
    view = memoryview(frame)[77:77 + len(first) + len(second)]
    batches = list(iter_batches(view))
    fast = ColumnBuilder("t", 0)
    for b in batches:
        assert arrow_mod._in_place(b.records_buffer())[0] is frame
        fast.add(b, 0, 300)
    fast.settle()
    del batches, b, view
    assert sys.getrefcount(frame) == baseline          # settled: nothing refers to it
    got = fast.build()
    assert got is not None
    assert got.column("value").to_pylist() == [b"%03d" % i for i in range(200)] + [b"x" * 50] * 100
    assert got.column("offset").to_pylist() == list(range(300))


def test_columns_hold_what_was_written() -> None:
    ts = [1_700_000_000_000 + i for i in range(40)]
    data = encode_batch([b"v%d" % i for i in range(40)], keys=[b"k"] * 40, timestamps=ts,
                        base_offset=100)
    b = ColumnBuilder("events", 7)
    assert b.add(next(iter_batches(data)), 0, 10**9) == 40
    out = b.build()
    assert out.schema.equals(arrow_schema(False))
    rows = out.to_pylist()
    assert rows[0]["value"] == b"v0" and rows[39]["key"] == b"k"
    assert rows[5]["offset"] == 105 and rows[5]["partition"] == 7
    assert rows[5]["topic"] == "events" and rows[5]["timestampType"] == 0
    assert out.column("timestamp").cast(pa.int64()).to_pylist() == [t * 1000 for t in ts]
    assert b.build() is None   # reset after build


def test_fast_path_on_a_big_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # 20,000 records: offset deltas of one, two and three bytes (runs break at 64 and 8192,
    # and where the timestamp deltas grow a byte).
    n = 20_000
    data = encode_batch([b"%010d" % i for i in range(n)],
                        timestamps=[1_700_000_000_000 + i // 7 for i in range(n)],
                        base_offset=5_000)
    batch = next(iter_batches(data))
    runs = arrow_mod._runs(*_where(batch))
    assert runs is not None and {0, 64, 8192} <= {r.index for r in runs}
    fast = ColumnBuilder("t", 0)
    fast.add(batch, 5_100, 24_000)
    got = fast.build()
    monkeypatch.setattr(arrow_mod, "_runs", lambda *a: None)
    slow = ColumnBuilder("t", 0)
    slow.add(batch, 5_100, 24_000)
    want = slow.build()
    assert got is not None and want is not None and got.equals(want)
    assert got.num_rows == 18_900
    assert got.column("value")[0].as_py() == b"%010d" % 100


def test_runs_of_many_small_batches_with_offset_gaps(monkeypatch: pytest.MonkeyPatch) -> None:
    # Java-sized batches (about 140 records), some offsets missing between batches (as
    # after compaction or transaction markers), and one LogAppendTime batch.
    data, base, expected = [], 0, []
    for i in range(30):
        n = 140 + i % 3
        data.append(encode_batch([b"%099d" % (base + j) for j in range(n)],
                                 timestamps=[1_700_000_000_000 + 40 * i + j // 50
                                             for j in range(n)],
                                 base_offset=base, log_append_time=i == 7))
        expected += range(base, base + n)
        base += n + (2 if i % 4 == 0 else 0)
    batches = list(iter_batches(b"".join(data)))
    fast = ColumnBuilder("t", 1)
    for b in batches:
        fast.add(b, 10, 10**9)
    got = fast.build()
    monkeypatch.setattr(arrow_mod, "_runs", lambda *a: None)
    slow = ColumnBuilder("t", 1)
    for b in batches:
        slow.add(b, 10, 10**9)
    want = slow.build()
    assert got is not None and want is not None and got.equals(want)
    assert got.column("offset").to_pylist() == expected[10:]
    assert got.column("value").to_pylist()[:2] == [b"%099d" % 10, b"%099d" % 11]


def test_streaming_reads_of_share_groups_get_the_share_stream_reader() -> None:
    """shareGroup: a batch read's tasks are the members; a streaming read's driver is."""
    from kaflite.spark.datasource import KafliteDataSource
    from kaflite.spark.share import ShareBatchReader
    from kaflite.spark.share_stream import ShareStreamReader

    source = KafliteDataSource({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                                "shareGroup": "g"})
    assert isinstance(source.streamReader(source.schema()), ShareStreamReader)
    assert isinstance(source.reader(source.schema()), ShareBatchReader)
    source = KafliteDataSource({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "t",
                                "shareGroup": "g", "minOffsetsPerTrigger": "5"})
    with pytest.raises(KafkaOptionError, match="minOffsetsPerTrigger"):
        source.streamReader(source.schema())
