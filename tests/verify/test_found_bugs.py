"""Bugs that ``kaflite.verify`` found in kaflite, each reduced to its smallest reproduction.

Each test fails while its bug is there; the checker's finding, the seed that
found it and the fix proposed are in the test's docstring. They belong with the
client's own tests (``tests/client``) once fixed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.client.sync import Consumer as SyncConsumer
from kaflite.cluster import Cluster
from kaflite.cluster.faults import Rule, api_key_of
from kaflite.protocol.records import iter_batches

TXN_CONFIG = {"auto.create.topics.enable": "false", "transaction.state.log.num.partitions": 1,
              "transaction.state.log.replication.factor": 1,
              "offsets.topic.replication.factor": 1}


def run(coro: Any, timeout: float = 60) -> Any:
    return asyncio.run(asyncio.wait_for(coro, timeout))


def test_produce_keeps_send_order_while_the_topic_metadata_is_loading() -> None:
    """nonmonotonic-send: ``python -m kaflite.verify --client kaflite --workload txn
    --nemesis none --seconds 8 --seed 3`` (transformer-0 sent 1 then 2 to vout-0; 2 was
    acked at offset 0, 1 at offset 1).

    ``Producer.produce`` for a topic whose metadata is not cached queues the record
    on a task (``_produce_later``) that appends it once the metadata has come. A
    ``produce`` made after the metadata arrived but before those tasks ran appends
    at once, ahead of them: one producer's records land out of send order in one
    partition. Kafka's producer keeps per-partition send order. Proposed fix: while
    records of a topic wait for metadata, later records of that topic wait behind
    them (one FIFO per topic, drained by one task), whatever the metadata says.
    """
    async def main() -> list[int]:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("t", 1, 1)
            acked: list[tuple[int, int]] = []
            async with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
                for i in range(200):
                    p.produce("t", str(i).encode(), partition=0,
                              on_delivery=lambda e, md, i=i: acked.append((md.offset, i)))
                    await asyncio.sleep(0)
                await p.flush(30)
            return [i for _, i in sorted(acked)]

    by_offset = run(main())
    assert len(by_offset) == 200
    assert by_offset == sorted(by_offset), f"sent in order, written as {by_offset[:20]}..."


def test_a_transaction_whose_record_failed_cannot_commit() -> None:
    """lost-write and unprocessed: ``python -m kaflite.verify --client kaflite
    --workload txn --nemesis all --seconds 8 --seed 2001``. The whole cluster was
    killed while transformer-0 was in a transaction; its record for vout (value 24)
    failed (ConnectionClosed) before it was appended, yet ``commit_transaction``
    committed the transaction and its offsets (vin-1 up to 3): value 24 is in no
    committed output and its input is never read again.

    A record that fails in ``Producer._produce_later`` (its topic's metadata did
    not come) only reaches its delivery callback: the transaction is not made
    abortable. Kafka's producer (``doSend``) moves the transaction to its abortable
    state on any such error. Proposed fix: call ``self._txn.fail(exc)`` there (and
    wherever a record of a transaction fails outside the sender).
    """
    async def main() -> tuple[str, list[Any]]:
        async with Cluster(brokers=1, config=TXN_CONFIG) as cluster:
            cluster.create_topic("t", 1, 1)
            reports: list[Any] = []
            async with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "transactional.id": "tx", "max.block.ms": 1000}) as p:
                await p.init_transactions()
                p.begin_transaction()
                p.produce("t", b"kept", on_delivery=lambda e, md: reports.append(e))
                p.produce("missing", b"lost", on_delivery=lambda e, md: reports.append(e))
                await asyncio.sleep(1.5)
                try:
                    await p.commit_transaction()
                    outcome = "committed"
                except Exception as exc:
                    outcome = repr(exc)
                    await p.abort_transaction()
            return outcome, reports

    outcome, reports = run(main())
    assert any(r is not None for r in reports), "the record for the missing topic failed"
    assert outcome != "committed", "a transaction with a failed record committed"


def test_produce_waits_max_block_ms_for_metadata_while_brokers_are_down() -> None:
    """Found with the previous bug (seed 2001): the record failed at once, during a
    1.3 s outage, although ``max.block.ms`` was 20 s.

    ``produce`` to a topic whose metadata is not cached, while no broker answers,
    fails at once (NoBrokerAvailable / ConnectionClosed) instead of retrying the
    metadata request until ``max.block.ms`` as Kafka's ``waitOnMetadata`` does.
    """
    async def main() -> list[Any]:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("t", 1, 1)
            cluster.create_topic("u", 1, 1)
            reports: list[Any] = []
            async with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "max.block.ms": 20000}) as p:
                await p.send("t", b"warm")          # connected; metadata of t only
                await cluster.kill_broker(0)
                p.produce("u", b"x", on_delivery=lambda e, md: reports.append(e or md.offset))
                await asyncio.sleep(1.0)
                await cluster.restart_broker(0)
                await p.flush(15)
            return reports

    assert run(main()) == [0]


def test_requests_waiting_out_a_throttle_leave_in_order() -> None:
    """duplicate and nonmonotonic-send: ``python -m kaflite.verify --client
    kaflite-sync --seconds 30 --seed 402`` (found twice in three runs). While broker 0
    throttled (KIP-219, 356 ms), producer-0's first batches for queue-3 were written
    newest first: the batch of 1365-1367 (sequence 6) was appended at offsets 176-178
    before those of 1353-1355 and 1359-1361 (sequences 0 and 3), which came back
    OUT_OF_ORDER_SEQUENCE_NUMBER, were sent again under a bumped epoch and landed at
    181-186; in another run the batch of 1362-1364 was appended twice (queue-3
    offsets 175-177 and 178-180).

    ``BrokerConnection._send``: each request waiting out ``throttled_until`` sleeps
    for ``throttled_until - now`` on its own; on uvloop each timer's deadline is the
    loop's cached time plus that delay, so the request that came last gets the
    earliest deadline and they are written in reverse (traced: sequences 15, 12, 9,
    6, 3 on one connection). The broker, with no state yet for that producer on the
    partition, accepts the first one at any sequence (KIP-360), and the others fail.
    Proposed fix: requests leave a throttled connection in the order they came (one
    FIFO wait, e.g. an ``asyncio.Lock`` held across the wait and the write, or one
    timer that releases the queue).
    """
    async def main() -> tuple[list[str], list[str]]:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("t", 2, 1)
            async with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "linger.ms": 0}) as p:
                await p.send("t", b"first", partition=1)
                cluster.faults.throttle(300)
                await p.send("t", b"throttled", partition=1)  # answered: wait 300 ms
                for i in range(5):      # the producer's first records for partition 0
                    p.produce("t", str(i).encode(), partition=0)
                    await asyncio.sleep(0.01)
                await p.flush(30)
                bumps = [str(e) for e in p.events() if "OUT_OF_ORDER" in str(e)]
            cluster.faults.clear()
            got: list[str] = []
            async with Consumer({"bootstrap.servers": cluster.bootstrap_servers}) as c:
                tp = TopicPartition("t", 0)
                c.assign([tp])
                c.seek(tp, 0)
                for _ in range(50):
                    got += [r.value.decode() for r in await c.poll(200)]
                    if len(got) >= 5:
                        break
            return got, bumps

    log, bumps = run(main())
    assert log == ["0", "1", "2", "3", "4"], f"written in the order {log}"
    assert bumps == [], bumps


@pytest.mark.interop
def test_upstream_kafka_python_fetch_stays_pending_after_unknown_broker() -> None:
    """Not a kaflite bug: why kafka-python's rounds leave out kill, stop and crash.

    kafka-python 3.0.12 adds a broker to ``_nodes_with_pending_fetch_requests``
    before ``manager.send()``, which may raise ``UnknownBrokerIdError`` (the leader
    is not in the client's broker list, e.g. after a KIP-951 leader hint on Fetch
    v12). The mark is never cleared: the consumer stays alive and never fetches
    from that broker again (found by ``python -m kaflite.verify --client
    kafka-python --seconds 30 --seed 701``). Here one such error is forced. When
    this test fails, kafka-python has fixed it: give its rounds those faults back
    (``KafkaPython.known_issues``).
    """
    kafka = pytest.importorskip("kafka")
    errors_mod = pytest.importorskip("kafka.errors")
    with Cluster(brokers=1) as cluster:
        cluster.create_topic("t", 1, 1)
        producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                       enable_auto_commit=False, auto_offset_reset="earliest",
                                       fetch_max_wait_ms=100)
        try:
            tp = kafka.TopicPartition("t", 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            producer.send("t", b"before", partition=0)
            producer.flush()
            before: list[bytes] = []
            for _ in range(40):         # connected and fetching: the next connection
                before += [r.value for rs in consumer.poll(200).values() for r in rs]
                if before:              # lookup is the fetch's
                    break
            manager = consumer._fetcher._manager
            real = manager.get_connection
            raised: list[int] = []

            def unknown_once(node_id: int, *args: Any, **kwargs: Any) -> Any:
                if not raised:
                    raised.append(node_id)
                    raise errors_mod.UnknownBrokerIdError(node_id)
                return real(node_id, *args, **kwargs)

            manager.get_connection = unknown_once
            for i in range(5):
                producer.send("t", b"%d" % i, partition=0)
            producer.flush()
            got: list[bytes] = []
            for _ in range(15):         # 3 s: a working consumer needs one fetch
                with contextlib.suppress(errors_mod.UnknownBrokerIdError):
                    got += [r.value for rs in consumer.poll(200).values() for r in rs]
                if len(got) == 5:
                    break
        finally:
            consumer.close()
            producer.close()
    assert before == [b"before"] and raised == [0]
    assert got == [], "kafka-python recovered: its rounds may have kill/stop/crash back"


@contextlib.contextmanager
def _one_partition_of(ck: Any, records: int) -> Iterator[Cluster]:
    """A one-broker cluster whose topic ``t`` (one partition) holds ``records`` values,
    written by librdkafka's producer (``ck``: the confluent_kafka module)."""
    with Cluster(brokers=1, config={"group.initial.rebalance.delay.ms": 0}) as cluster:
        cluster.create_topic("t", 1, 1)
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(records):
            producer.produce("t", b"%d" % i, partition=0)
        assert producer.flush(10) == 0
        yield cluster


