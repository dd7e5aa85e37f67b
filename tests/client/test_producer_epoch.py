"""The idempotent producer's epoch bump (KIP-360) must not duplicate records.

A bump is asked for by one partition (OUT_OF_ORDER_SEQUENCE_NUMBER or
UNKNOWN_PRODUCER_ID). A batch of another partition whose answer was lost (a
request timeout, a failed leader) may already be in the log: it has to be
retried under the epoch and sequence it was sent with, so the broker answers
DUPLICATE_SEQUENCE_NUMBER instead of appending it again.
"""

from __future__ import annotations

import asyncio
import collections
import time
import uuid

from kaflite.client import Consumer, Producer, RecordMetadata, TopicPartition
from kaflite.client.producer._accumulator import DeliveryCallback, ProducerBatch
from kaflite.client.producer._idempotence import IdempotenceState
from kaflite.cluster import Cluster


def batch(partition: int, n: int = 2) -> ProducerBatch:
    b = ProducerBatch("t", partition, 0.0)
    b.values = [b"x"] * n
    return b


def send(idem: IdempotenceState, b: ProducerBatch) -> tuple[int, int, int]:
    """Assign as the sender does and record the result on the batch (as encode does)."""
    pid, epoch, seq = idem.assign(b)
    b.producer_id, b.producer_epoch, b.base_sequence = pid, epoch, seq
    return pid, epoch, seq


def test_a_bump_resequences_only_the_partition_that_asked_for_it() -> None:
    idem = IdempotenceState(enabled=True)
    idem.set_producer_id(7, 0)
    p0, p1 = batch(0), batch(1)
    assert send(idem, p0) == (7, 0, 0)
    assert send(idem, p1) == (7, 0, 0)
    p1b = batch(1)
    assert send(idem, p1b) == (7, 0, 2)
    # p0's answer is lost (unknown outcome), p1 gets OUT_OF_ORDER: bump for p1
    idem.done(p0, False)
    idem.done(p1, False)
    idem.done(p1b, False)
    idem.request_bump(("t", 1))
    idem.set_producer_id(7, 1)
    # p0's batch keeps its epoch and sequence: the broker may already have it
    assert send(idem, p0) == (7, 0, 0)
    # p1 restarts from 0 under the new epoch, its batches in their old order
    assert send(idem, p1) == (7, 1, 0)
    assert send(idem, p1b) == (7, 1, 2)


def test_a_new_batch_waits_until_the_old_epochs_batches_are_settled() -> None:
    idem = IdempotenceState(enabled=True)
    idem.set_producer_id(7, 0)
    old = batch(0)
    send(idem, old)
    idem.request_bump(("t", 1))
    idem.set_producer_id(7, 1)
    # p0 still has a batch of epoch 0 in flight: nothing new may start epoch 1 there
    assert ("t", 0) in idem.muted()
    idem.done(old, True)
    assert ("t", 0) not in idem.muted()
    # the partition moves to the new epoch from sequence 0
    assert send(idem, batch(0)) == (7, 1, 0)
    assert send(idem, batch(0, 3)) == (7, 1, 2)


def test_a_retry_under_the_old_epoch_is_not_resequenced_by_a_later_bump_of_another() -> None:
    idem = IdempotenceState(enabled=True)
    idem.set_producer_id(7, 0)
    first, second = batch(0), batch(0)
    send(idem, first)
    send(idem, second)
    idem.done(first, False)
    idem.done(second, False)
    for epoch in (1, 2):   # two bumps asked by other partitions
        idem.request_bump(("t", epoch))
        idem.set_producer_id(7, epoch)
    assert send(idem, first) == (7, 0, 0)
    assert send(idem, second) == (7, 0, 2)
    # a new id (the old one could not be bumped): still the same batches to the broker
    idem.request_bump(("t", 5))
    idem.set_producer_id(8, 0)
    idem.done(first, False)
    idem.done(second, False)
    assert send(idem, first) == (7, 0, 0)


