"""Consumer groups of real clients against a 3-broker cluster.

For each of confluent-kafka (cooperative-sticky, KIP-429), kafka-python and
aiokafka: members of one group consume a 12-partition topic, joining and
leaving one by one; after every rebalance each partition is owned by exactly
one member. The group's coordinator is then moved (the leadership of its
``__consumer_offsets`` partition) and the committed offsets must be there on
the new coordinator. Finally the whole cluster restarts from its data
directory and a new consumer of the group reads exactly what was not
committed: no loss, and no duplicates beyond the uncommitted tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kaflite.cluster import Cluster
from kaflite.protocol import errors
from kaflite.protocol.hashing import coordinator_partition
from tests.conftest import wait_for

pytestmark = pytest.mark.interop

PARTITIONS = 12
PER_PARTITION = 10  # records per partition per batch
TAIL = 3  # records per partition left uncommitted before the restart
OFFSETS_PARTITIONS = 10
CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": OFFSETS_PARTITIONS,
          "replica.lag.time.max.ms": 10000}
FAST = {"session_ms": 6000, "heartbeat_ms": 500}
TP = tuple[int, int]  # (partition, offset)


def produce(bootstrap: str, topic: str, per_partition: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for p in range(PARTITIONS):
        for i in range(per_partition):
            producer.produce(topic, f"{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets, as an independent client (librdkafka) reads them."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                tps = checker.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
                return {tp.partition: tp.offset for tp in tps}
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        checker.close()


def high_watermarks(cluster: Cluster, topic: str) -> dict[int, int]:
    parts = cluster.controller.topics[topic].partitions
    return {p: cluster.broker(parts[p].leader).partitions[(topic, p)].high_watermark
            for p in range(PARTITIONS)}


def group_state(bootstrap: str, group: str) -> str:
    from kaflite.client.sync import Admin

    with Admin(bootstrap_servers=bootstrap) as admin:
        return admin.describe_groups([group])[group].state


async def _async(fn: Callable[[], object]) -> object:
    return fn()


# -- members: one consumer each, in its own thread ------------------------------------------------
class Member(threading.Thread):
    """Consumes, records every (partition, offset) read, commits after each poll.

    A commit can fail in a rebalance (ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS);
    with the cooperative protocol the member usually keeps its partitions, so
    it commits again on its next poll until a commit goes through, as an
    application committing what it has processed does.
    """

    started: list[Member] = []   # every member of the running test, stopped at its end

    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        self.seen: list[TP] = []
        self.assignment: frozenset[int] = frozenset()
        self.error: BaseException | None = None
        self.uncommitted = False
        Member.started.append(self)

    def run(self) -> None:
        try:
            self.consume()
        except BaseException as exc:  # surfaced by stop()
            self.error = exc

    def consume(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


class ConfluentMember(Member):
    def __init__(self, name: str, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name)
        self.conf = {"bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "partition.assignment.strategy": "cooperative-sticky",
                     "session.timeout.ms": FAST["session_ms"],
                     "heartbeat.interval.ms": FAST["heartbeat_ms"]}
        self.topic = topic

    def consume(self) -> None:
        from confluent_kafka import Consumer, KafkaError, KafkaException

        c = Consumer(self.conf)
        c.subscribe([self.topic])
        try:
            while not self.stopping.is_set():
                msgs = c.consume(100, 0.1)
                self.seen += [(m.partition(), m.offset()) for m in msgs if m.error() is None]
                self.uncommitted |= bool(msgs)
                if self.uncommitted:
                    try:
                        c.commit(asynchronous=False)
                        self.uncommitted = False
                    except KafkaException as exc:
                        # nothing consumed since the last commit (after a rebalance
                        # that took the partitions away): nothing left to commit
                        if exc.args[0].code() == KafkaError._NO_OFFSET:
                            self.uncommitted = False
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            c.close()


class KafkaPythonMember(Member):
    def __init__(self, name: str, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name)
        self.kw = {"bootstrap_servers": bootstrap, "group_id": group, "client_id": name,
                   "enable_auto_commit": False, "auto_offset_reset": "earliest",
                   "session_timeout_ms": FAST["session_ms"],
                   "heartbeat_interval_ms": FAST["heartbeat_ms"]}
        self.topic = topic

    def consume(self) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import CommitFailedError, KafkaError

        c = KafkaConsumer(self.topic, **self.kw)
        # kafka-python 3.0 joins without waiting for the topic's metadata; if it
        # assigns before the metadata arrives it joins again, and when that second
        # join outlasts a poll() it never applies the assignment (its join loop
        # checks need_rejoin() before collecting the finished join). Like an
        # application that looks the topic up first, wait for the metadata.
        deadline = time.monotonic() + 20
        while not c.partitions_for_topic(self.topic) and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            while not self.stopping.is_set():
                batches = c.poll(timeout_ms=100)
                for tp, records in batches.items():
                    self.seen += [(tp.partition, r.offset) for r in records]
                self.uncommitted |= bool(batches)
                if self.uncommitted:
                    with contextlib.suppress(CommitFailedError, KafkaError):
                        c.commit()
                        self.uncommitted = False
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            c.close()


class AioKafkaMember(Member):
    def __init__(self, name: str, bootstrap: str, group: str, topic: str) -> None:
        super().__init__(name)
        self.kw = {"bootstrap_servers": bootstrap, "group_id": group, "client_id": name,
                   "enable_auto_commit": False, "auto_offset_reset": "earliest",
                   "session_timeout_ms": FAST["session_ms"],
                   "heartbeat_interval_ms": FAST["heartbeat_ms"]}
        self.topic = topic

    def consume(self) -> None:
        asyncio.run(self._consume())

    async def _consume(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import CommitFailedError, KafkaError

        c = AIOKafkaConsumer(self.topic, **self.kw)
        await c.start()
        try:
            while not self.stopping.is_set():
                batches = await c.getmany(timeout_ms=100)
                for tp, records in batches.items():
                    self.seen += [(tp.partition, r.offset) for r in records]
                self.uncommitted |= bool(batches)
                if self.uncommitted:
                    with contextlib.suppress(CommitFailedError, KafkaError):
                        await c.commit()
                        self.uncommitted = False
                self.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            await c.stop()


@pytest.fixture(autouse=True)
def stop_members() -> Iterator[None]:
    """A test that fails half-way still stops its members (and their clients)."""
    Member.started.clear()
    yield
    for m in Member.started:
        m.stopping.set()
    for m in Member.started:
        m.join(30)
    Member.started.clear()


# -- simple (non-member) commits and a fresh reader, per client ---------------------------------------
def confluent_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def kafka_python_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        c.assign([TopicPartition(topic, p) for p in offsets])
        c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1)
                  for p, o in offsets.items()})
    finally:
        c.close()


def aiokafka_commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def main() -> None:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)
        await c.start()
        try:
            c.assign([TopicPartition(topic, p) for p in offsets])
            await c.commit({TopicPartition(topic, p): o for p, o in offsets.items()})
        finally:
            await c.stop()

    asyncio.run(main())


KITS: dict[str, tuple[type[Member], Callable[[str, str, str, dict[int, int]], None]]] = {
    "confluent": (ConfluentMember, confluent_commit),
    "kafka-python": (KafkaPythonMember, kafka_python_commit),
    "aiokafka": (AioKafkaMember, aiokafka_commit),
}


def exact_cover(members: list[Member]) -> bool:
    """Every partition has exactly one owner, and every member (so every join) has some."""
    owned = [m.assignment for m in members]
    return all(owned) and sum(len(a) for a in owned) == PARTITIONS and \
        frozenset().union(*owned) == frozenset(range(PARTITIONS))


def check_cover(members: list[Member], what: str) -> None:
    wait_for(lambda: exact_cover(members),
             f"every partition owned by exactly one member ({what})", 40)


def seen_all(members: list[Member], upto: int) -> bool:
    seen = {tp for m in members for tp in m.seen}
    return all((p, o) in seen for p in range(PARTITIONS) for o in range(upto))


@pytest.mark.parametrize("client", list(KITS))
def test_consumer_group_rebalances_coordinator_move_and_restart(client: str,
                                                                tmp_path: Path) -> None:
    member_cls, simple_commit = KITS[client]
    data = tmp_path / "data"
    group, topic = f"group-{client}", f"orders-{client}"
    with Cluster(brokers=3, data_dir=data, config=CONFIG) as c:
        c.create_topic(topic, PARTITIONS, 3)
        bootstrap = c.bootstrap_servers
        produce(bootstrap, topic, PER_PARTITION)

        def member(n: int) -> Member:
            m: Member = member_cls(f"{client}-m{n}", bootstrap, group, topic)
            m.start()
            return m

        # Members join one by one; the group settles after each rebalance.
        live = [member(1)]
        check_cover(live, "1 member")
        live.append(member(2))
        check_cover(live, "2 members")
        live.append(member(3))
        check_cover(live, "3 members")
        everyone = list(live)
        wait_for(lambda: seen_all(everyone, PER_PARTITION), "the first batch consumed", 40)
        wait_for(lambda: committed(bootstrap, group, topic) == dict.fromkeys(
                     range(PARTITIONS), PER_PARTITION), "the first batch committed", 40,
                 state=lambda: f"committed {committed(bootstrap, group, topic)}, assignments "
                               f"{[sorted(m.assignment) for m in live]}")
        # One leaves, another joins.
        leaving = live.pop(1)
        leaving.stop()
        check_cover(live, "after a member left")
        live.append(member(4))
        everyone.append(live[-1])
        check_cover(live, "after a member joined")

        # Move the coordinator: the new one loads the offsets from the log.
        index = coordinator_partition(group, OFFSETS_PARTITIONS)
        old = c.controller.topics["__consumer_offsets"].partitions[index].leader
        new = c.move_leader("__consumer_offsets", index)
        assert new != old
        groups = c.brokers[old].groups
        assert groups is not None
        shard_of = groups.shard_for
        with pytest.raises(errors.NotCoordinatorError):
            c.call(_async(lambda: shard_of(group)))
        assert committed(bootstrap, group, topic) == dict.fromkeys(range(PARTITIONS),
                                                                   PER_PARTITION)
        produce(bootstrap, topic, PER_PARTITION)
        wait_for(lambda: seen_all(everyone, 2 * PER_PARTITION), "the second batch consumed",
                 40)
        wait_for(lambda: committed(bootstrap, group, topic) == dict.fromkeys(
                     range(PARTITIONS), 2 * PER_PARTITION),
                 "the second batch committed on the new coordinator", 40)
        check_cover(live, "after the coordinator moved")
        for m in live:
            m.stop()
        # A member whose LeaveGroup went to the old coordinator (its close raced the
        # move) stays until its session times out, as in Kafka.
        wait_for(lambda: group_state(bootstrap, group) == "Empty", "the group to be empty",
                 timeout=FAST["session_ms"] / 1000 + 30)
        # Leave an uncommitted tail: commit as a simple consumer (generation -1),
        # which the now empty group accepts.
        tail_start = dict.fromkeys(range(PARTITIONS), 2 * PER_PARTITION - TAIL)
        simple_commit(bootstrap, group, topic, tail_start)
        assert committed(bootstrap, group, topic) == tail_start
        produce(bootstrap, topic, PER_PARTITION)  # written but never read before the restart

    # A full restart from disk: a new consumer resumes from the committed offsets.
    with Cluster(brokers=3, data_dir=data, config=CONFIG) as c:
        bootstrap = c.bootstrap_servers
        assert committed(bootstrap, group, topic) == tail_start
        reader = member_cls(f"{client}-after-restart", bootstrap, group, topic)
        reader.start()
        expected = {(p, o) for p in range(PARTITIONS)
                    for o in range(tail_start[p], 3 * PER_PARTITION)}
        wait_for(lambda: set(reader.seen) >= expected,
                 "the uncommitted tail read after the restart", 40,
                 state=lambda: f"assignment {sorted(reader.assignment)}, read "
                               f"{len(set(reader.seen))} of {len(expected)}")
        # Nothing lies beyond what was read: the log ends there, and the reader has
        # committed that end, so it can deliver nothing more (no duplicate to come).
        end = dict.fromkeys(range(PARTITIONS), 3 * PER_PARTITION)
        assert high_watermarks(c, topic) == end
        wait_for(lambda: committed(bootstrap, group, topic) == end,
                 "the reader to commit the log end", 40)
        reader.stop()
        assert sorted(reader.seen) == sorted(expected)  # no loss, no duplicates