@pytest.mark.interop
def test_upstream_librdkafka_offset_fetch_not_coordinator_is_never_retried() -> None:
    """Not a kaflite bug: why confluent-kafka's rounds never inject NOT_COORDINATOR
    into OffsetFetch.

    librdkafka looks up an assigned partition's committed offset with OffsetFetch
    before it fetches. Answered NOT_COORDINATOR at the group level (as Kafka does
    once the coordinator has moved), it looks the coordinator up again but does not
    resend the OffsetFetch, and the partition is never fetched until the next
    rebalance: confluentinc/librdkafka#5586 (found by ``python -m kaflite.verify
    --client confluent-kafka --workload txn --seconds 60 --seed 744319918``). When
    this test fails, librdkafka has fixed it: drop ``ConfluentKafka.known_errors``.
    """
    ck = pytest.importorskip("confluent_kafka")
    with _one_partition_of(ck, 5) as cluster:
        rule = cluster.faults.inject_error("OffsetFetch", "NOT_COORDINATOR", 1, group="g")
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                "group.id": "g", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False})
        got: list[bytes] = []
        try:
            consumer.subscribe(["t"])
            for _ in range(40):         # 10 s: a working consumer needs one join and fetch
                got += [m.value() for m in consumer.consume(10, 0.25) if m.error() is None]
                if got:
                    break
            assigned = [tp.partition for tp in consumer.assignment()]
        finally:
            consumer.close()
    assert rule.remaining == 0, "the NOT_COORDINATOR answer was never sent"
    assert assigned == [0], "the consumer never joined: the test proves nothing"
    assert got == [], "librdkafka recovered: confluent-kafka's rounds may inject it again"


