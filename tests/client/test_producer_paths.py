"""The producer's paths into the accumulator keep Kafka's guarantees.

Unkeyed records without headers or timestamps take a fast path (appended to
the open batch of the topic's sticky partition); everything else takes the
general path, and ``send_batch`` appends whole batches. Mixed together, with
small batches so that batches close, drain and the sticky partition moves
on while records keep coming, every record is delivered once, each
partition's records keep their produce order, the delivery reports name the
offsets the records really have, and the uniform sticky partitioner still
spreads unkeyed records over the partitions.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.client import Consumer, Producer, RecordMetadata, TopicPartition
from kaflite.client.producer._accumulator import BATCH_OVERHEAD, ProducerBatch, cut_batches
from kaflite.client.producer._values import BatchMetadata
from kaflite.cluster import Cluster
from kaflite.protocol.hashing import murmur2_partition
from kaflite.protocol.records import RecordBatch, encode_batch, encode_records


def test_fast_and_general_paths_interleaved(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=3, replication_factor=1)
    reports: dict[bytes, RecordMetadata] = {}
    order: list[bytes] = []

    def on_delivery(value: bytes) -> Any:
        def report(err: BaseException | None, md: RecordMetadata | None) -> None:
            assert err is None and md is not None
            reports[value] = md
        return report

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=3000,
                            linger_ms=2) as p:
            for i in range(6000):
                value = f"v{i:05d}".encode()
                order.append(value)
                if i % 500 == 7:
                    md = await p.send(topic, value)            # fast path, awaited
                    reports[value] = md
                elif i % 300 == 11:
                    p.produce(topic, value, key=b"key-%d" % (i % 5),
                              on_delivery=on_delivery(value))
                elif i % 400 == 13:
                    p.produce(topic, value, headers={"h": b"1"}, on_delivery=on_delivery(value))
                elif i % 700 == 17:
                    p.produce(topic, value, partition=i % 3, on_delivery=on_delivery(value))
                elif i % 1000 == 19:
                    extra = [value + b"-%d" % j for j in range(50)]
                    result = await p.send_batch(topic, [value, *extra], wait=False)
                    order.extend(extra)
                    await p.flush()
                    for v, md in zip([value, *extra], result, strict=True):
                        reports[v] = md
                else:
                    p.produce(topic, value, on_delivery=on_delivery(value))
                if i % 250 == 0:
                    await asyncio.sleep(0.003)   # let batches linger out and drain
            await p.flush()
        assert len(reports) == len(order)
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, q) for q in range(3)])
            got: dict[int, list[tuple[int, bytes, bytes | None, Any]]] = {0: [], 1: [], 2: []}
            for _ in range(100):
                for r in await c.poll(timeout_ms=300):
                    got[r.partition].append((r.offset, r.value, r.key, r.headers))
                if sum(map(len, got.values())) >= len(order):
                    break
            assert len(await c.poll(timeout_ms=300)) == 0
        seen = {v: (q, off, key, hdrs) for q, rs in got.items() for off, v, key, hdrs in rs}
        assert len(seen) == len(order) == sum(map(len, got.values()))
        rank = {v: i for i, v in enumerate(order)}
        for q, rs in got.items():
            assert [rank[v] for _, v, _, _ in rs] == sorted(rank[v] for _, v, _, _ in rs), q
            assert len(rs) >= 50, "the sticky partitioner never moved to this partition"
        for v, md in reports.items():
            assert (md.partition, md.offset) == seen[v][:2], v
            if seen[v][2] is not None:
                assert md.partition == murmur2_partition(seen[v][2], 3)
        assert sum(1 for _, _, _, h in seen.values() if h) == len(
            [i for i in range(6000) if i % 500 != 7 and i % 300 != 11 and i % 400 == 13])

    asyncio.run(asyncio.wait_for(main(), 60))


def test_keyed_fast_path_follows_the_newest_batch(cluster: Cluster) -> None:
    """Keyed records take a fast path into the batch keyed records last went to in
    their partition. With small batches that fill, drain and are retried behind
    unkeyed records and ``send_batch`` batches in the same partitions, each record
    must land in its key's partition, in produce order, at the offset reported."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=3, replication_factor=1)
    reports: dict[bytes, RecordMetadata] = {}
    order: list[bytes] = []
    batches: list[tuple[bytes, BatchMetadata]] = []

    def on_delivery(value: bytes) -> Any:
        def report(err: BaseException | None, md: RecordMetadata | None) -> None:
            assert err is None and md is not None
            reports[value] = md
        return report

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=1500,
                            linger_ms=1) as p:
            for i in range(5000):
                value = f"v{i:05d}".encode()
                order.append(value)
                key = b"key-%d" % (i % 11)
                if i % 97 == 5:
                    p.produce(topic, value, on_delivery=on_delivery(value))   # unkeyed
                elif i % 41 == 9:
                    # (closes the partition's open batch: later keyed records go behind)
                    batches.append((value, await p.send_batch(topic, [value], keys=[key],
                                                              wait=False)))
                else:
                    p.produce(topic, value, key=key, on_delivery=on_delivery(value))
                if i % 300 == 0:
                    await asyncio.sleep(0.002)
            await p.flush()
            for value, result in batches:
                reports[value] = result[0]
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, q) for q in range(3)])
            got: dict[int, list[tuple[int, bytes, bytes | None]]] = {0: [], 1: [], 2: []}
            for _ in range(100):
                for r in await c.poll(timeout_ms=300):
                    got[r.partition].append((r.offset, r.value, r.key))
                if sum(map(len, got.values())) >= len(order):
                    break
        seen = {v: (q, off, key) for q, rs in got.items() for off, v, key in rs}
        assert len(seen) == len(order) == len(reports)
        rank = {v: i for i, v in enumerate(order)}
        for q, rs in got.items():
            assert [rank[v] for _, v, _ in rs] == sorted(rank[v] for _, v, _ in rs), q
        for v, md in reports.items():
            assert (md.partition, md.offset) == seen[v][:2], v
            if seen[v][2] is not None:
                assert md.partition == murmur2_partition(seen[v][2], 3)

    asyncio.run(asyncio.wait_for(main(), 60))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 300), lengths=st.lists(st.integers(0, 5000), min_size=1, max_size=4),
       deltas=st.lists(st.integers(0, 63), min_size=1, max_size=5), far=st.booleans())
