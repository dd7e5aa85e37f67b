"""The recovery table's KIP-848 rows: kaflite's ``group.protocol=consumer`` member
against faults injected into the kaflite cluster.

* STALE_MEMBER_EPOCH (``bump_group_epoch``: the coordinator moves the member to a
  new epoch as if the answer carrying it was lost): the commit, and the offset
  fetch, are retried once the next heartbeat has brought the new epoch;
* FENCED_MEMBER_EPOCH (``fence_member_epoch``) and UNKNOWN_MEMBER_ID
  (``forget_member``): the partitions are lost (``on_partitions_lost``, no
  commit) and the member rejoins with epoch 0 under the same member id, let in by its
  first rejoin;
* NOT_COORDINATOR on a heartbeat: the coordinator is looked up again, and the
  member stays in the group at its epoch;
* GROUP_AUTHORIZATION_FAILED: raised to the application from ``poll``;
* the coordinator's broker dies: the members stop heartbeating it, look the
  coordinator up again, and the group goes on (commits, new records) with the
  new one (the shared membership kept heartbeating a dead coordinator once).

Each test checks that the fault hit (the broker's error counts), the
transition the client took (its events, its listener), and that every record
was consumed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer, RebalanceListener, TopicPartition
from kaflite.client.consumer._membership import ConsumerMembership, MemberState
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest
from tests.client._kip848 import member_opts, spy_on
from tests.client._kip848 import membership as member
from tests.client._recovery_helpers import api_errors, clear_faults, events, run, uid, until

CONFIG = {
    "replica.lag.time.max.ms": 10000,
    "offsets.topic.num.partitions": 6,
    # a slow heartbeat: a fault injected right after one meets the member's commit first
    "group.consumer.heartbeat.interval.ms": 1000,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 2500,
    "group.consumer.min.session.timeout.ms": 1000,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=CONFIG) as c:
        yield c


__all__ = ["clear_faults"]    # the shared fixture, used by every test here


class Listener(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.calls.append(("revoked", frozenset(revoked)))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.calls.append(("assigned", frozenset(assigned)))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.calls.append(("lost", frozenset(lost)))


async def produce(cluster: Cluster, topic: str, n: int, partitions: int) -> list[bytes]:
    values = [f"v{i:04d}".encode() for i in range(n)]
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1) as p:
        for i, v in enumerate(values):
            p.produce(topic, v, partition=i % partitions)
        await p.flush()
    return values


class Spy:
    """Records every ConsumerGroupHeartbeat the member builds."""

    def __init__(self, m: ConsumerMembership, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[ConsumerGroupHeartbeatRequest] = []
        spy_on(m, self.sent, monkeypatch)


def opts(cluster: Cluster, group: str, cid: str, **extra: Any) -> dict[str, Any]:
    return member_opts(cluster, group, client_id=cid, max_poll_records=20, **extra)


async def stable(c: Consumer, got: list[bytes]) -> None:
    async def step() -> None:
        got.extend(r.value for r in await c.poll(timeout_ms=50) if r.value is not None)
    await until("a stable member", lambda: bool(c.assignment()) and
                member(c).state is MemberState.STABLE, step)


async def right_after_a_heartbeat(c: Consumer, spy: Spy) -> None:
    """Return just after a heartbeat went out: the next one is a whole interval away."""
    n = len(spy.sent)
    await until("a heartbeat", lambda: len(spy.sent) > n, lambda: asyncio.sleep(0.005))
    await asyncio.sleep(0.05)   # its answer is in


def test_stale_member_epoch_retries_with_the_next_epoch(cluster: Cluster,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        await produce(cluster, topic, 100, 2)
        async with Consumer(**opts(cluster, group, cid, enable_auto_commit=False)) as c:
            spy = Spy(member(c), monkeypatch)
            c.subscribe([topic])
            got: list[bytes] = []
            await stable(c, got)
            await until("every record", lambda: len(got) >= 100,
                        lambda: _extend(got, c))
            epoch = member(c).member_epoch
            await right_after_a_heartbeat(c, spy)
            assert await asyncio.to_thread(cluster.faults.bump_group_epoch, group) == 1
            await c.commit()   # STALE_MEMBER_EPOCH, then again with the new epoch
            assert member(c).member_epoch >= epoch
            # one request refused (the broker counts its two partitions), one retry
            assert api_errors(cluster, cid, "OffsetCommit") == {"STALE_MEMBER_EPOCH": 2}
            assert len(events(c, "retrying with member epoch")) == 1
            # The heartbeat that brought the epoch was a full one: the coordinator takes
            # the previous epoch only with the owned partitions.
            catch_up = [r for r in spy.sent if r.member_epoch == epoch][-1]
            assert catch_up.topic_partitions and catch_up.subscribed_topic_names == [topic]
            # The same for an offset fetch.
            epoch = member(c).member_epoch
            await right_after_a_heartbeat(c, spy)
            assert await asyncio.to_thread(cluster.faults.bump_group_epoch, group) == 1
            assert await c.committed(TopicPartition(topic, 0)) == 50
            assert member(c).member_epoch >= epoch
            assert api_errors(cluster, cid, "OffsetFetch") == {"STALE_MEMBER_EPOCH": 1}
            assert c.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
            assert "FENCED_MEMBER_EPOCH" not in api_errors(cluster, cid,
                                                           "ConsumerGroupHeartbeat")

    run(main())


async def _extend(out: list[bytes], c: Consumer) -> None:
    out.extend(r.value for r in await c.poll(timeout_ms=50) if r.value is not None)


@pytest.mark.parametrize("fault", ["fence_member_epoch", "forget_member"])
def test_fenced_or_unknown_member_loses_its_partitions_and_rejoins(
        cluster: Cluster, fault: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    expected = "FENCED_MEMBER_EPOCH" if fault == "fence_member_epoch" else "UNKNOWN_MEMBER_ID"

    async def main() -> None:
        values = await produce(cluster, topic, 200, 2)
        listener = Listener()
        async with Consumer(**opts(cluster, group, cid, auto_commit_interval_ms=100)) as c:
            spy = Spy(member(c), monkeypatch)
            c.subscribe([topic], listener=listener)
            got: list[bytes] = []
            await stable(c, got)
            await until("half the records", lambda: len(got) >= 100, lambda: _extend(got, c))
            member_id, epoch = member(c).member_id, member(c).member_epoch
            owned = frozenset(c.assignment())
            hit = await asyncio.to_thread(getattr(cluster.faults, fault), group, member_id)
            assert hit
            await until("the partitions lost", lambda: ("lost", owned) in listener.calls,
                        lambda: _extend(got, c))
            lost_at = listener.calls.index(("lost", owned))
            await until("the rejoin", lambda: member(c).state is MemberState.STABLE
                        and c.assignment() == owned and listener.calls[-1][0] == "assigned",
                        lambda: _extend(got, c))
            await until("every record", lambda: set(got) >= set(values),
                        lambda: _extend(got, c))
            # Lost, not revoked: nothing was committed for them after the fault; then
            # assigned again, after a join with epoch 0 under the same member id.
            assert ("revoked", owned) not in listener.calls[lost_at:]
            assert listener.calls[lost_at + 1:][-1] == ("assigned", owned)
            rejoins = [r for r in spy.sent if r.member_epoch == 0][1:]
            assert rejoins and all(r.member_id == member_id for r in rejoins)
            assert rejoins[0].topic_partitions == []
            assert member(c).member_epoch >= epoch
            # One error, then the first rejoin is let in: a fenced member is not kept
            # out until its old session expires (Kafka since KAFKA-19233).
            assert api_errors(cluster, cid, "ConsumerGroupHeartbeat").get(expected, 0) == 1
            assert events(c, f"{expected} on ConsumerGroupHeartbeat")
            assert set(got) == set(values)

    run(main())


def test_not_coordinator_on_heartbeat_finds_it_again_and_stays(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        await produce(cluster, topic, 20, 2)
        listener = Listener()
        async with Consumer(**opts(cluster, group, cid)) as c:
            c.subscribe([topic], listener=listener)
            got: list[bytes] = []
            await stable(c, got)
            epoch, calls = member(c).member_epoch, len(listener.calls)
            rules = [cluster.faults.inject_error("ConsumerGroupHeartbeat", code, 1, group=group,
                                                 client_id=cid)
                     for code in ("NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE")]
            await until("both faults", lambda: all(r.hits == 1 for r in rules),
                        lambda: _extend(got, c))
            await until("a heartbeat after them", lambda: member(c).state is MemberState.STABLE
                        and len(events(c, "group coordinator for")) >= 3,
                        lambda: _extend(got, c))
            assert events(c, "(NOT_COORDINATOR on ConsumerGroupHeartbeat")
            assert events(c, "(COORDINATOR_NOT_AVAILABLE on ConsumerGroupHeartbeat")
            # Still the same member at the same epoch, with the same partitions.
            assert member(c).member_epoch == epoch
            assert len(listener.calls) == calls and len(c.assignment()) == 2

    run(main())


def test_group_authorization_failed_is_raised_from_poll(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        rule = cluster.faults.inject_error("ConsumerGroupHeartbeat", "GROUP_AUTHORIZATION_FAILED",
                                           1, group=group, client_id=cid)
        async with Consumer(**opts(cluster, group, cid)) as c:
            c.subscribe([topic])
            with pytest.raises(errors.GroupAuthorizationFailedError):
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    await c.poll(timeout_ms=100)
            assert rule.hits == 1
            assert member(c).state is MemberState.FATAL

    run(main())


def test_losing_the_coordinator_s_broker_the_group_goes_on() -> None:
    """Two members; the group coordinator's broker is killed. Both find the new
    coordinator, the group stays whole, the records produced after the kill are all
    read, and the committed offsets (on the new coordinator) cover everything."""
    with Cluster(brokers=3, config=CONFIG) as own:
        run(_coordinator_lost(own), timeout=90)


async def _coordinator_lost(cluster: Cluster) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    first = await produce(cluster, topic, 20, 2)
    consumers = [Consumer(**opts(cluster, group, uid("c"), enable_auto_commit=False))
                 for _ in range(2)]
    got: list[bytes] = []

    async def step() -> None:
        for c in consumers:
            got.extend(r.value for r in await c.poll(timeout_ms=50) if r.value is not None)

    try:
        for c in consumers:
            await c.start()
            c.subscribe([topic])
        await until("two members sharing the partitions", lambda: all(
            len(c.assignment()) == 1 and member(c).state is MemberState.STABLE
            for c in consumers) and set(first) <= set(got), step)
        for c in consumers:
            await c.commit()
        victim = member(consumers[0]).coordinator
        assert victim is not None and member(consumers[1]).coordinator == victim
        await asyncio.to_thread(cluster.call, cluster.kill_broker(victim))
        # the heartbeats fail on the dead broker; the coordinator is looked up again
        await until("the new coordinator", lambda: all(
            member(c).coordinator not in (None, victim) for c in consumers), step,
            timeout=40)
        later = [v + b"-later" for v in await produce(cluster, topic, 20, 2)]
        got.clear()

        async def read_on() -> None:
            for c in consumers:
                got.extend(r.value + b"-later" for r in await c.poll(timeout_ms=50)
                           if r.value is not None)

        await until("the records produced after the kill", lambda: set(later) <= set(got),
                    read_on, timeout=40)
        # the group is whole: each member kept (or got back) one partition
        await until("a stable group", lambda: all(
            len(c.assignment()) == 1 and member(c).state is MemberState.STABLE
            for c in consumers), read_on)
        for c in consumers:
            assert events(c, "coordinator moved")
            await c.commit()                         # to the new coordinator
        committed = {tp.partition: await consumers[0].committed(tp)
                     for tp in (TopicPartition(topic, 0), TopicPartition(topic, 1))}
        assert committed == {0: 20, 1: 20}
    finally:
        for c in consumers:
            await c.close()


def test_a_leave_lost_to_a_coordinator_move_is_sent_again(cluster: Cluster,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A member whose leave heartbeat meets NOT_COORDINATOR (the coordinator moved while
    it closed) looks the coordinator up again and leaves there: the group lets its
    partitions go at once, not a session timeout later (the 30-minute kaflite soak had
    departed members keep partitions for 90 s while coordinator moves kept restarting
    their sessions). Kafka's Java client sends its leave once."""
    from kaflite.client import Admin
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        await produce(cluster, topic, 20, 2)
        c = Consumer(**opts(cluster, group, cid))
        await c.start()
        spy = Spy(member(c), monkeypatch)
        c.subscribe([topic])
        await stable(c, [])
        await right_after_a_heartbeat(c, spy)
        rule = cluster.faults.inject_error("ConsumerGroupHeartbeat", "NOT_COORDINATOR", 1,
                                           group=group, client_id=cid)
        await c.close()
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            described = (await admin.describe_consumer_groups([group]))[group]
        assert described.members == () and described.state == "Empty", described
        assert rule.hits == 1
        assert events(c, "leave failed: NOT_COORDINATOR")
        assert events(c, f"left group {group}")

    run(main())


@pytest.mark.parametrize("error", ["UNKNOWN_MEMBER_ID", "FENCED_MEMBER_EPOCH"])
def test_a_member_gone_during_its_offset_lookup_is_not_the_applications_error(
        cluster: Cluster, error: str) -> None:
    """The position lookup's OffsetFetch answered UNKNOWN_MEMBER_ID (the coordinator
    forgot the member meanwhile: CI saw it in test_commit_membership.py) is the
    membership's business: ``poll`` does not raise it, the member rejoins, and every
    record is read."""
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        values = await produce(cluster, topic, 40, 2)
        rule = cluster.faults.inject_error("OffsetFetch", error, 1, group=group, client_id=cid)
        async with Consumer(**opts(cluster, group, cid)) as c:
            c.subscribe([topic])
            got: list[bytes] = []
            await until("every record", lambda: set(got) >= set(values),
                        lambda: _extend(got, c))
            assert rule.hits == 1
            assert events(c, f"{error} on OffsetFetch")

    run(main())
