"""The sync producer's hand-off, the key cache and buffer.memory.

``sync.Producer.produce`` queues records in the caller's thread and moves them
to the accumulator a burst at a time, column by column. Several threads
producing at once must each get every record delivered once, in their own
order within a partition, with each ``on_delivery`` called once on the
client's loop thread. Keyed records must land where Java's murmur2 puts
them, whichever path (cached or not, bulk or one by one) placed them. And
``buffer.memory`` must bound what a producer holds even when nothing drains
it: records waiting for their topic's metadata count, and the sync queue
blocks for ``max.block.ms`` and then raises ``BufferFull``.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections import defaultdict

import pytest

from kaflite.client import Consumer, Producer, RecordMetadata, TopicPartition, sync
from kaflite.client.producer import BufferFull
from kaflite.client.producer._accumulator import DeliveryCallback
from kaflite.client.producer._partitioner import KeyCache
from kaflite.cluster import Cluster
from kaflite.protocol.hashing import murmur2_partition

THREADS = 4
PER_THREAD = 3000


def _consume_all(servers: str, topic: str, partitions: int, n: int
                 ) -> dict[int, list[tuple[bytes | None, bytes]]]:
    """(key, value) of every record of ``topic``, per partition in offset order."""
    out: dict[int, list[tuple[bytes | None, bytes]]] = defaultdict(list)

    async def main() -> None:
        async with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(partitions)])
            got = 0
            for _ in range(200):
                if got >= n:
                    break
                for tp, records in (await c.getmany(timeout_ms=200)).items():
                    for r in records:
                        assert r.value is not None
                        out[tp.partition].append(
                            (None if r.key is None else bytes(r.key), bytes(r.value)))
                    got += len(records)
            assert got == n
    asyncio.run(main())
    return out


@pytest.mark.parametrize("keyed", [False, True])
def test_threads_produce_at_once(cluster: Cluster, keyed: bool) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=3, replication_factor=1)
    reports: dict[bytes, RecordMetadata] = {}
    callback_threads: set[str] = set()
    lock = threading.Lock()

    def report(err: BaseException | None, md: RecordMetadata | None) -> None:
        assert err is None and md is not None
        with lock:
            callback_threads.add(threading.current_thread().name)

    def on_delivery(value: bytes) -> DeliveryCallback:
        def cb(err: BaseException | None, md: RecordMetadata | None) -> None:
            report(err, md)
            assert md is not None
            with lock:
                assert value not in reports, "a delivery reported twice"
                reports[value] = md
        return cb

    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, batch_size=4000,
                       linger_ms=2) as p:
        def work(t: int) -> None:
            for i in range(PER_THREAD):
                value = b"%d-%05d" % (t, i)
                key = b"k%d" % (i % 7) if keyed else None
                # every third record reports its delivery; the rest go bare
                p.produce(topic, value, key, on_delivery=on_delivery(value) if i % 3 == 0
                          else None)
        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        p.flush()

    assert callback_threads == {"kaflite-client"}
    assert len(reports) == THREADS * PER_THREAD // 3
    by_partition = _consume_all(cluster.bootstrap_servers, topic, 3, THREADS * PER_THREAD)
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, records in by_partition.items():
        last: dict[bytes, int] = {}
        for offset, (key, value) in enumerate(records):
            assert value not in seen, "a record written twice"
            seen[value] = (partition, offset)
            t, i = value.split(b"-")
            assert last.get(t, -1) < int(i), "a thread's records out of order"
            last[t] = int(i)
            if keyed:
                assert key == b"k%d" % (int(i) % 7)
                assert partition == murmur2_partition(key, 3)
    assert len(seen) == THREADS * PER_THREAD
    for value, md in reports.items():
        assert (md.partition, md.offset) == seen[value]


# (key, partition of 12) as Java's BuiltInPartitioner.partitionForKey computes them:
# toPositive(murmur2(key)) % 12, from the murmur2 values of Kafka's own Utils tests.
JAVA_PARTITIONS = [(key, (h & 0x7FFFFFFF) % 12) for key, h in (
    (b"21", -973932308), (b"foobar", -790332482), (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829), (b"abc", 479470107))]


def test_key_cache_agrees_with_murmur2() -> None:
    cache = KeyCache(limit=3)
    table = cache.table("t", version=1, num_partitions=12)
    for _ in range(2):   # uncached, then (partly) cached
        for key, want in JAVA_PARTITIONS:
            assert murmur2_partition(key, 12) == want
            assert cache.partition(table, key, 12) == want
    assert len(table) <= 3
    # a new partition count (or metadata version) gets a fresh table
    assert cache.table("t", version=1, num_partitions=5) is not table
    table5 = cache.table("t", version=2, num_partitions=5)
    assert cache.partition(table5, b"foobar", 5) == murmur2_partition(b"foobar", 5)


def test_keyed_paths_place_records_like_java(cluster: Cluster) -> None:
    """Async produce (general path, then the cached fast path), send and the sync
    façade's bulk path all put a key on murmur2's partition."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=12, replication_factor=1)
    keys = [k for k, _ in JAVA_PARTITIONS] + [b"user-%d" % i for i in range(40)]
    placed: list[tuple[bytes, int]] = []

    def cb(key: bytes) -> DeliveryCallback:
        def report(err: BaseException | None, md: RecordMetadata | None) -> None:
            assert err is None and md is not None
            placed.append((key, md.partition))
        return report

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            for _ in range(3):
                for k in keys:
                    p.produce(topic, b"v", k, on_delivery=cb(k))
            md = await p.send(topic, b"v", b"foobar")
            placed.append((b"foobar", md.partition))
    asyncio.run(main())
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers) as sp:
        for _ in range(3):
            for k in keys:
                sp.produce(topic, b"v", k, on_delivery=cb(k))
    assert len(placed) == 6 * len(keys) + 1
    for key, partition in placed:
        assert partition == murmur2_partition(key, 12)
    assert (b"foobar", (-790332482 & 0x7FFFFFFF) % 12) in placed


