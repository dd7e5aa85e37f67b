"""The recovery table, row by row: the kaflite client against the kaflite cluster.

Each test breaks the cluster through ``cluster.faults`` the way Kafka breaks
(an injected error code where Kafka puts it, a moved leader or coordinator, a
forgotten member, deleted records, an ACL denial) and checks three things:

* the fault really hit (the rule's ``hits``, or the registry's error counts);
* the client took the transition the table names, as its ``events()`` show;
* no record was lost or duplicated: every test reads back exactly what was
  written (or, for a consumer, hands out each record exactly once).

Rules are scoped to the test's own client id, topic or group, and removed at
the end of each test, so the module's cluster can be shared.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflite.client import CommitFailedError, Consumer, Producer, TopicPartition
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from tests.client._recovery_helpers import api_errors, clear_faults, events, run, uid, until

GROUP_CONFIG = {
    "replica.lag.time.max.ms": 10000,
    "group.initial.rebalance.delay.ms": 100,
    "offsets.topic.num.partitions": 6,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=GROUP_CONFIG) as c:
        yield c


__all__ = ["clear_faults"]    # the shared fixture, used by every test here


def api_count(cluster: Cluster, client_id: str, api: str) -> int:
    return sum(c.apis[api].count for c in cluster.connections(client_id=client_id,
                                                               include_closed=True)
               if api in c.apis)


async def write(servers: str, topic: str, values: list[bytes], partitions: int) -> None:
    async with Producer(bootstrap_servers=servers, linger_ms=1) as p:
        for p_ in range(partitions):
            await p.send_batch(topic, values[p_::partitions], partition=p_)


async def read_back(servers: str, topic: str, partitions: int, expected: int) -> list[bytes]:
    """Everything in the topic, by a fresh consumer; fails on a duplicate write."""
    async with Consumer(bootstrap_servers=servers, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < expected and time.monotonic() < deadline:
            got += [r.value for r in await c.poll(timeout_ms=300)]
        got += [r.value for r in await c.poll(timeout_ms=300)]  # nothing more may come
    return got


def group_opts(cluster: Cluster, group: str, **extra: Any) -> dict[str, Any]:
    opts: dict[str, Any] = dict(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                auto_offset_reset="earliest", heartbeat_interval_ms=200,
                                session_timeout_ms=6000, retry_backoff_ms=50)
    opts.update(extra)
    return opts


async def joined(consumer: Consumer, timeout: float = 20) -> None:
    await until("an assignment", lambda: bool(consumer.assignment()),
                lambda: consumer.poll(timeout_ms=100), timeout)


# -- partition leaders: NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE ---------------------

def test_not_leader_on_produce_refreshes_and_reroutes(cluster: Cluster) -> None:
    topic, cid = uid("t"), uid("p")
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    rule = cluster.faults.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", 2, topic=topic,
                                       partition=1, client_id=cid)
    values = [f"v{i}".encode() for i in range(600)]

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, client_id=cid,
                            linger_ms=2) as p:
            errs: list[BaseException | None] = []
            for i, v in enumerate(values):
                p.produce(topic, v, partition=i % 3, on_delivery=lambda e, m: errs.append(e))
            await p.flush()
            assert errs == [None] * len(values)
            assert events(p, f"metadata refresh (NOT_LEADER_OR_FOLLOWER on {topic}-1)")
        assert rule.hits == 2
        assert api_errors(cluster, cid, "Produce").get("NOT_LEADER_OR_FOLLOWER") == 2
        got = await read_back(cluster.bootstrap_servers, topic, 3, len(values))
        assert sorted(got) == sorted(values)

    run(main())


def test_not_leader_on_fetch_refreshes_and_reroutes(cluster: Cluster) -> None:
    topic, cid = uid("t"), uid("c")
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    values = [f"v{i}".encode() for i in range(900)]

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, values, 3)
        rule = cluster.faults.inject_error("Fetch", "NOT_LEADER_OR_FOLLOWER", 2, topic=topic,
                                           partition=2, client_id=cid)
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=cid,
                            auto_offset_reset="earliest") as c:
            c.assign([TopicPartition(topic, p) for p in range(3)])
            got: list[bytes] = []
            await until("every record", lambda: len(got) >= len(values),
                        lambda: _extend(got, c))
            await _extend(got, c)
            assert sorted(got) == sorted(values)
            assert events(c, f"metadata refresh (NOT_LEADER_OR_FOLLOWER on {topic}-2)"), [str(e) for e in c.events()]
        assert rule.hits == 2

    run(main())


async def _extend(out: list[bytes], consumer: Consumer) -> None:
    out.extend(r.value for r in await consumer.poll(timeout_ms=200))


def test_leader_not_available_backs_off_then_delivers(cluster: Cluster) -> None:
    topic, cid = uid("t"), uid("p")
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, client_id=cid,
                            retry_backoff_ms=200, retry_backoff_max_ms=1000) as p:
            await p.send(topic, b"warm-up")
            rule = cluster.faults.inject_error("Produce", "LEADER_NOT_AVAILABLE", 2,
                                               topic=topic, client_id=cid)
            started = time.monotonic()
            md = await p.send(topic, b"after")
            elapsed = time.monotonic() - started
            assert md.offset == 1
            # Two failures, two back-offs (200 ms, then 400 ms, with no jitter below).
            assert elapsed >= 0.55, elapsed
            assert rule.hits == 2
            assert events(p, f"metadata refresh (LEADER_NOT_AVAILABLE on {topic}-0)")
        assert api_errors(cluster, cid, "Produce") == {"LEADER_NOT_AVAILABLE": 2}
        assert await read_back(cluster.bootstrap_servers, topic, 1, 2) == [b"warm-up", b"after"]

    run(main())


def test_leader_not_available_on_fetch_backs_off(cluster: Cluster) -> None:
    topic, cid = uid("t"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    values = [f"v{i}".encode() for i in range(200)]

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, values, 1)
        rule = cluster.faults.inject_error("Fetch", "LEADER_NOT_AVAILABLE", 3, topic=topic,
                                           client_id=cid)
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=cid,
                            auto_offset_reset="earliest", retry_backoff_ms=200) as c:
            c.assign([TopicPartition(topic, 0)])
            await c.position(TopicPartition(topic, 0))
            got: list[bytes] = []
            started = time.monotonic()
            await until("the first record", lambda: bool(got), lambda: _extend(got, c))
            # Three failures, each followed by a retry.backoff.ms pause for the partition.
            assert time.monotonic() - started >= 0.55
            await until("every record", lambda: len(got) >= len(values),
                        lambda: _extend(got, c))
            await _extend(got, c)
            assert got == values
            assert events(c, f"metadata refresh (LEADER_NOT_AVAILABLE on {topic}-0)")
        assert rule.hits == 3

    run(main())


# -- the group coordinator: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS -------------------

def test_not_coordinator_finds_the_coordinator_again(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    values = [f"v{i}".encode() for i in range(100)]

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, values, 2)
        async with Consumer(**group_opts(cluster, group, client_id=cid,
                                         enable_auto_commit=False)) as c:
            c.subscribe([topic])
            got: list[bytes] = []
            await until("every record", lambda: len(got) >= len(values),
                        lambda: _extend(got, c))
            generation = c._group.generation if c._group else -1
            finds = api_count(cluster, cid, "FindCoordinator")
            rule = cluster.faults.inject_error("OffsetCommit", "NOT_COORDINATOR", 1, group=group,
                                               client_id=cid)
            await c.commit()
            assert rule.hits == 1
            assert events(c, "(NOT_COORDINATOR on OffsetCommit)")
            assert api_count(cluster, cid, "FindCoordinator") == finds + 1
            assert len(events(c, f"group coordinator for {group} is broker")) == 2
            for p in range(2):
                assert await c.committed(TopicPartition(topic, p)) == 50
            # The same from a heartbeat: rediscovered, and still the same generation.
            rule = cluster.faults.inject_error("Heartbeat", "NOT_COORDINATOR", 1, group=group,
                                               client_id=cid)
            await until("the heartbeat fault", lambda: rule.hits == 1,
                        lambda: c.poll(timeout_ms=100))
            await until("a third FindCoordinator",
                        lambda: api_count(cluster, cid, "FindCoordinator") == finds + 2,
                        lambda: c.poll(timeout_ms=100))
            await c.poll(timeout_ms=500)
            assert c._group is not None and c._group.generation == generation
            assert sorted(got) == sorted(values)

    run(main())


def test_coordinator_load_in_progress_backs_off_without_rediscovering(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, [b"a", b"b", b"c"], 1)
        # The very first JoinGroup meets a loading coordinator, twice.
        join_rule = cluster.faults.inject_error("JoinGroup", "COORDINATOR_LOAD_IN_PROGRESS", 2,
                                                group=group, client_id=cid)
        async with Consumer(**group_opts(cluster, group, client_id=cid,
                                         enable_auto_commit=False)) as c:
            c.subscribe([topic])
            got: list[bytes] = []
            await until("every record", lambda: len(got) >= 3, lambda: _extend(got, c))
            assert join_rule.hits == 2
            rule = cluster.faults.inject_error("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", 2,
                                               group=group, client_id=cid)
            await c.commit()
            assert rule.hits == 2
            assert await c.committed(TopicPartition(topic, 0)) == 3
            # One lookup found the coordinator (the first may meet the offsets topic
            # being created, when no earlier test of the module created it).
            creating = api_errors(cluster, cid, "FindCoordinator").get(
                "COORDINATOR_NOT_AVAILABLE", 0)
            assert api_count(cluster, cid, "FindCoordinator") - creating == 1
            assert not events(c, "coordinator 0 unknown") and not events(c, "unknown for group")
            assert api_errors(cluster, cid, "OffsetCommit") == {"COORDINATOR_LOAD_IN_PROGRESS": 2}
            assert got == [b"a", b"b", b"c"]

    run(main())


# -- membership: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID ------------------

async def _consume_with_fault(cluster: Cluster, topic: str, group: str, cid: str,
                              values: list[bytes], fault: Callable[[Consumer], Any],
                              done: Callable[[Consumer], bool], lost: bool = False
                              ) -> Consumer:
    """Read ``values`` in a group, calling ``fault`` half way; exactly once, in order.
    With ``lost`` the fault costs the member its partitions (as Java's onJoinPrepare
    after a member reset): it reads again from the group's committed offset, so the
    reads are ``values`` with one step back to an offset it had read."""
    await write(cluster.bootstrap_servers, topic, values, 1)
    c = Consumer(**group_opts(cluster, group, client_id=cid, max_poll_records=20,
                              max_partition_fetch_bytes=200))
    async with c:
        c.subscribe([topic])
        got: list[bytes] = []
        await until("half the records", lambda: len(got) >= len(values) // 2,
                    lambda: _extend(got, c))
        fault(c)
        await until("the recovery", lambda: done(c), lambda: _extend(got, c))
        await until("every record", lambda: len(set(got)) >= len(values),
                    lambda: _extend(got, c))
        await _extend(got, c)
        if not lost:
            assert got == values
        else:
            back = next((i for i in range(1, len(got)) if got[i] <= got[i - 1]), len(got))
            assert got[:back] == values[:back], got
            if back < len(got):      # stepped back to a committed offset it had read
                k = values.index(got[back])
                assert k < back and got[back:] == values[k:k + len(got) - back], got
            assert set(got) == set(values)
    return c


def test_illegal_generation_on_heartbeat_rejoins(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    values = [f"v{i:04d}".encode() for i in range(400)]
    rules: list[Any] = []

    def fault(c: Consumer) -> None:
        rules.append(cluster.faults.inject_error("Heartbeat", "ILLEGAL_GENERATION", 1,
                                                 group=group, client_id=cid))

    def rejoined(c: Consumer) -> bool:
        return bool(events(c, "rebalance: generation 2"))

    async def main() -> None:
        c = await _consume_with_fault(cluster, topic, group, cid, values, fault, rejoined)
        assert rules[0].hits == 1
        assert events(c, "rejoin needed (ILLEGAL_GENERATION on Heartbeat)")
        assert api_count(cluster, cid, "JoinGroup") >= 3   # MEMBER_ID_REQUIRED, join, rejoin

    run(main())


def test_illegal_generation_on_commit_fails_the_commit_and_rejoins(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, [b"x"] * 10, 1)
        async with Consumer(**group_opts(cluster, group, client_id=cid,
                                         enable_auto_commit=False)) as c:
            c.subscribe([topic])
            got: list[bytes] = []
            await until("every record", lambda: len(got) >= 10, lambda: _extend(got, c))
            rule = cluster.faults.inject_error("OffsetCommit", "ILLEGAL_GENERATION", 1,
                                               group=group, client_id=cid)
            with pytest.raises(CommitFailedError):
                await c.commit()
            assert rule.hits == 1
            assert events(c, "rejoin needed (ILLEGAL_GENERATION on OffsetCommit)")
            # The commit failed, so the new generation starts from the last committed
            # offset (none: auto.offset.reset): the ten records come again, as in Kafka.
            again: list[bytes] = []
            await until("the rejoin", lambda: bool(events(c, "rebalance: generation 2")),
                        lambda: _extend(again, c))
            await until("the records again", lambda: len(again) >= 10,
                        lambda: _extend(again, c))
            assert again == [b"x"] * 10
            await c.commit()
            assert await c.committed(TopicPartition(topic, 0)) == 10

    run(main())


def test_unknown_member_id_rejoins_with_a_new_member_id(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    values = [f"v{i:04d}".encode() for i in range(400)]
    old: list[str] = []

    def fault(c: Consumer) -> None:
        assert c._group is not None
        old.append(c._group.member_id)
        assert cluster.faults.forget_member(group, c._group.member_id)

    def rejoined(c: Consumer) -> bool:
        return c._group is not None and c._group.member_id not in ("", old[0]) \
            and bool(c.assignment())

    async def main() -> None:
        c = await _consume_with_fault(cluster, topic, group, cid, values, fault, rejoined,
                                      lost=True)
        assert events(c, "(UNKNOWN_MEMBER_ID on Heartbeat)")
        assert events(c, "lost [")
        assert api_errors(cluster, cid, "Heartbeat").get("UNKNOWN_MEMBER_ID", 0) >= 1

    run(main())


def test_fenced_instance_id_is_raised_to_the_app(cluster: Cluster) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, [b"x"] * 4, 2)
        opts = group_opts(cluster, group, group_instance_id="instance-1")
        first = Consumer(**opts, client_id=uid("first"))
        second = Consumer(**opts, client_id=uid("second"))
        async with first, second:
            first.subscribe([topic])
            await joined(first)
            # A second process with the same group.instance.id takes the member over.
            second.subscribe([topic])
            await joined(second)
            assert second.assignment() == first.assignment()
            with pytest.raises(errors.FencedInstanceIdError):
                await until("the fence", lambda: False, lambda: first.poll(timeout_ms=100))
            # Fatal: every later poll raises it too, and the app is told in events.
            with pytest.raises(errors.FencedInstanceIdError):
                await first.poll(timeout_ms=100)
            assert len(await second.poll(timeout_ms=500)) >= 0

    run(main())


def test_fenced_instance_id_injected_on_heartbeat(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        async with Consumer(**group_opts(cluster, group, client_id=cid,
                                         group_instance_id="static-1")) as c:
            c.subscribe([topic])
            await joined(c)
            rule = cluster.faults.inject_error("Heartbeat", "FENCED_INSTANCE_ID", 1,
                                               group=group, client_id=cid)
            with pytest.raises(errors.FencedInstanceIdError):
                await until("the fence", lambda: False, lambda: c.poll(timeout_ms=100))
            assert rule.hits == 1

    run(main())


# -- data: OFFSET_OUT_OF_RANGE, TOPIC_AUTHORIZATION_FAILED ---------------------------------

@pytest.mark.parametrize("reset", ["earliest", "latest", "none"])
def test_offset_out_of_range_applies_auto_offset_reset(cluster: Cluster, reset: str) -> None:
    topic, cid = uid("t"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    values = [f"v{i:03d}".encode() for i in range(100)]
    tp = TopicPartition(topic, 0)

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, values, 1)
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=cid,
                            auto_offset_reset=reset) as c:
            c.assign([tp])
            c.seek(tp, 10)
            # Retention (or DeleteRecords) moves the log start past the consumer.
            assert await asyncio.to_thread(cluster.faults.delete_records, topic, 0, 60) == 60
            if reset == "none":
                with pytest.raises(errors.OffsetOutOfRangeError):
                    await until("the error", lambda: False, lambda: c.poll(timeout_ms=100))
                assert await c.position(tp) == 10   # the app decides what to do
                return
            got: list[bytes] = []
            if reset == "earliest":
                await until("the rest", lambda: len(got) >= 40, lambda: _extend(got, c))
                await _extend(got, c)
                assert got == values[60:]
            else:
                await until("the reset", lambda: bool(events(c, "reset")),
                            lambda: _extend(got, c))
                await write(cluster.bootstrap_servers, topic, [b"new"], 1)
                await until("the new record", lambda: bool(got), lambda: _extend(got, c))
                assert got == [b"new"]
            assert events(c, f"reset {topic}-0 to {reset} (OFFSET_OUT_OF_RANGE on {topic}-0)")
        assert api_errors(cluster, cid, "Fetch") == {"OFFSET_OUT_OF_RANGE": 1}

    run(main())


def test_topic_authorization_failed_is_raised_to_the_app(cluster: Cluster) -> None:
    topic, pid, cid = uid("t"), uid("p"), uid("c")
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, [b"before"], 1)
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, client_id=pid) as p, \
                Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=cid,
                         auto_offset_reset="earliest") as c:
            await p.send(topic, b"allowed")
            c.assign([TopicPartition(topic, 0)])
            got: list[bytes] = []
            await until("two records", lambda: len(got) >= 2, lambda: _extend(got, c))
            deny_p = cluster.faults.deny_topic(topic, client_id=pid)
            deny_c = cluster.faults.deny_topic(topic, client_id=cid)
            produce_hits, fetch_hits = deny_p.hits, deny_c.hits
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await p.send(topic, b"denied")
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await until("the denial", lambda: False, lambda: c.poll(timeout_ms=100))
            # raised on the first denial, not retried until a timeout
            assert deny_p.hits == produce_hits + 1 and deny_c.hits == fetch_hits + 1
            # A new client learns it from Metadata, at the topic level.
            async with Producer(bootstrap_servers=cluster.bootstrap_servers,
                                client_id=pid) as p2:
                with pytest.raises(errors.TopicAuthorizationFailedError):
                    await p2.send(topic, b"denied too")
            cluster.faults.remove(deny_p.id)
            cluster.faults.remove(deny_c.id)
            assert deny_p.hits >= 2 and deny_c.hits >= 1
            await p.send(topic, b"allowed again")
            await until("three records", lambda: len(got) >= 3, lambda: _extend(got, c))
            assert got == [b"before", b"allowed", b"allowed again"]
        assert await read_back(cluster.bootstrap_servers, topic, 1, 3) == got

    run(main())


# -- the cluster moving under the client: coordinator moves, forced rebalances ------------

def test_coordinator_move_during_commits(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("c")
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    values = [f"v{i:04d}".encode() for i in range(1500)]

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, values, 3)
        async with Consumer(**group_opts(cluster, group, client_id=cid, max_poll_records=50,
                                         enable_auto_commit=False)) as c:
            c.subscribe([topic])
            got: list[bytes] = []
            moves: list[int] = []
            commits = 0
            while len(got) < len(values):
                batch = await c.poll(timeout_ms=200)
                got += [r.value for r in batch]
                await c.commit()             # a commit after every poll
                commits += 1
                if len(moves) < 2 and len(got) >= (len(moves) + 1) * 500:
                    moves.append(await asyncio.to_thread(cluster.faults.move_coordinator,
                                                         group))
            await _extend(got, c)
            assert sorted(got) == sorted(values) and len(got) == len(values)
            assert len(moves) == 2
            moved = events(c, "coordinator moved")
            assert moved and f"→{moves[-1]}" in moved[-1], moved
            assert c._group is not None and c._group.coordinator == moves[-1]
            for p in range(3):
                assert await c.committed(TopicPartition(topic, p)) == 500
            assert api_errors(cluster, cid, "OffsetCommit").get("NOT_COORDINATOR", 0) + \
                api_errors(cluster, cid, "Heartbeat").get("NOT_COORDINATOR", 0) >= 1
            assert commits > 2

    run(main())


def test_forced_rebalances_mid_stream_exactly_once(cluster: Cluster) -> None:
    """Two members read; a third joins, then one leaves: every record exactly once.

    Each rebalance is eager (range): members commit their positions when the
    partitions are revoked, and nothing is handed out after that, so the new
    owners start exactly where the old ones stopped.
    """
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=6, replication_factor=3)
    values = [f"v{i:05d}".encode() for i in range(3000)]

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, values, 6)
        opts = group_opts(cluster, group, max_poll_records=25, max_partition_fetch_bytes=300)
        members = [Consumer(**opts, client_id=uid(f"m{i}")) for i in range(3)]
        got: list[bytes] = []
        for m in members[:2]:
            await m.start()
            m.subscribe([topic])
        try:
            async def read(ms: list[Consumer]) -> None:
                for batch in await asyncio.gather(*(m.poll(timeout_ms=100) for m in ms)):
                    got.extend(r.value for r in batch)

            await until("a third of the records", lambda: len(got) >= 1000,
                        lambda: read(members[:2]))
            await members[2].start()
            members[2].subscribe([topic])       # a new member: everyone rebalances
            await until("the new member's partitions",
                        lambda: bool(members[2].assignment()) and len(got) >= 1800,
                        lambda: read(members))
            assert len(got) == len(set(got))
            await members[0].close()            # a member leaves: the rest rebalance
            rest = members[1:]
            await until("every record", lambda: len(got) >= len(values), lambda: read(rest))
            await read(rest)
            owned = [m.assignment() for m in rest]
            assert sum(len(a) for a in owned) == 6 and len(set().union(*owned)) == 6
            assert len(got) == len(values) and sorted(got) == values
            for m in rest:
                assert len(events(m, "rebalance: generation")) >= 2
        finally:
            for m in members:
                await m.close()

    run(main(), 90)


def test_forgotten_member_rejoins_and_nothing_is_lost(cluster: Cluster) -> None:
    """The coordinator forgets a member (its session "expired") while it reads.

    Kafka's guarantee here is at-least-once: the forgotten member's partitions
    go to the others from its last commit while it still hands out records
    until its next heartbeat tells it UNKNOWN_MEMBER_ID. So: nothing is lost,
    no partition ends up with two owners, and duplicates come only from the
    forgotten member's partitions.
    """
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=4, replication_factor=3)
    values = [f"v{i:05d}".encode() for i in range(2000)]

    async def main() -> None:
        await write(cluster.bootstrap_servers, topic, values, 4)
        opts = group_opts(cluster, group, max_poll_records=25, max_partition_fetch_bytes=300)
        members = [Consumer(**opts, client_id=uid(f"m{i}")) for i in range(2)]
        got: dict[bytes, list[TopicPartition]] = {}
        for m in members:
            await m.start()
            m.subscribe([topic])
        try:
            async def read() -> None:
                for batch in await asyncio.gather(*(m.poll(timeout_ms=100) for m in members)):
                    for r in batch:
                        got.setdefault(r.value, []).append(TopicPartition(r.topic, r.partition))

            await until("both members", lambda: all(m.assignment() for m in members) and
                        len(got) >= 500, read)
            victim = members[0]._group
            assert victim is not None
            old_id, victim_tps = victim.member_id, members[0].assignment()
            assert await asyncio.to_thread(cluster.faults.forget_member, group, old_id)
            await until("every record", lambda: len(got) >= len(values), read)
            await read()
            assert sorted(got) == values
            twice = {tps[0] for tps in got.values() if len(tps) > 1}
            assert twice <= victim_tps, twice
            await until("the forgotten member's return", lambda: victim.member_id not in
                        ("", old_id) and all(m.assignment() for m in members), read)
            assert events(members[0], "(UNKNOWN_MEMBER_ID on ")
            owned = [m.assignment() for m in members]
            assert not owned[0] & owned[1] and len(owned[0] | owned[1]) == 4
        finally:
            for m in members:
                await m.close()

    run(main(), 90)


def test_close_leaves_the_group_so_the_next_member_joins_at_once(cluster: Cluster) -> None:
    """LeaveGroup on close: the coordinator need not wait for the session to expire.

    (LeaveGroup v3+ names members in a list; a request that also set the v0-2
    top-level member id could not be encoded, so no LeaveGroup was ever sent and
    the next member's JoinGroup waited out the old member's session timeout.)
    """
    topic, group, first_id = uid("t"), uid("g"), uid("first")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        opts = group_opts(cluster, group, session_timeout_ms=30000, heartbeat_interval_ms=1000)
        first = Consumer(**opts, client_id=first_id)
        async with first:
            first.subscribe([topic])
            await joined(first)
        assert events(first, f"left group {group}")
        leaves = [c.apis["LeaveGroup"] for c in cluster.connections(
            client_id=first_id, include_closed=True) if "LeaveGroup" in c.apis]
        assert len(leaves) == 1 and leaves[0].count == 1 and not leaves[0].errors
        async with Consumer(**opts, client_id=uid("second")) as second:
            second.subscribe([topic])
            await joined(second, timeout=10)    # well within the 30 s session timeout
            assert len(second.assignment()) == 2

    run(main())


def test_a_leave_group_answered_not_coordinator_is_sent_to_the_new_coordinator(
        cluster: Cluster) -> None:
    """LeaveGroup answered NOT_COORDINATOR (the coordinator moved while the member
    closed): the member looks it up again and leaves there, so the group is empty at
    once instead of a session timeout later. Kafka's Java client sends it once."""
    from kaflite.client import Admin
    topic, group, first_id = uid("t"), uid("g"), uid("first")
    cluster.create_topic(topic, partitions=2, replication_factor=3)

    async def main() -> None:
        opts = group_opts(cluster, group, session_timeout_ms=30000, heartbeat_interval_ms=1000)
        first = Consumer(**opts, client_id=first_id)
        async with first:
            first.subscribe([topic])
            await joined(first)
            rule = cluster.faults.inject_error("LeaveGroup", "NOT_COORDINATOR", 1,
                                               group=group, client_id=first_id)
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            described = (await admin.describe_groups([group]))[group]
        assert described.members == [], described
        assert described.state == "Empty", described
        assert rule.hits == 1
        assert events(first, "leave failed: NOT_COORDINATOR")
        assert events(first, f"left group {group}")

    run(main())
