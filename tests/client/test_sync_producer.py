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
import time
import uuid
from collections import defaultdict

import pytest

from kaflite.client import Consumer, Producer, RecordMetadata, TopicPartition, sync
from kaflite.client.producer import BufferFull
from kaflite.client.producer._accumulator import DeliveryCallback
from kaflite.client.producer._partitioner import KeyCache
from kaflite.client.producer._sender import DeliveryTimeout
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
        producing = True

        def flusher() -> None:   # cuts runs while the threads append to them
            while producing:
                p.flush(30)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        cutter = threading.Thread(target=flusher)
        for th in [*threads, cutter]:
            th.start()
        for th in threads:
            th.join(60)
        producing = False
        cutter.join(60)
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



def test_a_record_appended_as_its_run_is_cut_is_sent(cluster: Cluster) -> None:
    """``produce`` appends to a partition's run without the lock. A caller that read
    the run's limit just before another thread cut the run appends after the cut;
    it then finds the limit at 0 and has the run opened, so that linger.ms sends
    the record (no flush). Played here step by step: the cut, then the append
    and the check the fast path makes."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    delivered: list[bytes] = []
    done = threading.Event()

    def report(err: BaseException | None, md: RecordMetadata | None) -> None:
        assert err is None
        delivered.append(b"late")
        done.set()

    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=20) as p:
        p.produce(topic, b"first")            # opens the run of partition 0
        r = p._topics[topic].runs[0]
        items = r.items
        assert r.limit > len(items)           # the fast path may append
        with p._lock:
            p._cut(r)                         # another thread seals it...
        assert r.limit == 0 and not items and r not in p._opened
        items += (None, b"late", report)      # ...as this one appends
        p._adopt(r)                           # (the fast path: the limit is now 0)
        assert r in p._opened
        assert done.wait(30), "a record appended as its run was cut was never sent"
    got = _read_to_end(cluster.bootstrap_servers, topic, 1)
    assert sorted(got.values()) == [b"first", b"late"]


def test_a_run_opened_again_by_the_linger_cut_is_sent(cluster: Cluster) -> None:
    """A record appended while linger.ms's own cut (on the loop thread) takes a run
    stays and opens the run again; linger.ms must then send it too, without a flush.
    The append is played inside the cut, after its count (where a caller thread
    can come in)."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    done = threading.Event()
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=20) as p:
        p.produce(topic, b"first")
        r = p._topics[topic].runs[0]
        account = p._account
        slipped: list[bool] = []

        def counting_then_appended(run: object) -> None:
            account(r)
            if threading.current_thread().name == "kaflite-client" and not slipped:
                slipped.append(True)
                r.items.extend((None, b"late", lambda err, md: done.set()))

        p._account = counting_then_appended   # type: ignore[method-assign]
        assert done.wait(30), "a run opened again by linger.ms's cut was never sent"
        assert slipped
    got = _read_to_end(cluster.bootstrap_servers, topic, 1)
    assert sorted(got.values()) == [b"first", b"late"]


def test_one_threads_acknowledgements_follow_its_produce_order_through_faults(
        cluster: Cluster) -> None:
    """One thread's records, keyed and not, through retriable errors and leader moves:
    in each partition the offsets acknowledged must grow in produce order, each at
    the offset where the log holds that record (the verify round's nonmonotonic-send).
    The first Produce of each partition fails late, so that the batches behind it
    are written first where the broker has no state for the producer yet."""
    topic = f"order-{uuid.uuid4().hex[:8]}"
    client = f"order-{uuid.uuid4().hex[:6]}"
    partitions, n = 4, 3000
    cluster.create_topic(topic, partitions=partitions, replication_factor=3)
    faults = cluster.faults
    rules = [faults.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", 1, topic=topic,
                                 partition=part, client_id=client)
             for part in range(partitions)]
    rules.append(faults.delay("Produce", 100, count=partitions, client_id=client))
    acks: list[tuple[int, int, int] | None] = [None] * n   # (ok, partition, offset)
    failures: list[BaseException] = []
    stop = threading.Event()

    def nemesis() -> None:
        errors = ("NOT_LEADER_OR_FOLLOWER", "NOT_ENOUGH_REPLICAS", "REQUEST_TIMED_OUT",
                  "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
        for i in range(300):
            if stop.wait(0.02):
                return
            rules.append(faults.inject_error("Produce", errors[i % len(errors)], 1,
                                             topic=topic, client_id=client))
            if i % 8 == 0:
                faults.move_leader(topic, i % partitions)

    def report(i: int) -> DeliveryCallback:
        def done(err: BaseException | None, md: RecordMetadata | None) -> None:
            acks[i] = (err is None, md.partition if md else -1, md.offset if md else -1)
            if err is not None:
                failures.append(err)
        return done

    # A record that waits out delivery.timeout.ms is a stuck partition (a batch retried
    # at the head of its queue for ever once made this test take 120 s): none may.
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, client_id=client,
                       acks="all", enable_idempotence=True, linger_ms=0,
                       retry_backoff_ms=10, delivery_timeout_ms=40000) as p:
        faulting = threading.Thread(target=nemesis)
        faulting.start()
        try:
            for i in range(n):
                p.produce(topic, b"%d" % i, b"k%d" % (i % 16) if i % 2 else None,
                          on_delivery=report(i))
                if i % 50 == 49:
                    time.sleep(0.005)   # bursts, as an application's
            p.flush(60)
        finally:
            stop.set()
            faulting.join(30)
            for rule in rules:
                faults.remove(rule.id)
    assert None not in acks, "a record without its delivery report"
    assert not [e for e in failures if isinstance(e, DeliveryTimeout)], failures[:3]
    written = [(i, a[1], a[2]) for i, a in enumerate(acks) if a is not None and a[0]]
    assert len(written) > n // 2
    last: dict[int, int] = {}
    for i, part, offset in written:
        assert offset > last.get(part, -1), \
            f"record {i} acknowledged at {part}@{offset}, after {last.get(part)}"
        last[part] = offset
    log = _read_to_end(cluster.bootstrap_servers, topic, partitions)
    for i, part, offset in written:
        assert log[(part, offset)] == b"%d" % i