def test_produce_before_metadata_is_bounded() -> None:
    """A loop that never awaits cannot queue more than buffer.memory: the records
    waiting for their topic's metadata count against it."""
    async def main() -> int:
        # nothing listens there; the metadata never comes while we do not await
        p: Producer = Producer(bootstrap_servers="127.0.0.1:1", buffer_memory=100_000,
                               max_block_ms=100)
        queued = 0
        with pytest.raises(BufferFull):
            for _ in range(10_000):
                p.produce("t", b"x" * 1000)
                queued += 1
        return queued
    queued = asyncio.run(main())
    assert 90 <= queued <= 100


def test_sync_produce_is_bounded_by_buffer_memory(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    value = b"x" * 1000
    # max.block.ms=0: confluent-kafka's behaviour, BufferError as soon as it is full
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, buffer_memory=50_000,
                       max_block_ms=0, linger_ms=1000, batch_size=1_000_000) as p:
        p.send(topic, value)    # metadata known
        first = 0
        with pytest.raises(BufferError):
            for _ in range(10_000):
                p.produce(topic, value)
                first += 1
        assert first >= 40 and first * 1021 <= 50_000 + 1021   # (within a record)
        assert p._acc.used + len(p._queue) * 1021 <= 50_000
    # max.block.ms > 0: Java's, produce waits for room and every record goes out
    n = 400
    delivered: list[int] = []
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, buffer_memory=50_000,
                       max_block_ms=30_000, linger_ms=1, batch_size=16_384) as p:
        for _ in range(n):
            p.produce(topic, value, on_delivery=lambda e, md: delivered.append(1))
            assert p._acc.used + len(p._queue) * 1021 <= 50_000
        p.flush()
    assert len(delivered) == n
    # (_consume_all checks that exactly this many records are in the topic)
    _consume_all(cluster.bootstrap_servers, topic, 1, 1 + first + n)
