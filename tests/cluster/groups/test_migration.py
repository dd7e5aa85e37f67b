"""Online migration on a fake clock: upgrade with members, classic members served inside
a consumer group, downgrade, the policy, and the records loading back."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kaflite.cluster.groups import CoordinatorShard, GroupConfig
from kaflite.cluster.groups._config import ConsumerGroupConfig
from kaflite.cluster.groups._consumer_group import ConsumerGroup
from kaflite.cluster.groups._group import GroupState
from kaflite.cluster.groups._migration import decode_assignment, encode_assignment
from kaflite.cluster.groups._timer import ManualTimer
from kaflite.protocol import errors
from kaflite.protocol.messages import leave_group_request as lgq
from tests.cluster.groups.consumer_helpers import (
    Topics,
    beat,
    join,
    owned,
    owners_ok,
    reload,
    send,
)
from tests.cluster.groups.helpers import CTX, TOPIC, FakeLog, join_req, run, settle, sync_req


def shard_with(topics: Topics, log: FakeLog | None = None,
               **consumer: Any) -> tuple[CoordinatorShard, ManualTimer, FakeLog]:
    timer, log = ManualTimer(), log or FakeLog()
    config = GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1000,
                         consumer=replace(ConsumerGroupConfig(), session_timeout_ms=10_000,
                                          heartbeat_interval_ms=1000, **consumer))
    shard = CoordinatorShard(0, 0, log, timer, config, lambda t: t in topics.meta,
                             topics.view())
    shard.finish_loading()
    return shard, timer, log


async def classic_group(shard: CoordinatorShard, timer: ManualTimer) -> tuple[str, int]:
    """One classic member owning all four partitions; (member id, generation)."""
    first = await shard.classic.join(CTX, join_req("g"))
    pending = shard.classic.join(CTX, join_req("g", first.member_id))
    timer.advance(1)
    await settle()
    joined = await pending
    assert joined.error_code == 0, joined
    mid, gen = joined.member_id, joined.generation_id
    synced = await shard.classic.sync(sync_req("g", mid, gen, {
        mid: encode_assignment({TOPIC: [0, 1, 2, 3]})}))
    assert synced.error_code == 0 and str(shard.groups["g"].state) == "Stable"
    return mid, gen


async def consumer_group(topics: Topics) -> tuple[CoordinatorShard, ManualTimer, FakeLog,
                                                 ConsumerGroup]:
    """A consumer group of one consumer-protocol member, "c", subscribed to orders."""
    shard, timer, log = shard_with(topics)
    assert (await send(shard, join("g", "c", TOPIC))).error_code == 0
    return shard, timer, log, shard.consumer_groups["g"]


@run
async def test_upgrade_serve_classic_members_and_downgrade() -> None:
    topics = Topics(orders=4)
    shard, timer, log = shard_with(topics)
    mid, gen = await classic_group(shard, timer)
    # A consumer-protocol member joins: the group is upgraded in place.
    resp = await send(shard, join("g", "c", TOPIC))
    assert resp.error_code == 0
    assert "g" not in shard.groups
    group = shard.consumer_groups["g"]
    old = group.members[mid]
    assert old.classic is not None and old.classic.session_timeout_ms == 10_000
    assert old.member_epoch == gen and old.subscribed_topic_names == (TOPIC,)
    assert old.assigned == {topics.id(TOPIC): frozenset(range(4))}
    assert group.group_epoch == gen + 1 and group.members["c"].assigned == {}
    owners_ok(group)
    # The classic member learns of the rebalance from its heartbeat, and rejoins.
    assert shard.migration.heartbeat(group, mid, gen) == errors.RebalanceInProgressError.code
    assert shard.migration.heartbeat(group, mid, gen + 5) == errors.IllegalGenerationError.code
    assert shard.migration.heartbeat(group, "nobody", gen) == errors.UnknownMemberIdError.code
    rejoined = await shard.migration.join(CTX, join_req("g", mid), group)
    assert rejoined.error_code == 0 and rejoined.generation_id == gen + 1
    assert rejoined.protocol_name == "range" and rejoined.leader != mid
    synced = shard.migration.sync(sync_req("g", mid, gen + 1), group)
    mine = decode_assignment(synced.assignment)
    assert synced.error_code == 0 and len(mine) == 2
    assert shard.migration.heartbeat(group, mid, gen + 1) == 0
    # The consumer member gets the two it was waiting for.
    resp = await send(shard, beat("g", "c", gen + 1, owned(topics, {})))
    theirs = {p for tp in resp.assignment.topic_partitions for p in tp.partitions} \
        if resp.assignment else set()
    assert theirs | {p for _, p in mine} == set(range(4)) and len(theirs) == 2
    owners_ok(group)
    assert str(group.state) == "Stable"
    # All of it loads back.
    loaded = reload(topics, log).consumer_groups["g"]
    assert loaded.members == group.members and loaded.target == group.target
    # The last consumer-protocol member leaves: the group is classic again and rebalances.
    assert (await send(shard, beat("g", "c", -1))).error_code == 0
    assert "g" not in shard.consumer_groups
    classic = shard.groups["g"]
    assert classic.is_in(GroupState.PREPARING_REBALANCE) and list(classic.members) == [mid]
    assert decode_assignment(classic.members[mid].assignment) == sorted(mine)
    again = reload(topics, log)
    assert "g" not in again.consumer_groups and list(again.groups["g"].members) == [mid]


@run
async def test_classic_member_joins_and_leaves_a_consumer_group() -> None:
    shard, _, _, group = await consumer_group(Topics(orders=4))
    first = await shard.migration.join(CTX, join_req("g"), group)
    assert first.error_code == errors.MemberIdRequiredError.code
    joined = await shard.migration.join(CTX, join_req("g", first.member_id), group)
    assert joined.error_code == 0
    member = group.members[first.member_id]
    assert member.classic is not None and member.member_epoch == group.group_epoch
    bad = await shard.migration.join(CTX, join_req("g", protocols=[("x", b"")],
                                                   protocol_type="connect"), group)
    assert bad.error_code == errors.InconsistentGroupProtocolError.code
    # A consumer-protocol member id cannot be used by a classic request.
    assert shard.migration.heartbeat(group, "c", 1) == errors.UnknownMemberIdError.code
    results, written = shard.migration.leave(group, [lgq.MemberIdentity(
        member_id=first.member_id)])
    assert await written == 0 and results[0].error_code == 0
    assert first.member_id not in group.members and "g" in shard.consumer_groups
    # Only a classic member was there besides "c": no downgrade while "c" stays.
    assert "g" not in shard.groups


@run
async def test_policy_disabled_refuses_the_upgrade() -> None:
    topics = Topics(orders=4)
    shard, timer, _ = shard_with(topics, migration_policy="disabled")
    await classic_group(shard, timer)
    resp = await send(shard, join("g", "c", TOPIC))
    assert resp.error_code == errors.GroupIdNotFoundError.code
    assert "g" in shard.groups and "g" not in shard.consumer_groups


@run
async def test_static_classic_members_in_a_consumer_group() -> None:
    topics = Topics(orders=4)
    shard, _, log, group = await consumer_group(topics)
    first = await shard.migration.join(CTX, join_req("g", instance_id="box-1"), group)
    assert first.error_code == 0           # a static member needs no second join
    mid = first.member_id
    assert group.static_member("box-1") is not None and group.members[mid].classic is not None
    synced = shard.migration.sync(sync_req("g", mid, first.generation_id,
                                           instance_id="box-1"), group)
    assert synced.error_code == 0
    # Another member id with that instance id is fenced; an unknown instance id is unknown.
    assert shard.migration.heartbeat(group, "other", first.generation_id, "box-1") == \
        errors.FencedInstanceIdError.code
    assert shard.migration.sync(sync_req("g", "other", first.generation_id, instance_id="box-1"),
                                group).error_code == errors.FencedInstanceIdError.code
    known = await shard.migration.join(CTX, join_req("g", "other", instance_id="box-1"), group)
    assert known.error_code == errors.FencedInstanceIdError.code
    unknown = await shard.migration.join(CTX, join_req("g", mid, instance_id="box-9"), group)
    assert unknown.error_code == errors.UnknownMemberIdError.code
    # A restarted instance (no member id) takes the old member's place and partitions,
    # with no rebalance.
    old = group.members[mid]
    epoch = group.group_epoch
    again = await shard.migration.join(CTX, join_req("g", instance_id="box-1"), group)
    assert again.error_code == 0 and again.member_id != mid
    group = shard.consumer_groups["g"]
    assert mid not in group.members and group.group_epoch == epoch
    assert group.members[again.member_id].assigned == old.assigned
    assert group.static_member("box-1") == group.members[again.member_id]
    assert shard.migration.heartbeat(group, mid, old.member_epoch, "box-1") == \
        errors.FencedInstanceIdError.code
    results, written = shard.migration.leave(group, [lgq.MemberIdentity(
        member_id=mid, group_instance_id="box-1")])
    assert await written == 0 and results[0].error_code == errors.FencedInstanceIdError.code
    loaded = reload(topics, log).consumer_groups["g"]
    assert loaded.static_member("box-1") == loaded.members[again.member_id]


@run
async def test_classic_members_must_sync_and_rejoin_within_the_rebalance_timeout() -> None:
    shard, timer, _, group = await consumer_group(Topics(orders=4))
    # Joined, never synced: fenced once its rebalance timeout has passed.
    lazy = await shard.migration.join(CTX, join_req("g", instance_id="lazy", session_ms=60_000,
                                                    rebalance_ms=5_000), group)
    assert lazy.error_code == 0
    timer.advance(4_999)
    await settle()
    assert lazy.member_id in group.members
    timer.advance(2)
    await settle()
    group = shard.consumer_groups["g"]
    assert lazy.member_id not in group.members
    # Synced, then told to rejoin (a new member bumps the epoch): it must join again within
    # its rebalance timeout, though it keeps heartbeating.
    slow = await shard.migration.join(CTX, join_req("g", instance_id="slow", session_ms=60_000,
                                                    rebalance_ms=5_000), group)
    group = shard.consumer_groups["g"]
    assert shard.migration.sync(sync_req("g", slow.member_id, slow.generation_id,
                                         instance_id="slow"), group).error_code == 0
    assert (await send(shard, join("g", "d", TOPIC))).error_code == 0
    group = shard.consumer_groups["g"]
    for _ in range(5):
        assert shard.migration.heartbeat(group, slow.member_id, slow.generation_id, "slow") == \
            errors.RebalanceInProgressError.code
        timer.advance(1_100)
        await settle()
        group = shard.consumer_groups["g"]
    assert slow.member_id not in group.members
    # One that rejoins in time stays.
    quick = await shard.migration.join(CTX, join_req("g", instance_id="quick", rebalance_ms=5_000),
                                       group)
    group = shard.consumer_groups["g"]
    assert shard.migration.sync(sync_req("g", quick.member_id, quick.generation_id,
                                         instance_id="quick"), group).error_code == 0
    assert (await send(shard, join("g", "e", TOPIC))).error_code == 0
    group = shard.consumer_groups["g"]
    assert shard.migration.heartbeat(group, quick.member_id, quick.generation_id, "quick") == \
        errors.RebalanceInProgressError.code
    timer.advance(3_000)
    rejoined = await shard.migration.join(CTX, join_req(
        "g", quick.member_id, instance_id="quick", rebalance_ms=5_000), group)
    assert rejoined.error_code == 0
    group = shard.consumer_groups["g"]
    assert shard.migration.sync(sync_req("g", quick.member_id, rejoined.generation_id,
                                         instance_id="quick"), group).error_code == 0
    timer.advance(4_000)
    await settle()
    assert quick.member_id in shard.consumer_groups["g"].members
