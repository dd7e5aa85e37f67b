"""ConsumerGroupHeartbeat fuzzing: random and malformed heartbeats, timer jumps and faults
never crash the coordinator nor corrupt a group (no partition ever has two owners), and the
records written always load back into the same state."""

from __future__ import annotations

import asyncio
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.cluster.groups import CoordinatorShard
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest
from kaflite.protocol.messages import consumer_group_heartbeat_request as cghq
from tests.cluster.groups.consumer_helpers import (
    Topics,
    beat,
    join,
    make_consumer_shard,
    reload,
    send,
)

MEMBERS = ["a", "b", "c", ""]
TOPIC_NAMES = ["orders", "payments", "missing"]
STRANGE_ID = uuid.UUID(int=7)


def partitions(topics: Topics) -> st.SearchStrategy[list[cghq.TopicPartitions] | None]:
    tp = st.builds(cghq.TopicPartitions,
                   topic_id=st.sampled_from([topics.id("orders"), topics.id("payments"),
                                             STRANGE_ID]),
                   partitions=st.lists(st.integers(-1, 6), max_size=4))
    return st.none() | st.lists(tp, max_size=3)


def heartbeats(topics: Topics) -> st.SearchStrategy[ConsumerGroupHeartbeatRequest]:
    return st.builds(
        ConsumerGroupHeartbeatRequest,
        group_id=st.sampled_from(["g", "g", "", " "]),
        member_id=st.sampled_from(MEMBERS),
        member_epoch=st.integers(-3, 6),
        instance_id=st.sampled_from([None, None, "i1", "i2", ""]),
        rack_id=st.sampled_from([None, "r", ""]),
        rebalance_timeout_ms=st.sampled_from([-1, 0, 1000, 30_000]),
        subscribed_topic_names=st.none() | st.lists(st.sampled_from(TOPIC_NAMES), max_size=3),
        subscribed_topic_regex=st.sampled_from([None, None, "", "ord.*", "(", "pay.*"]),
        server_assignor=st.sampled_from([None, "uniform", "range", "nope"]),
        topic_partitions=partitions(topics))


STEP = st.one_of(
    st.tuples(st.just("beat"), st.integers(0, 1), st.integers(0, 10**6)),
    st.tuples(st.just("good"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("good"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("good"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("time"), st.integers(0, 1), st.integers(0, 40_000)),
    st.tuples(st.just("bump"), st.integers(0, 1), st.integers(0, 0)),
    st.tuples(st.just("fence"), st.integers(0, 2), st.integers(0, 0)),
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), steps=st.lists(STEP, min_size=1, max_size=25))
def test_random_heartbeats_keep_groups_consistent(data: st.DataObject,
                                                  steps: list[tuple[str, int, int]]) -> None:
    topics = Topics(orders=4, payments=3)
    reqs = [data.draw(heartbeats(topics)) for _ in steps]

    # Well-behaved clients: what each one was told (epoch, partitions it owns).
    clients: dict[str, tuple[int, dict[uuid.UUID, list[int]]]] = {m: (0, {}) for m in "abc"}

    async def good(shard: CoordinatorShard, member: str, subscription: int) -> None:
        epoch, have = clients[member]
        if epoch == 0:
            names = [["orders"], ["orders", "payments"], ["payments"]][subscription]
            req = join("g", member, *names)
        else:
            req = beat("g", member, epoch, [cghq.TopicPartitions(topic_id=t, partitions=ps)
                                            for t, ps in have.items()])
        resp = await send(shard, req)
        if resp.error_code:
            clients[member] = (0, {})  # fenced or unknown: lose everything, rejoin
            return
        if resp.assignment is not None:
            have = {tp.topic_id: sorted(tp.partitions) for tp in resp.assignment.topic_partitions}
        clients[member] = (resp.member_epoch, have)

    async def body() -> None:
        shard, timer, log = make_consumer_shard(topics, session_timeout_ms=20_000)
        for (kind, version, amount), req in zip(steps, reqs, strict=True):
            if kind == "beat":
                resp = await send(shard, req, version)
                assert resp.error_code >= 0
                # A random heartbeat may speak for a well-behaved member (same group and
                # member id): the coordinator cannot tell them apart, so what it answered
                # is what that member now knows. Found by a run whose random beat for b,
                # at b's epoch with owned [] while b had partitions to give up, released
                # them at once (Kafka's CurrentAssignmentBuilder does the same: an empty,
                # non-null owned list owns nothing to revoke), and the model still had b
                # owning them when a got them.
                if req.group_id == "g" and req.member_id in clients and not resp.error_code:
                    known = clients[req.member_id][1]
                    if resp.assignment is not None:
                        known = {tp.topic_id: sorted(tp.partitions)
                                 for tp in resp.assignment.topic_partitions}
                    clients[req.member_id] = (resp.member_epoch, known) \
                        if resp.member_epoch > 0 else (0, {})    # (a leave: gone)
            elif kind == "good":
                await good(shard, "abc"[version], amount)
            elif kind == "time":
                timer.advance(amount)
                await asyncio.sleep(0)
            elif "g" in shard.consumer_groups:
                if kind == "bump":
                    shard.consumer.bump_epoch("g")
                else:
                    shard.consumer.fence_epoch("g", MEMBERS[version])
                await asyncio.sleep(0)
            # No two live clients ever own the same partition.
            seen: dict[tuple[uuid.UUID, int], str] = {}
            live = shard.consumer_groups.get("g")
            for member, (_, have) in clients.items():
                if live is None or member not in live.members:
                    continue
                for t, ps in have.items():
                    for p in ps:
                        assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {member}"
                        seen[(t, p)] = member
            for group in shard.consumer_groups.values():
                assert group.check() == [], group.check()
        loaded = reload(topics, log)
        assert set(loaded.consumer_groups) == set(shard.consumer_groups)
        for gid, group in shard.consumer_groups.items():
            other = loaded.consumer_groups[gid]
            assert other.members == group.members
            assert {m: dict(a) for m, a in other.target.items()} == \
                {m: dict(a) for m, a in group.target.items()}
            assert (other.group_epoch, other.assignment_epoch) == \
                (group.group_epoch, group.assignment_epoch)

    asyncio.run(body())