@pytest.mark.interop
def test_upstream_librdkafka_retries_an_async_commit_past_a_later_sync_commit() -> None:
    """Not a kaflite bug: the confluent-kafka soak's commit that went back (KIP-848,
    seed 597617956), reproduced.

    An asynchronous commit answered with a retriable error (COORDINATOR_LOAD_IN_PROGRESS,
    as a coordinator that is loading answers) is retried by librdkafka. A synchronous
    commit of a later offset made meanwhile goes out at once and succeeds; the retry
    then lands after it, and the group's committed offset goes back. Kafka's Java
    consumer never retries ``commitAsync`` (``CommitRequestManager.commitAsync``
    completes it with RetriableCommitFailedException), so its commits stay in order. No
    upstream issue found. When this test fails, librdkafka keeps commit order: drop
    ``LIBRDKAFKA_ASYNC_COMMIT_RETRY`` from ``ConfluentKafka.known_errors``.
    """
    ck = pytest.importorskip("confluent_kafka")
    with _one_partition_of(ck, 100) as cluster:
        consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                                "group.id": "g", "auto.offset.reset": "earliest",
                                "enable.auto.commit": False})
        try:
            consumer.subscribe(["t"])
            got = 0
            for _ in range(80):           # 20 s: a working consumer needs one join and fetch
                got += sum(1 for m in consumer.consume(100, 0.25) if m.error() is None)
                if got >= 100:
                    break
            assert got == 100, "the consumer never read the topic: the test proves nothing"
            rule = cluster.faults.inject_error("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS",
                                               1, group="g")
            consumer.commit(offsets=[ck.TopicPartition("t", 0, 10)], asynchronous=True)
            for _ in range(100):          # until the async commit has had its error
                if rule.remaining == 0:
                    break
                consumer.poll(0.01)
            assert rule.remaining == 0, "the async commit never met the error"
            consumer.commit(offsets=[ck.TopicPartition("t", 0, 50)], asynchronous=False)
            for _ in range(20):           # librdkafka's retry backoff is 100 ms or so
                consumer.poll(0.1)
            committed = consumer.committed([ck.TopicPartition("t", 0)], timeout=10)[0].offset
        finally:
            consumer.close()
    assert committed == 10, f"librdkafka kept commit order (committed {committed})"