def test_lost_answer_and_out_of_order_elsewhere_write_each_record_once() -> None:
    """p0's Produce is appended but its answer comes too late (request timeout);
    meanwhile p1 gets OUT_OF_ORDER_SEQUENCE_NUMBER and the epoch is bumped before
    p0 is retried. p0's retry must be recognised as a duplicate."""
    topic = f"epoch-{uuid.uuid4().hex[:8]}"
    client = f"c-{uuid.uuid4().hex[:6]}"
    with Cluster(brokers=2) as cluster:
        cluster.create_topic(topic, partitions=2, replication_factor=2)
        leader0 = cluster.controller.topics[topic].partitions[0].leader
        if cluster.controller.topics[topic].partitions[1].leader == leader0:
            cluster.faults.move_leader(topic, 1)
        assert cluster.controller.topics[topic].partitions[1].leader != leader0

        async def main() -> list[str]:
            async with Producer(bootstrap_servers=cluster.bootstrap_servers, client_id=client,
                                linger_ms=0, request_timeout_ms=400, retry_backoff_ms=20,
                                delivery_timeout_ms=30000) as p:
                await p.send(topic, b"warm-0", partition=0)
                await p.send(topic, b"warm-1", partition=1)
                slow = cluster.faults.delay("Produce", 1500, count=1, broker=leader0,
                                            client_id=client)
                ooo = cluster.faults.inject_error("Produce", "OUT_OF_ORDER_SEQUENCE_NUMBER",
                                                  count=1, topic=topic, partition=1,
                                                  client_id=client)
                lost = p.send(topic, b"lost-answer", partition=0)
                await asyncio.sleep(0.05)   # p0's request is out before p1's
                bumped = p.send(topic, b"bumped", partition=1)
                await asyncio.gather(lost, bumped)
                assert slow.hits == 1 and ooo.hits == 1
                return [str(e) for e in p.events()]

        events = asyncio.run(asyncio.wait_for(main(), 60))
        assert any("bump producer epoch" in e for e in events), events

        async def read() -> list[tuple[int, bytes]]:
            async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                                auto_offset_reset="earliest") as c:
                c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
                got: list[tuple[int, bytes]] = []
                deadline = time.monotonic() + 20
                while len(got) < 4 and time.monotonic() < deadline:
                    got += [(r.partition, r.value) for r in await c.poll(timeout_ms=300)]
                got += [(r.partition, r.value) for r in await c.poll(timeout_ms=300)]
                return got

        got = asyncio.run(asyncio.wait_for(read(), 60))
    counts = collections.Counter(got)
    assert counts == {(0, b"warm-0"): 1, (0, b"lost-answer"): 1,
                      (1, b"warm-1"): 1, (1, b"bumped"): 1}, counts


def test_overtaken_knows_a_later_acknowledged_batch_of_the_same_epoch() -> None:
    idem = IdempotenceState(True, producer_id=7, producer_epoch=0)
    first, second, other = batch(0, 3), batch(0, 2), batch(1, 2)
    for b in (first, second, other):
        send(idem, b)
    assert not idem.overtaken(first)
    idem.acknowledged(second)
    assert idem.overtaken(first)
    assert not idem.overtaken(other)        # another partition
    idem.set_producer_id(7, 1)              # a batch of another epoch is not compared
    later = batch(0, 1)
    later.producer_id, later.producer_epoch, later.base_sequence = 7, 1, 0
    assert not idem.overtaken(later)
    # sequences wrap at 2**31: 2**31 - 2 comes before 1
    old, new = batch(0, 2), batch(0, 2)
    old.producer_id = new.producer_id = 7
    old.producer_epoch = new.producer_epoch = 2
    old.base_sequence, new.base_sequence = 0x7FFFFFFE, 0
    idem.acknowledged(new)
    assert idem.overtaken(old)
    idem.acknowledged(old)                  # older: the newest acknowledged stays
    assert idem.acked[("t", 0)] == (7, 2, 1)


def sent_in_turn(answers: list[tuple[tuple[str | None, int, int], ...]],
                 config: dict[str, object], flush_s: float = 30
                 ) -> tuple[dict[str, tuple[str | None, int]], list[bytes]]:
    """Batches A, B, ... of one partition, each sent while the ones before it are in
    flight. Before batch i is sent, the rules answers[i] are added: (injected error or
    None, ms the answers are held, for how many Produce requests). Each record's
    (error type, offset), and the log."""
    names = [chr(ord("A") + i) for i in range(len(answers))]

    async def main() -> tuple[dict[str, tuple[str | None, int]], list[bytes]]:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("t", 1, 1)
            acks: dict[str, tuple[str | None, int]] = {}

            def report(name: str) -> DeliveryCallback:
                def done(err: BaseException | None, md: RecordMetadata | None) -> None:
                    acks[name] = (type(err).__name__ if err else None,
                                  md.offset if md else -1)
                return done

            async with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "linger.ms": 0, "acks": "all", "enable.idempotence": True,
                                 **config}) as p:
                await p.metadata.ensure_topic("t", 10)
                for name, rules in zip(names, answers, strict=True):
                    for error, held_ms, count in rules:
                        if error is not None:
                            cluster.faults.inject_error("Produce", error, count, topic="t")
                        if held_ms:
                            cluster.faults.delay("Produce", held_ms, count=count)
                    p.produce("t", name.encode(), partition=0, on_delivery=report(name))
                    await asyncio.sleep(0.05)             # out before the next is sent
                await p.flush(flush_s)
            async with Consumer({"bootstrap.servers": cluster.bootstrap_servers}) as c:
                tp = TopicPartition("t", 0)
                c.assign([tp])
                c.seek(tp, 0)
                log: list[bytes] = []
                for _ in range(10):
                    log += [bytes(r.value or b"") for r in await c.poll(300)]
            return acks, log

    return asyncio.run(asyncio.wait_for(main(), 60))