def _read_to_end(servers: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    """Every record of ``topic`` up to its end offsets, by (partition, offset)."""
    out: dict[tuple[int, int], bytes] = {}

    async def main() -> None:
        async with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as c:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            c.assign(tps)
            ends = await c.end_offsets(tps)
            for _ in range(200):
                if all(sum(1 for k in out if k[0] == tp.partition) >= end
                       for tp, end in ends.items()):
                    break
                for tp, records in (await c.getmany(timeout_ms=200)).items():
                    for r in records:
                        out[(tp.partition, r.offset)] = bytes(r.value or b"")
    asyncio.run(main())
    return out


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
        assert p._acc.used + p._held <= 50_000
    # max.block.ms > 0: Java's, produce waits for room and every record goes out
    n = 400
    delivered: list[int] = []
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, buffer_memory=50_000,
                       max_block_ms=30_000, linger_ms=1, batch_size=16_384) as p:
        for _ in range(n):
            p.produce(topic, value, on_delivery=lambda e, md: delivered.append(1))
            assert p._acc.used + p._held <= 50_000
        p.flush()
    assert len(delivered) == n
    # (_consume_all checks that exactly this many records are in the topic)
    _consume_all(cluster.bootstrap_servers, topic, 1, 1 + first + n)


def test_plain_and_other_records_keep_one_threads_order(cluster: Cluster) -> None:
    """Plain records are batched in the caller's thread; records with headers, an
    explicit partition or a timestamp take the loop's path. Interleaved, one
    thread's records must still land in produce order in every partition, with
    their headers and timestamps."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=2, replication_factor=1)
    n = 600
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50) as p:
        p.send(topic, b"warm-up", partition=1)   # metadata known: plain records batch here
        for i in range(n):
            value = b"%05d" % i
            if i % 5 == 0:
                p.produce(topic, value, partition=0, headers=[("i", value)])
            elif i % 7 == 0:
                p.produce(topic, value, partition=0, timestamp=1_000_000 + i)
            else:
                p.produce(topic, value, b"k" if i % 2 else None)
        p.flush()
    got = _read_to_end(cluster.bootstrap_servers, topic, 2)
    assert len(got) == n + 1
    for part in (0, 1):
        values = [v for (q, _), v in sorted(got.items()) if q == part and v != b"warm-up"]
        assert values == sorted(values), f"partition {part} out of produce order"
    # (the keyed records all went to murmur2's partition of b"k")
    keyed = {b"%05d" % i for i in range(n) if i % 5 and i % 7 and i % 2}
    assert {v for (q, _), v in got.items() if v in keyed} == keyed
    assert all(q == murmur2_partition(b"k", 2) for (q, _), v in got.items() if v in keyed)


def test_lingering_batches_go_out_without_flush(cluster: Cluster) -> None:
    """A batch that never fills is sent once it has waited linger.ms, without a flush."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    done = threading.Event()
    reports: list[RecordMetadata] = []

    def report(err: BaseException | None, md: RecordMetadata | None) -> None:
        assert err is None and md is not None
        reports.append(md)
        if len(reports) == 3:
            done.set()

    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=20) as p:
        p.send(topic, b"first")
        for key in (None, b"a", None):
            p.produce(topic, b"v", key, on_delivery=report)
        assert done.wait(30), "a lingering batch was never sent"
        assert [md.offset for md in reports] == [1, 2, 3]


def test_first_produce_to_a_topic_waits_for_its_metadata(cluster: Cluster) -> None:
    """As Java's ``send``, the first ``produce`` to a topic whose metadata is not known
    waits for one round trip naming it, so that its records are batched in the
    caller's thread. (Queued one by one for the loop thread instead, a caller that
    kept the GIL producing delayed that round trip by 50-200 ms, and every record
    meanwhile took the slow path.)"""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=2, replication_factor=1)
    delivered: list[RecordMetadata] = []
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000) as p:
        p.produce(topic, b"v", b"k", on_delivery=lambda e, md: delivered.append(md))
        # placed in a caller-side batch (with linger.ms a minute, it is still there)
        assert topic in p._topics and not p._queue
        assert sum(len(r.items) // 3 for r in p._opened) == 1
        p.flush()
    assert len(delivered) == 1 and delivered[0].topic == topic


def test_a_missing_topic_is_waited_for_once() -> None:
    """A topic the round trip does not find (auto-creation off) is not waited for
    again: its records are queued, and their callbacks report the failure."""
    errors: list[BaseException | None] = []
    with Cluster(brokers=1, config={"auto.create.topics.enable": "false"}) as c, \
            sync.Producer(bootstrap_servers=c.bootstrap_servers, max_block_ms=1000) as p:
        learned = []
        real = p._target.learn_topic

        async def counting(topic: str) -> bool:
            learned.append(topic)
            return await real(topic)
        p._target.learn_topic = counting  # type: ignore[method-assign]
        for _ in range(3):
            p.produce("missing", b"v", on_delivery=lambda e, md: errors.append(e))
        assert learned == ["missing"]
        p.flush(10)
    assert len(errors) == 3 and all(e is not None for e in errors)