@pytest.mark.parametrize("error", ["COORDINATOR_LOAD_IN_PROGRESS", "NOT_COORDINATOR"])
def test_upstream_aiokafka_offset_fetch_group_error_reads_as_no_commit(error: str) -> None:
    """Not a kaflite bug: why aiokafka's rounds never inject errors into OffsetFetch.

    aiokafka 0.14 sends OffsetFetch v3, where Kafka answers a coordinator error at
    the group level with no partitions (``OffsetFetchRequest.getErrorResponse``).
    ``_do_fetch_commit_offsets`` reads only the partitions, so it takes the answer
    for "no committed offset" and the consumer starts from ``auto_offset_reset``:
    it re-reads what its group had already committed, and its next commit is lower
    than the group's (nonmonotonic-commit, found by ``python -m kaflite.verify
    --client aiokafka --workload queue --seconds 10 --seed 1005`` in CI: queue-3
    committed 520, then 457 after a 500-record poll from offset 0). A real
    coordinator move that lands between FindCoordinator and OffsetFetch does the
    same, so the 'coordinator' fault can still, rarely, meet it. When this test
    fails, aiokafka has fixed it: drop ``AioKafka.known_errors``.
    """
    aiokafka = pytest.importorskip("aiokafka")
    tp = aiokafka.TopicPartition("t", 0)

    async def consumer(servers: str) -> Any:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=servers, group_id="g",
                                      auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        c.subscribe(["t"])
        return c

    async def first_offset(c: Any) -> int | None:
        for _ in range(40):             # 10 s: a working consumer needs one join and fetch
            got = await c.getmany(timeout_ms=250)
            if got.get(tp):
                return int(got[tp][0].offset)
        return None

    async def main() -> tuple[int | None, int | None, int | None]:
        async with Cluster(brokers=1, config={"group.initial.rebalance.delay.ms": 0}) as cluster:
            cluster.create_topic("t", 1, 1)
            async with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
                for i in range(5):
                    p.produce("t", b"%d" % i, partition=0)
                await p.flush(10)
            c = await consumer(cluster.bootstrap_servers)
            try:
                before = await first_offset(c)
                await c.commit({tp: 3})
            finally:
                await c.stop()
            rule = cluster.faults.inject_error("OffsetFetch", error, 1, group="g")
            c = await consumer(cluster.bootstrap_servers)
            try:
                after = await first_offset(c)
            finally:
                await c.stop()
            return before, after, rule.remaining

    before, after, remaining = run(main())
    assert before == 0 and remaining == 0, "the error was never sent: the test proves nothing"
    assert after == 0, f"aiokafka resumed at {after} (committed 3): its rounds may inject it"