def a_then_b(config: dict[str, object], b_answer_delay_ms: int = 0, flush_s: float = 30
             ) -> tuple[dict[str, tuple[str | None, int]], list[bytes]]:
    """A is sent and gets NOT_LEADER_OR_FOLLOWER 200 ms late; B is sent meanwhile (its
    answer held ``b_answer_delay_ms``). Each record's (error type, offset), and the log."""
    return sent_in_turn([(("NOT_LEADER_OR_FOLLOWER", 200, 1),),
                         ((None, b_answer_delay_ms, 1),)], config, flush_s)


def test_a_batch_overtaken_by_a_later_one_fails_rather_than_landing_after_it() -> None:
    """The first of two batches in flight gets NOT_LEADER_OR_FOLLOWER, the second is
    written: the broker had no state for the producer on that partition, so it took
    the second at any sequence (KIP-360, as Kafka does). The first, retried, comes
    back OUT_OF_ORDER_SEQUENCE_NUMBER. Resent under a bumped epoch (what kaflite did)
    it was written after the second and acknowledged at a higher offset: its
    acknowledgements were out of send order (the verify round's nonmonotonic-send).
    It must fail instead, and the log hold the records in send order."""
    acks, log = a_then_b({})
    assert acks["B"] == (None, 0)
    assert acks["A"] == ("OutOfOrderSequenceNumberError", -1), acks
    assert log == [b"B"]


def test_a_batch_refused_for_a_later_one_whose_answer_was_lost_does_not_hold_its_partition(
        ) -> None:
    """A gets NOT_LEADER_OR_FOLLOWER (late); B, sent meanwhile, is written, but its
    answer never comes (the client's request times out and drops the connection). The
    broker then holds B, so A's retry is refused OUT_OF_ORDER_SEQUENCE_NUMBER, every
    time. kaflite retried A at the head of the partition's queue with B behind it until
    delivery.timeout.ms (the sync producer test's 120 s flushes, seen in CI): B must
    go first, come back DUPLICATE_SEQUENCE_NUMBER with its offset, and A then fail as
    overtaken; no record waits for the delivery timeout."""
    acks, log = a_then_b({"request.timeout.ms": 400, "retry.backoff.ms": 20,
                          "delivery.timeout.ms": 60000}, b_answer_delay_ms=1500, flush_s=20)
    assert set(acks) == {"A", "B"}, f"not delivered after a 20 s flush: {acks}"
    assert acks["B"] == (None, 0)
    assert acks["A"] == ("OutOfOrderSequenceNumberError", -1), acks
    assert log == [b"B"]


def test_two_batches_refused_for_a_later_one_whose_answer_was_lost_do_not_hold_it(
        ) -> None:
    """A gets NOT_LEADER_OR_FOLLOWER; B gets it too; C, sent behind B, is written but
    its answer is lost (the broker answers a connection's requests in turn: B's answer
    and C's are each held 1.5 s, and C's comes after the client's 2.4 s request
    timeout). Retried, A is refused OUT_OF_ORDER_SEQUENCE_NUMBER and waits behind the
    later batches sent; B, refused too, backed off in front of A as the lower
    sequence it had to wait for, and A waited behind B: the two took turns at the head
    of the queue until delivery.timeout.ms (the sync producer's fault test, 16 records
    timed out, seen in make test). C must go first (DUPLICATE_SEQUENCE_NUMBER, with its
    offset), then A and B fail as overtaken."""
    acks, log = sent_in_turn(
        [(("NOT_LEADER_OR_FOLLOWER", 300, 1),),
         (("NOT_LEADER_OR_FOLLOWER", 0, 1), (None, 1500, 2)),
         ()],
        {"request.timeout.ms": 2400, "retry.backoff.ms": 20, "delivery.timeout.ms": 60000},
        flush_s=20)
    assert set(acks) == {"A", "B", "C"}, f"not delivered after a 20 s flush: {acks}"
    assert acks["C"] == (None, 0)
    assert acks["A"] == acks["B"] == ("OutOfOrderSequenceNumberError", -1), acks
    assert log == [b"C"]