def test_encoding_with_timestamp_deltas(n: int, lengths: list[int], deltas: list[int],
                                        far: bool) -> None:
    """The encoder's path for unkeyed records stamped in one batch (deltas 0..63 ms)
    writes the bytes of the general path, and they decode to what was produced."""
    values = [bytes([i % 256]) * lengths[i % len(lengths)] for i in range(n)]
    ts_deltas = [deltas[i % len(deltas)] + (70 if far and i == n - 1 else 0) for i in range(n)]
    fast = encode_records(values, timestamp_deltas=ts_deltas)
    general = encode_records(values, timestamp_deltas=ts_deltas, offset_deltas=list(range(n)))
    assert fast == general
    base = 1_700_000_000_000
    batch = RecordBatch.from_buffer(encode_batch(values, timestamps=[base + d for d in ts_deltas],
                                                 base_timestamp=base))
    cols = batch.columns(copy=True)
    assert cols.values == values
    assert cols.timestamps == [base + d for d in ts_deltas]


@given(sizes=st.lists(st.integers(1, 700), max_size=300), batch_size=st.integers(1, 2000))
def test_cut_batches_matches_filling_one_by_one(sizes: list[int], batch_size: int) -> None:
    expected, i = [], 0
    while i < len(sizes):
        start, total = i, BATCH_OVERHEAD
        while i < len(sizes) and (total + sizes[i] <= batch_size or i == start):
            total += sizes[i]
            i += 1
        expected.append((start, i, total))
    assert cut_batches(sizes, batch_size) == expected


@pytest.mark.parametrize("finish", ["complete", "fail"])
def test_a_finished_batch_lets_go_of_its_encoded_records(finish: str) -> None:
    """Whoever still holds a finished batch (a flush waiting for all of them) must not
    keep its encoded copy alive: the next batches reuse that memory."""
    batch = ProducerBatch("t", 0, 0.0)
    batch.values, batch.timestamps = [b"a" * 1024, b"b" * 1024], [5, 5]
    data = batch.encode(0, 7, 0, 0)
    assert RecordBatch.from_buffer(data).crc_ok()
    assert batch.encoded is data
    reports: list[tuple[BaseException | None, RecordMetadata | None]] = []
    batch.callbacks = [(1, lambda err, md: reports.append((err, md)))]
    if finish == "complete":
        batch.complete(40, -1)
        assert reports == [(None, RecordMetadata("t", 0, 41, 5))]
    else:
        batch.fail(RuntimeError("gone"))
        assert isinstance(reports[0][0], RuntimeError)
    assert batch.encoded is None
    assert len(batch) == 2