def test_upstream_aiokafka_stop_raises_cancelled_error_while_a_fetch_backs_off() -> None:
    """Not a kaflite bug: aiokafka 0.14's ``stop()`` raises CancelledError.

    ``Fetcher.close`` cancels its pending fetch tasks and awaits each without catching
    the CancelledError (aio-libs/aiokafka#647, open; #983 names the lines). A fetch
    that is backing off from an unreachable broker is such a task, so ``stop()`` raises
    after the member left its group, before its client closed. The group soak lost
    both members of a churn round to it (aiokafka classic, soak seed 20261129, round
    seed 834643631: unseen 13185, stuck 4); the adapter now closes the client and
    fails the leave with an ordinary error, after which the workload joins again.
    When this test fails, aiokafka has fixed it.
    """
    aiokafka = pytest.importorskip("aiokafka")

    async def main() -> bool:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("t", 1, 1)
            consumer = aiokafka.AIOKafkaConsumer(
                bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=10_000,
                fetch_max_wait_ms=100, auto_offset_reset="earliest")
            await consumer.start()
            try:
                consumer.assign([aiokafka.TopicPartition("t", 0)])
                await consumer.getmany(timeout_ms=500)     # fetching from broker 0
                await cluster.kill_broker(0)
                await asyncio.sleep(1.0)                    # the next fetch fails, backs off
                try:
                    await consumer.stop()
                except asyncio.CancelledError:
                    return True
                return False
            finally:
                await consumer._client.close()

    assert run(main()), "aiokafka's stop() no longer raises CancelledError: see the adapter"


def test_the_aiokafka_adapter_turns_that_cancelled_error_into_a_failed_leave() -> None:
    from kaflite.verify.clients._base import LoopContext
    from kaflite.verify.clients._pylibs import _AioConsumer

    closed: list[bool] = []

    class Client:
        async def close(self) -> None:
            closed.append(True)

    class Stub:
        _client = Client()

        async def stop(self) -> None:
            raise asyncio.CancelledError

    adapter = _AioConsumer.__new__(_AioConsumer)
    adapter.ctx, adapter.c = LoopContext(), Stub()
    try:
        with pytest.raises(RuntimeError, match="aiokafka#647"):
            adapter.close()
    finally:
        adapter.ctx.close()
    assert closed == [True]



