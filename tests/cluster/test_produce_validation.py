"""Produce never puts a batch into a log that a consumer cannot read (Kafka's LogValidator).

Each test sends one broken batch (its CRC made valid, so that only a record-level
check can catch it) straight to the partition leader, and checks:
- the error code Kafka's leader answers with;
- the log end offset did not move on any replica;
- a real consumer (confluent-kafka) still reads every good record of the partition.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
import zlib
from collections.abc import Iterator

import cramjam
import pytest

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import ProduceRequest, ProduceResponse
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import Compression, assemble_batch, encode_batch, encode_records

BOMB = 256 * 1024 * 1024


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as c:
        yield c


def _now() -> int:
    return int(time.time() * 1000)


def _produce(cluster: Cluster, topic: str, index: int, records: bytes, version: int = 11
             ) -> tuple[int, str | None]:
    state = cluster.controller.partition(topic, 0)
    assert state is not None
    broker = cluster.broker(state.leader)

    async def send() -> ProduceResponse:
        conn = await BrokerConnection("127.0.0.1", broker.port, client_id="validation").open()
        try:
            resp: ProduceResponse = await conn.request(ProduceRequest(
                acks=-1, timeout_ms=5000, topic_data=[pq.TopicProduceData(
                    name=topic, partition_data=[pq.PartitionProduceData(index, records)])]),
                version=version, timeout=30)
            return resp
        finally:
            conn.close()

    resp = asyncio.run(send())
    part = resp.responses[0].partition_responses[0]
    return part.error_code, part.error_message


def _ends(cluster: Cluster, topic: str) -> list[int]:
    return [b.partitions[(topic, 0)].log_end_offset
            for b in cluster.brokers.values() if (topic, 0) in b.partitions]


def _topic(cluster: Cluster, **config: str) -> str:
    name = f"v-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions=1, replication_factor=3, configs=config or None)
    good = encode_batch([b"good-0", b"good-1"], keys=[b"k", b"k"], timestamps=[_now()] * 2)
    assert _produce(cluster, name, 0, good) == (0, None)
    return name


def _gzip_bomb(size: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    return b"".join([*(c.compress(chunk) for _ in range(size >> 20)), c.flush()])


def _zstd_bomb(size: int) -> bytes:
    c = cramjam.zstd.Compressor()
    chunk = bytes(1 << 20)
    for _ in range(size >> 20):
        c.compress(chunk)
    return bytes(c.finish())


def _section(n: int = 2) -> bytes:
    return encode_records([f"r{i}".encode() for i in range(n)], [b"k"] * n)


def _batch(section: bytes, *, attributes: int = 0, count: int = 2, last_delta: int | None = None,
           ts: int | None = None) -> bytes:
    t = _now() if ts is None else ts
    return assemble_batch(section, count=count,
                          last_offset_delta=count - 1 if last_delta is None else last_delta,
                          base_timestamp=t, max_timestamp=t, attributes=attributes)


def _broken_length() -> bytes:
    section = bytearray(_section())
    section[0] += 10   # the first record's length varint (zigzag): says 5 bytes more
    return bytes(section)


def _future_record() -> bytes:
    """The second record 2 hours ahead, the header's maxTimestamp claiming only now."""
    t = _now()
    section = encode_records([b"a", b"b"], [b"k", b"k"], timestamp_deltas=[0, 7_200_000])
    return assemble_batch(section, count=2, last_offset_delta=1, base_timestamp=t,
                          max_timestamp=t)


