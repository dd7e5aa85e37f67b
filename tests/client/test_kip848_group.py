"""kaflite's consumer with ``group.protocol=consumer`` (KIP-848) against the kaflite cluster.

Three members on a 12-partition topic join, leave and crash (a crashed member
stops heartbeating without leaving; the coordinator fences it when its session
expires). After each change the test waits until every partition has exactly
one owner, and checks at every step meanwhile that no partition is ever owned
by two members at once (the coordinator hands a partition over only after its
old owner revoked it). It also checks what goes on the wire: the heartbeat
interval is the coordinator's, later heartbeats leave out what did not change,
commits carry the member epoch, and commits survive a coordinator move.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer, RebalanceListener, TopicPartition
from kaflite.client.consumer._membership import ConsumerMembership, MemberState
from kaflite.cluster import Cluster
from kaflite.config import ConfigError
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest
from tests.client._kip848 import member_opts, membership, spy_on
from tests.client._recovery_helpers import run, uid

PARTITIONS = 12
KIP848_CONFIG = {
    "replica.lag.time.max.ms": 10000,
    "offsets.topic.num.partitions": 6,
    "group.consumer.heartbeat.interval.ms": 150,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 2000,
    "group.consumer.min.session.timeout.ms": 1000,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=KIP848_CONFIG) as c:
        yield c


class Member:
    """A kaflite consumer polled on its own task; records what it consumed."""

    def __init__(self, consumer: Consumer, topic: str) -> None:
        self.consumer = consumer
        self.topic = topic
        self.records: list[tuple[int, int]] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self, listener: RebalanceListener | None = None) -> None:
        await self.consumer.start()
        self.consumer.subscribe([self.topic], listener=listener)
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            for r in await self.consumer.poll(timeout_ms=50):
                self.records.append((r.partition, r.offset))

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    async def stop_polling(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def crash(self) -> None:
        """Stop as a killed process stops: no more heartbeats, no leave."""
        await self.stop_polling()
        group = membership(self.consumer)
        tasks = [t for t in (group._hb_task, group._reconciler) if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        group.state = MemberState.UNSUBSCRIBED   # close() then sends no leave
        await self.consumer.close()

    async def close(self) -> None:
        await self.stop_polling()
        await self.consumer.close()


async def settle(members: list[Member], what: str, timeout: float = 25) -> None:
    """Wait until the members own every partition exactly once; at every step meanwhile,
    no partition may have two owners."""
    deadline = time.monotonic() + timeout
    stable_since: float | None = None
    while True:
        owned = [m.owned() for m in members]
        total = sum(len(o) for o in owned)
        union = set().union(*owned) if owned else set()
        assert total == len(union), f"{what}: a partition has two owners: {owned}"
        if union == set(range(PARTITIONS)) and all(
                membership(m.consumer).state is MemberState.STABLE for m in members):
            stable_since = stable_since or time.monotonic()
            if time.monotonic() - stable_since > 0.5:   # and it stays so
                return
        else:
            stable_since = None
        assert time.monotonic() < deadline, f"{what}: not settled: {owned}"
        await asyncio.sleep(0.02)


def test_config_lifts_the_refusal_and_keeps_javas_rules() -> None:
    base = {"bootstrap.servers": "localhost:9092", "group.id": "g"}
    c = Consumer({**base, "group.protocol": "consumer", "group.remote.assignor": "range"})
    assert isinstance(c._group, ConsumerMembership)
    assert c._group.server_assignor == "range"
    assert Consumer(base).config["group.protocol"] == "classic"   # librdkafka's default
    with pytest.raises(ConfigError, match=r"session\.timeout\.ms cannot be set"):
        Consumer({**base, "group.protocol": "consumer", "session.timeout.ms": 10000})
    with pytest.raises(ConfigError, match=r"group\.remote\.assignor cannot be set"):
        Consumer({**base, "group.remote.assignor": "uniform"})
    # librdkafka (2.16) refuses the three on group.protocol=consumer too.
    ck = pytest.importorskip("confluent_kafka")
    for name, value in (("session.timeout.ms", 10000), ("heartbeat.interval.ms", 1000),
                        ("partition.assignment.strategy", "range")):
        with pytest.raises(ck.KafkaException, match=f"`{name}` is not supported"):
            ck.Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g",
                         "group.protocol": "consumer", name: value})


def test_three_members_join_leave_and_crash(cluster: Cluster) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1) as p:
            for i in range(240):
                p.produce(topic, f"v{i}".encode(), partition=i % PARTITIONS)
            await p.flush()
        members = [Member(Consumer(**member_opts(cluster, group, client_id=f"m{i}")), topic)
                   for i in range(3)]
        try:
            await members[0].start()
            await settle(members[:1], "one member")
            await members[1].start()
            await settle(members[:2], "second member joined")
            await members[2].start()
            await settle(members, "third member joined")
            assert all(len(m.owned()) == 4 for m in members)     # uniform: 4 each
            epochs = [membership(m.consumer).member_epoch for m in members]
            assert min(epochs) > 0
            # A member leaves (epoch -1 on close): the others take its partitions.
            await members[1].close()
            assert any("left group" in str(e) and "member epoch -1" in str(e)
                       for e in members[1].consumer.events())
            await settle([members[0], members[2]], "a member left")
            # Another joins, then one crashes: its partitions move only once its
            # session has expired on the coordinator.
            members[1] = Member(Consumer(**member_opts(cluster, group, client_id="m1b")),
                                topic)
            await members[1].start()
            await settle(members, "a member joined again")
            crashed = members.pop(0)
            await crashed.crash()
            await settle(members, "a member crashed")
            # Every record was handed out, at least once, across the members.
            seen = {r for m in [*members, crashed] for r in m.records}
            assert len(seen) == 240
        finally:
            for m in members:
                await m.close()

    run(main())


def test_heartbeats_follow_the_server_interval_and_send_only_changes(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    sent: list[ConsumerGroupHeartbeatRequest] = []

    async def main() -> None:
        c = Consumer(**member_opts(cluster, group))
        async with c:
            group_member = membership(c)
            spy_on(group_member, sent, monkeypatch)
            c.subscribe([topic])
            deadline = time.monotonic() + 20
            while len(c.assignment()) < 3 or group_member.state is not MemberState.STABLE:
                assert time.monotonic() < deadline
                await c.poll(timeout_ms=50)
            assert group_member.heartbeat_interval == 0.15   # the coordinator's 150 ms
            mark = len(sent)
            for _ in range(20):
                await c.poll(timeout_ms=50)
            later = sent[mark:]
        first = sent[0]
        # The join is a full request: epoch 0, the subscription, no partitions yet.
        assert first.member_epoch == 0 and first.subscribed_topic_names == [topic]
        assert first.rebalance_timeout_ms > 0 and first.topic_partitions == []
        assert first.member_id     # KIP-1082: the client's own member id
        # The acknowledgement names the owned partitions (by topic id) once.
        acks = [r for r in sent if r.topic_partitions]
        assert acks and sorted(acks[0].topic_partitions[0].partitions) == [0, 1, 2]
        # Steady heartbeats: only group, member, epoch; nothing that did not change.
        assert len(later) >= 3
        for r in later:
            assert r.member_epoch > 0 and r.member_id == first.member_id
            assert r.subscribed_topic_names is None and r.topic_partitions is None
            assert r.rebalance_timeout_ms == -1 and r.subscribed_topic_regex is None

    run(main())


def test_commits_carry_the_member_epoch_and_survive_a_coordinator_move(cluster: Cluster) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1) as p:
            for i in range(100):
                p.produce(topic, f"v{i}".encode(), partition=i % 2)
            await p.flush()
        async with Consumer(**member_opts(cluster, group, enable_auto_commit=False)) as c:
            c.subscribe([topic])
            got = 0
            deadline = time.monotonic() + 20
            while got < 100:
                assert time.monotonic() < deadline
                got += len(await c.poll(timeout_ms=100))
            await c.commit()
            before = membership(c).coordinator
            moved = await asyncio.to_thread(cluster.faults.move_coordinator, group)
            assert moved != before
            # The committed offsets are read back from the new coordinator (it loaded them
            # from __consumer_offsets), and the member keeps committing there.
            for p_ in range(2):
                assert await c.committed(TopicPartition(topic, p_)) == 50
            c.seek(TopicPartition(topic, 0), 10)
            await c.commit()
            assert membership(c).coordinator == moved
            assert await c.committed(TopicPartition(topic, 0)) == 10
            assert any("coordinator moved" in str(e) for e in c.events())
        # A fresh member of the group starts from the committed offsets.
        async with Consumer(**member_opts(cluster, group)) as c2:
            c2.subscribe([topic])
            records: list[Any] = []
            deadline = time.monotonic() + 20
            while len(records) < 40:
                assert time.monotonic() < deadline
                records += list(await c2.poll(timeout_ms=100))
            assert min(r.offset for r in records if r.partition == 0) == 10
            assert not [r for r in records if r.partition == 1]

    run(main())


def test_commits_survive_a_full_cluster_restart(cluster: Cluster) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def produce(values: list[bytes]) -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1) as p:
            for i, v in enumerate(values):
                p.produce(topic, v, partition=i % 2)
            await p.flush()

    async def read(n: int) -> list[tuple[int, int]]:
        """What a member of the group reads, until ``n`` records (and then a bit more)."""
        async with Consumer(**member_opts(cluster, group, enable_auto_commit=False)) as c:
            c.subscribe([topic])
            got: list[tuple[int, int]] = []
            deadline = time.monotonic() + 30
            while len(got) < n:
                assert time.monotonic() < deadline, got
                got += [(r.partition, r.offset) for r in await c.poll(timeout_ms=100)]
            got += [(r.partition, r.offset) for r in await c.poll(timeout_ms=300)]
            await c.commit()
        return got

    run(produce([f"v{i}".encode() for i in range(40)]))
    assert len(run(read(40))) == 40
    for node in list(cluster.brokers):
        cluster.faults.stop_broker(node)
    for node in list(cluster.brokers):
        cluster.faults.restart_broker(node)
    # After the restart the coordinator loads the group's commits back: a new member reads
    # only what was written since, nothing twice.
    run(produce([b"new-0", b"new-1"]))
    assert sorted(run(read(2))) == [(0, 20), (1, 20)]


def test_regex_subscription_is_resolved_by_the_broker(cluster: Cluster,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    prefix, group = uid("rx"), uid("g")
    cluster.create_topic(f"{prefix}-a", partitions=2, replication_factor=3)
    sent: list[ConsumerGroupHeartbeatRequest] = []

    async def main() -> None:
        async with Consumer(**member_opts(cluster, group)) as c:
            group_member = membership(c)
            spy_on(group_member, sent, monkeypatch)
            c.subscribe(pattern=f"{prefix}-.*")

            async def wait_for(check: Callable[[], bool]) -> None:
                deadline = time.monotonic() + 20
                while not check():
                    assert time.monotonic() < deadline, c.assignment()
                    await c.poll(timeout_ms=50)

            await wait_for(lambda: {tp.topic for tp in c.assignment()} == {f"{prefix}-a"})
            # A topic created after the group formed joins the assignment, no restart.
            await asyncio.to_thread(cluster.create_topic, f"{prefix}-b", partitions=3,
                                    replication_factor=3)
            await wait_for(lambda: len(c.assignment()) == 5)
        assert sent[0].subscribed_topic_regex == f"{prefix}-.*"
        assert sent[0].subscribed_topic_names is None   # the coordinator resolves it
        assert all(r.subscribed_topic_regex is None for r in sent[1:] if r.member_epoch > 0)

    run(main())


def test_a_regex_resolves_internal_topics_too(cluster: Cluster) -> None:
    """Kafka resolves a group's regular expressions against every topic name of its
    metadata image, the internal ones included (its TopicRegexResolver; franz-go's
    Test848RegexBrokerResolves expects __consumer_offsets assigned)."""
    group = uid("g")

    async def main() -> set[str]:
        async with Consumer(**member_opts(cluster, group)) as c:
            c.subscribe(pattern="__consumer_offs.*")
            deadline = time.monotonic() + 20
            while not c.assignment():
                assert time.monotonic() < deadline, "nothing assigned"
                await c.poll(timeout_ms=50)
            return {tp.topic for tp in c.assignment()}

    assert run(main()) == {"__consumer_offsets"}


def test_sync_consumers_share_a_kip848_group(cluster: Cluster) -> None:
    from kaflite.client import sync

    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=4, replication_factor=3)
    with sync.Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1) as p:
        for i in range(80):
            p.produce(topic, f"v{i}".encode(), partition=i % 4)
        p.flush()
    conf = member_opts(cluster, group, enable_auto_commit=False)
    with sync.Consumer(**conf) as a, sync.Consumer(**conf) as b:
        a.subscribe([topic])
        b.subscribe([topic])
        got: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while not (len(got) >= 80 and len(a.assignment()) == 2 and len(b.assignment()) == 2):
            assert time.monotonic() < deadline, (a.assignment(), b.assignment(), len(got))
            assert not a.assignment() & b.assignment()
            for c in (a, b):
                got += [(r.partition, r.offset) for r in c.poll(timeout_ms=50)]
        assert a.assignment() | b.assignment() == {TopicPartition(topic, p_) for p_ in range(4)}
        assert len(set(got)) == 80
        # Commits from the sync façade carry the member epoch too.
        a.commit()
        for tp in a.assignment():
            assert a.committed(tp) == a.position(tp)
        assert a.group_metadata().generation_id > 0