class _RdkafkaLog(logging.Handler):
    """librdkafka's debug log, as confluent-kafka hands it to a Python logger (on poll)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def count(self, pattern: str) -> int:
        return sum(1 for line in self.lines if re.search(pattern, line))

    def first(self, pattern: str, after: int = -1) -> int:
        """The index of the first line after ``after`` that matches; -1 for none."""
        return next((i for i, line in enumerate(self.lines)
                     if i > after and re.search(pattern, line)), -1)


@pytest.mark.interop
def test_upstream_librdkafka_resends_a_written_message_under_a_bumped_epoch() -> None:
    """Not a kaflite bug: confluentinc/librdkafka#4953 (open), the confluent-kafka soaks'
    duplicates (docs/reliability.md), reproduced step by step as the soak's debug log
    showed them.

    1. The producer's acks=all write of ``twice`` to partition 0 is appended by its
       leader (broker 0) and replicated to broker 2, but broker 1, in the ISR, does not
       fetch (a dropped-fetch rule), so the produce waits.
    2. On partition 1 a request fails (an injected NOT_ENOUGH_REPLICAS) and the one in
       flight behind it gets OUT_OF_ORDER_SEQUENCE_NUMBER from the broker. librdkafka
       ("skipped sequence numbers ... caused by previous failed request") begins a
       drain for an epoch bump of all its partitions, and waits for partition 0's
       request. To have both requests in flight without a timing, they queue on broker
       1's connection behind an acks=all write to partition 2 held the way partition
       0's is, released once both were sent.
    3. Partition 0's leadership moves to broker 2, which holds ``twice``; the waiting
       produce is answered NOT_LEADER_OR_FOLLOWER (Kafka's DelayedProduce answers the
       same), which librdkafka files under "MsgNotPersisted". The drain is done, the
       epoch bumped, and ``twice`` goes again to broker 2 as epoch 1 sequence 0, which
       the broker rightly appends: a new epoch starts at sequence 0.

    Java's producer retries with the same epoch and sequence, and broker 2 answers it as
    a duplicate. When this test fails, librdkafka no longer resends a written message
    under a new epoch: the confluent-kafka rounds' duplicates should be gone.
    """
    ck = pytest.importorskip("confluent_kafka")
    fetch = api_key_of("Fetch")
    log = _RdkafkaLog()
    logger = logging.getLogger("kaflite.tests.librdkafka-4953")
    logger.addHandler(log)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 120_000}) as cluster:
        cluster.create_topic("t", assignments=[[0, 2, 1], [1], [1, 2]])
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                "enable.idempotence": True, "acks": "all", "linger.ms": 0,
                                "request.timeout.ms": 60_000,
                                "debug": "eos,msg,protocol", "logger": logger})

        def leo(broker: int, partition: int) -> int:
            return cluster.brokers[broker].partitions[("t", partition)].log_end_offset

        def hw(broker: int, partition: int) -> int:
            return cluster.brokers[broker].partitions[("t", partition)].high_watermark

        def until(condition: Callable[[], object], polls: int = 400) -> bool:
            for _ in range(polls):      # 20 s: each step needs a request or two
                producer.poll(0.05)
                if condition():
                    return True
            return False

        def sent(partition: int, seq: int) -> bool:
            """The request with ``seq`` (alone) for ``partition`` was written to broker 1:
            its broker thread logs the request built, then sent."""
            built = log.first(rf"t \[{partition}\]: Produce MessageSet with 1 message\(s\) "
                              rf".*BaseSeq {seq},")
            return built >= 0 and log.first(r"/1: Sent ProduceRequest", built) >= 0

        try:
            for p in range(3):          # every partition has the producer's sequence 0
                producer.produce("t", b"warm-%d" % p, partition=p)
            assert producer.flush(20) == 0
            # 1. partition 0: appended on brokers 0 and 2, not acknowledged
            cut = cluster.faults.add(Rule("drop", fetch, remaining=None, broker=0,
                                          client_id="broker-1-fetcher-0",
                                          include_replicas=True))
            # a fetch already waiting at the leader when the rule came would bring the
            # write: wait for the rule to drop the next one
            assert until(lambda: cut.hits), "broker 1 still fetches from broker 0"
            producer.produce("t", b"twice", partition=0)
            assert until(lambda: leo(0, 0) == leo(2, 0) == 2), "broker 2 never fetched it"
            assert hw(0, 0) == 1, "'twice' was acknowledged: the test proves nothing"
            # 2. a held write to partition 2 queues the next requests to broker 1
            hold = cluster.faults.add(Rule("drop", fetch, remaining=None, broker=1,
                                           client_id="broker-2-fetcher-0",
                                           include_replicas=True))
            assert until(lambda: hold.hits), "broker 2 still fetches from broker 1"
            producer.produce("t", b"hold", partition=2)
            assert until(lambda: leo(1, 2) == 2 and sent(2, 1)), "the held write"
            assert hw(1, 2) == 1, "the held write was acknowledged: the test proves nothing"
            failed = cluster.faults.inject_error("Produce", "NOT_ENOUGH_REPLICAS", 1,
                                                 topic="t", partition=1)
            producer.produce("t", b"a", partition=1)
            assert until(lambda: sent(1, 1)), "partition 1's request A"
            producer.produce("t", b"b", partition=1)
            assert until(lambda: sent(1, 2)), "partition 1's request B"
            cluster.faults.remove(hold.id)
            assert until(lambda: log.count(r"t \[1\]: .*BaseSeq 2\) encountered error: "
                                           r".*out of order")), "B was not refused"
            assert failed.remaining == 0
            # librdkafka begins the bump in the call that logged B's error: wait for its
            # line, so that the leader moves only once it has begun (the bound matters
            # only once librdkafka no longer bumps here; the values below then tell)
            until(lambda: log.count(r"epoch bump for \d+ partition"), polls=100)
            # 3. the leadership moves to broker 2, which has 'twice'
            cluster.move_leader("t", 0, 2)
            cluster.faults.clear()
            assert producer.flush(30) == 0
            assert until(lambda: leo(0, 0) == leo(1, 0) == leo(2, 0)), "replicas differ"
        finally:
            producer.flush(10)
            logger.removeHandler(log)
        with SyncConsumer({"bootstrap.servers": cluster.bootstrap_servers}) as consumer:
            consumer.assign([TopicPartition("t", 0)])
            consumer.seek(TopicPartition("t", 0), 0)
            values: list[bytes] = []
            for _ in range(50):         # 10 s: one fetch reads the three records
                values += [bytes(r.value or b"") for r in consumer.poll(200)]
                if len(values) >= leo(2, 0):
                    break
        # (base offset, producer id, producer epoch, base sequence) of each batch
        batches = {b: [(batch.base_offset, batch.producer_id, batch.producer_epoch,
                        batch.base_sequence) for batch in
                       iter_batches(cluster.brokers[b].partitions[("t", 0)].log
                                    .read(0, 1 << 20).records)] for b in range(3)}
    steps = "\n".join(line for line in log.lines if re.search(
        r"skipped sequence|epoch bump|t \[0\].*(encountered error|changed PID.*Epoch:1|"
        r"Epoch:1\})", line))
    assert values == [b"warm-0", b"twice", b"twice"], \
        f"librdkafka wrote 'twice' once: #4953 fixed?\n{values}\n{steps}"
    pid = batches[2][0][1]
    assert all(b == [(0, pid, 0, 0), (1, pid, 0, 1), (2, pid, 1, 0)]
               for b in batches.values()), f"{batches}\n{steps}"


@pytest.mark.parametrize("fixed", [False, True], ids=["as-released", "with-the-suite-fix"])
def test_upstream_kafka_python_forgets_a_subscription_made_during_a_metadata_request(
        fixed: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a kaflite bug: why kaflite's run of kafka-python's own suite patches it.

    kafka-python 3.0.12's ``ClusterMetadata.set_topics`` flags a metadata update, and the
    answer to a Metadata request sent before it clears the flag again (``update_metadata``
    sets ``_need_update`` from that answer's retries alone). A consumer that subscribes
    while its bootstrap's ``topics=[]`` request is in flight learns its topic only at
    ``metadata.max.age.ms`` (300 s), and reads nothing. CI met it on kaflite-3
    (``test_consumer_integration::test_kafka_consumer``), and it came back 1 in 15 runs
    of that module on a busy machine, where the consumer's log showed the subscription
    1 ms before the empty answer and then "Sleeping 299.99 for next Metadata refresh".
    Here the bootstrap's Metadata is held 1.5 s, so the subscription always lands
    during it. The Java client fixed the same race in KAFKA-7831; the suite's plugin
    (``tests/interop/kafka_python/plugin.py``) does as it does. When the as-released case
    fails, kafka-python has fixed it: drop the plugin's fix.
    """
    kafka = pytest.importorskip("kafka")
    from kafka.cluster import ClusterMetadata

    from tests.interop.kafka_python.plugin import metadata_tracking

    if fixed:
        for name, method in metadata_tracking(ClusterMetadata).items():
            monkeypatch.setattr(ClusterMetadata, name, method)
    with Cluster(brokers=1) as cluster:
        cluster.create_topic("t", 1, 1)
        producer = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers)
        for i in range(3):
            producer.send("t", b"%d" % i, partition=0)
        producer.flush()
        held = cluster.faults.add(Rule("delay", api_key_of("Metadata"), delay_ms=1500,
                                       client_id="kpy-race"))
        consumer = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                       client_id="kpy-race", auto_offset_reset="earliest",
                                       enable_auto_commit=False, fetch_max_wait_ms=100,
                                       # as the suite gives it: no version probe, so the
                                       # constructor does not wait for the bootstrap
                                       api_version=(4, 3))
        try:
            for _ in range(100):            # the bootstrap's Metadata reached the broker
                if held.hits:
                    break
                time.sleep(0.05)
            assert held.hits == 1
            consumer.subscribe(["t"])
            got: list[bytes] = []
            for _ in range(30):             # 6 s: the held answer comes after 1.5 s
                got += [r.value for rs in consumer.poll(200).values() for r in rs]
                if len(got) == 3:
                    break
        finally:
            consumer.close()
            producer.close()
    if fixed:
        assert sorted(got) == [b"0", b"1", b"2"]
    else:
        assert got == [], "kafka-python learns a topic subscribed during a Metadata " \
            "request now: the suite's plugin need not fix it"