CASES = {
    "garbage gzip payload": (lambda: _batch(b"\x1f\x8b\x08\x00garbage" * 20,
                                            attributes=Compression.GZIP),
                             errors.CorruptMessageError),
    "garbage zstd payload": (lambda: _batch(b"\x28\xb5\x2f\xfd" + b"\xff" * 64,
                                            attributes=Compression.ZSTD),
                             errors.CorruptMessageError),
    "gzip bomb of 256 MiB": (lambda: _batch(_gzip_bomb(BOMB), attributes=Compression.GZIP,
                                            count=1), errors.CorruptMessageError),
    "zstd bomb of 256 MiB": (lambda: _batch(_zstd_bomb(BOMB), attributes=Compression.ZSTD,
                                            count=1), errors.CorruptMessageError),
    "broken record length": (lambda: _batch(_broken_length()), errors.CorruptMessageError),
    "more records claimed than fit": (lambda: _batch(_section(2), count=3),
                                      errors.InvalidRecordError),
    "one record more claimed than sent": (lambda: _batch(_section(4), count=5),
                                          errors.CorruptMessageError),
    "one record fewer claimed than sent": (lambda: _batch(_section(4), count=3),
                                           errors.CorruptMessageError),
    "offset deltas not 0..n-1": (
        lambda: _batch(encode_records([b"a", b"b"], offset_deltas=[0, 5])),
        errors.InvalidRecordError),
    "codec id 5": (lambda: _batch(_section(), attributes=5),
                   errors.UnsupportedCompressionTypeError),
    "codec id 6": (lambda: _batch(_section(), attributes=6),
                   errors.UnsupportedCompressionTypeError),
    "codec id 7": (lambda: _batch(_section(), attributes=7),
                   errors.UnsupportedCompressionTypeError),
    "a record's timestamp beyond the header's": (_future_record, errors.InvalidTimestampError),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_batch_is_refused_and_not_appended(cluster: Cluster, case: str) -> None:
    topic = _topic(cluster)
    before = _ends(cluster, topic)
    build, expected = CASES[case]
    code, message = _produce(cluster, topic, 0, build())
    assert code == expected.code, (code, message)
    assert _ends(cluster, topic) == before == [2, 2, 2]
    _assert_readable(cluster, topic, 2)


def test_zstd_needs_produce_v7(cluster: Cluster) -> None:
    topic = _topic(cluster)
    zstd = encode_batch([b"z"], timestamps=[_now()], compression=Compression.ZSTD)
    code, _ = _produce(cluster, topic, 0, zstd, version=6)
    assert code == errors.UnsupportedCompressionTypeError.code
    assert _produce(cluster, topic, 0, zstd, version=7) == (0, None)
    _assert_readable(cluster, topic, 3)


def test_each_keyless_record_is_named(cluster: Cluster) -> None:
    """KIP-467: ten keyless records in a batch of 100 for a compacted topic: INVALID_RECORD
    with the ten listed by their index in the batch, as Kafka's LogValidator lists them
    (the producer's side: tests/client/test_record_errors.py)."""
    topic = _topic(cluster, **{"cleanup.policy": "compact"})
    keyless = set(range(5, 100, 10))
    batch = encode_batch([b"v%d" % i for i in range(100)],
                         keys=[None if i in keyless else b"k%d" % i for i in range(100)],
                         timestamps=[_now()] * 100)
    state = cluster.controller.partition(topic, 0)
    assert state is not None

    async def send() -> ProduceResponse:
        conn = await BrokerConnection("127.0.0.1", cluster.broker(state.leader).port,
                                      client_id="validation").open()
        try:
            resp: ProduceResponse = await conn.request(ProduceRequest(
                acks=-1, timeout_ms=5000, topic_data=[pq.TopicProduceData(
                    name=topic, partition_data=[pq.PartitionProduceData(0, batch)])]),
                version=11, timeout=30)
            return resp
        finally:
            conn.close()

    part = asyncio.run(send()).responses[0].partition_responses[0]
    assert part.error_code == errors.InvalidRecordError.code
    assert sorted(e.batch_index for e in part.record_errors) == sorted(keyless)
    assert all("without key" in (e.batch_index_error_message or "")
               for e in part.record_errors)
    assert part.error_message is not None and "10 record errors" in part.error_message
    assert _ends(cluster, topic) == [2, 2, 2]


def test_compacted_topic_needs_keys_in_compressed_batches_too(cluster: Cluster) -> None:
    topic = _topic(cluster, **{"cleanup.policy": "compact"})
    keyless = encode_batch([b"a", b"b"], keys=[b"k", None], timestamps=[_now()] * 2,
                           compression=Compression.LZ4)
    code, _ = _produce(cluster, topic, 0, keyless)
    assert code == errors.InvalidRecordError.code
    assert _ends(cluster, topic) == [2, 2, 2]


@pytest.mark.parametrize("index", [-1, -100, -(1 << 31), 3, 1 << 30])
def test_partition_index_out_of_range_is_unknown_partition(
        cluster: Cluster, index: int, caplog: pytest.LogCaptureFixture) -> None:
    topic = _topic(cluster)
    caplog.set_level(logging.ERROR)
    code, _ = _produce(cluster, topic, index, encode_batch([b"x"], timestamps=[_now()]))
    assert code == errors.UnknownTopicOrPartitionError.code
    assert not [r for r in caplog.records if "handler failed" in r.getMessage()]


def test_valid_compressed_batches_are_still_accepted(cluster: Cluster) -> None:
    topic = _topic(cluster)
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        batch = encode_batch([b"x" * 1000] * 50, keys=[b"k"] * 50, timestamps=[_now()] * 50,
                             compression=codec)
        assert _produce(cluster, topic, 0, batch) == (0, None)
    _assert_readable(cluster, topic, 202)


def _assert_readable(cluster: Cluster, topic: str, end: int) -> None:
    """confluent-kafka reads offsets 0..end-1 of the partition, with no error."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic,
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        offsets: list[int] = []
        for _ in range(100):
            if len(offsets) >= end:
                break
            for m in c.consume(num_messages=500, timeout=0.5):
                assert m.error() is None, m.error()
                offsets.append(m.offset())
        assert offsets == list(range(end))
    finally:
        c.close()
