"""KIP-848 groups on a fake clock: joins, epochs, reconciliation, errors, timeouts, records."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.cluster.groups._consumer_group import MemberState
from kaflite.protocol import errors
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest, OffsetFetchRequest
from tests.cluster.groups.consumer_helpers import (
    Topics,
    assigned,
    beat,
    join,
    make_consumer_shard,
    owned,
    owners_ok,
    reload,
    send,
)
from tests.cluster.groups.helpers import CTX, commit_req, join_req, run

TOPIC = "orders"


@run
async def test_two_members_reconcile_without_a_partition_owned_twice() -> None:
    topics = Topics(orders=6)
    shard, _, _ = make_consumer_shard(topics)
    a = await send(shard, join("g", "a", TOPIC))
    assert (a.member_epoch, a.heartbeat_interval_ms) == (1, 1000)
    assert assigned(topics, a) == {TOPIC: [0, 1, 2, 3, 4, 5]}
    # Nothing changed: the answer carries no assignment.
    again = await send(shard, beat("g", "a", 1))
    assert again.assignment is None and again.member_epoch == 1
    b = await send(shard, join("g", "b", TOPIC))
    group = shard.consumer_groups["g"]
    assert (group.group_epoch, group.assignment_epoch) == (2, 2)
    # b is at the new epoch but its partitions are still a's: nothing yet.
    assert b.member_epoch == 2 and assigned(topics, b) == {}
    assert group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    owners_ok(group)
    # a is asked to revoke three partitions and stays at epoch 1 until it has.
    a = await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: [0, 1, 2, 3, 4, 5]})))
    keep = assigned(topics, a)
    assert a.member_epoch == 1 and keep is not None and len(keep[TOPIC]) == 3
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    b = await send(shard, beat("g", "b", 2, owned(topics, {})))
    assert b.assignment is None  # still waiting for a
    owners_ok(group)
    a = await send(shard, beat("g", "a", 1, owned(topics, keep)))
    assert a.member_epoch == 2 and a.assignment is None
    b = await send(shard, beat("g", "b", 2, owned(topics, {})))
    got = assigned(topics, b)
    assert got is not None and sorted(got[TOPIC] + keep[TOPIC]) == [0, 1, 2, 3, 4, 5]
    assert str(group.state) == "Stable"
    owners_ok(group)


@run
async def test_malformed_heartbeats_get_invalid_request() -> None:
    shard, _, _ = make_consumer_shard(Topics(orders=1))
    base = join("g", "m", TOPIC)
    cases = [
        (ConsumerGroupHeartbeatRequest(**{**_fields(base), "member_id": ""}), 1),
        (ConsumerGroupHeartbeatRequest(**{**_fields(base), "group_id": " "}), 1),
        (ConsumerGroupHeartbeatRequest(**{**_fields(base), "instance_id": ""}), 1),
        (ConsumerGroupHeartbeatRequest(**{**_fields(base), "rack_id": ""}), 1),
        (ConsumerGroupHeartbeatRequest(**{**_fields(base), "rebalance_timeout_ms": -1}), 1),
        (ConsumerGroupHeartbeatRequest(**{**_fields(base), "topic_partitions": None}), 1),
        (ConsumerGroupHeartbeatRequest(**{**_fields(base), "subscribed_topic_names": None}), 1),
        (beat("g", "m", -2), 1),            # a static leave without an instance id
        (beat("g", "m", -3), 1),
        (beat("g", "", 3), 0),              # v0: a member id is needed past the join
    ]
    for req, version in cases:
        resp = await send(shard, req, version)
        assert resp.error_code == errors.InvalidRequestError.code, req
        assert resp.error_message
    assert shard.consumer_groups == {}
    # v0 lets the coordinator pick the member id.
    resp = await send(shard, ConsumerGroupHeartbeatRequest(**{**_fields(base), "member_id": ""}), 0)
    assert resp.error_code == 0 and resp.member_id


def _fields(req: ConsumerGroupHeartbeatRequest) -> dict[str, object]:
    return {f: getattr(req, f) for f in ("group_id", "member_id", "member_epoch", "instance_id",
                                         "rack_id", "rebalance_timeout_ms",
                                         "subscribed_topic_names", "subscribed_topic_regex",
                                         "server_assignor", "topic_partitions")}


@run
async def test_error_codes_as_kafka() -> None:
    topics = Topics(orders=2)
    shard, _, _ = make_consumer_shard(topics, max_size=2)
    assert (await send(shard, join("g", "m", TOPIC, assignor="sticky"))).error_code == \
        errors.UnsupportedAssignorError.code
    assert (await send(shard, join("g", "m", regex="("))).error_code == \
        errors.InvalidRegularExpressionError.code
    assert (await send(shard, beat("nope", "m", 1))).error_code == errors.GroupIdNotFoundError.code
    assert (await send(shard, join("g", "a", TOPIC))).error_code == 0
    assert (await send(shard, beat("g", "ghost", 1))).error_code == \
        errors.UnknownMemberIdError.code
    assert (await send(shard, beat("g", "a", 7))).error_code == errors.FencedMemberEpochError.code
    assert (await send(shard, join("g", "a", TOPIC))).error_code == 0  # rejoin just after join
    assert (await send(shard, join("g", "s1", TOPIC, instance_id="i"))).error_code == 0
    assert (await send(shard, join("g", "s2", TOPIC, instance_id="i"))).error_code == \
        errors.GroupMaxSizeReachedError.code
    shard.consumer.cfg = shard.consumer.cfg.__class__(max_size=10)
    assert (await send(shard, join("g", "s2", TOPIC, instance_id="i"))).error_code == \
        errors.UnreleasedInstanceIdError.code
    assert (await send(shard, beat("g", "s2", 1, instance_id="i"))).error_code == \
        errors.FencedInstanceIdError.code
    # A classic group's id is not a consumer group.
    await shard.classic.join(CTX, join_req("classic"))
    assert (await send(shard, beat("classic", "m", 1))).error_code == \
        errors.GroupIdNotFoundError.code


@run
async def test_static_member_leaves_and_comes_back_with_its_partitions() -> None:
    topics = Topics(orders=4)
    shard, _timer, _ = make_consumer_shard(topics)
    first = await send(shard, join("g", "m1", TOPIC, instance_id="inst"))
    group = shard.consumer_groups["g"]
    epoch = group.group_epoch
    left = await send(shard, beat("g", "m1", -2, instance_id="inst"))
    assert left.member_epoch == -2 and group.members["m1"].member_epoch == -2
    back = await send(shard, join("g", "m2", TOPIC, instance_id="inst"))
    assert back.error_code == 0 and assigned(topics, back) == assigned(topics, first)
    assert group.group_epoch == epoch and set(group.members) == {"m2"}
    owners_ok(group)
    # Leaving for good (-1) bumps the group epoch.
    await send(shard, beat("g", "m2", -1, instance_id="inst"))
    assert group.members == {} and group.group_epoch == epoch + 1
    assert str(group.state) == "Empty"


@run
async def test_session_expiry_and_rebalance_timeout_fence_members() -> None:
    topics = Topics(orders=4)
    shard, timer, _ = make_consumer_shard(topics, session_timeout_ms=5000)
    await send(shard, join("g", "a", TOPIC, rebalance_ms=3000))
    group = shard.consumer_groups["g"]
    await send(shard, join("g", "b", TOPIC))
    # a is asked to revoke and never does: fenced after its rebalance timeout.
    await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: [0, 1, 2, 3]})))
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    timer.advance(2000)
    await send(shard, beat("g", "b", group.members["b"].member_epoch, []))
    timer.advance(1500)
    await asyncio.sleep(0)
    assert "a" not in group.members
    b = await send(shard, beat("g", "b", group.members["b"].member_epoch, []))
    assert assigned(topics, b) == {TOPIC: [0, 1, 2, 3]}
    # b stops heartbeating: its session expires.
    timer.advance(5001)
    await asyncio.sleep(0)
    assert group.members == {} and str(group.state) == "Empty"


@run
async def test_regex_subscription_picks_up_a_topic_created_later() -> None:
    topics = Topics(orders=2, other=1)
    shard, _, _ = make_consumer_shard(topics)
    resp = await send(shard, join("g", "m", regex="ord.*"))
    assert assigned(topics, resp) == {TOPIC: [0, 1]}
    topics.create("orders-eu", 2)
    shard.consumer.topics = topics.view()
    resp = await send(shard, beat("g", "m", 1, owned(topics, {TOPIC: [0, 1]})))
    assert resp.member_epoch == 2
    assert assigned(topics, resp) == {TOPIC: [0, 1], "orders-eu": [0, 1]}


@run
async def test_range_assignor_on_request() -> None:
    topics = Topics(orders=3, payments=3)
    shard, _, _ = make_consumer_shard(topics)
    for m in ("a", "b"):
        await send(shard, join("g", m, "orders", "payments", assignor="range"))
    group = shard.consumer_groups["g"]
    # Co-partitioned ranges: a gets 0-1 of both topics, b gets 2.
    target = {m: {topics_name(topics, t): sorted(ps) for t, ps in group.target[m].items()}
              for m in ("a", "b")}
    assert target == {"a": {"orders": [0, 1], "payments": [0, 1]},
                      "b": {"orders": [2], "payments": [2]}}


def topics_name(topics: Topics, topic_id: object) -> str:
    return next(t.name for t in topics.meta.values() if t.topic_id == topic_id)


@run
async def test_offset_commit_and_fetch_check_the_member_epoch() -> None:
    topics = Topics(orders=2)
    shard, _, _ = make_consumer_shard(topics)
    resp = await send(shard, join("g", "m", TOPIC))
    epoch = resp.member_epoch
    ok = await shard.offset_manager.commit(commit_req("g", member="m", generation=epoch), 9)
    assert set(ok.values()) == {0}
    stale = await shard.offset_manager.commit(commit_req("g", member="m", generation=epoch - 1), 9)
    assert set(stale.values()) == {errors.StaleMemberEpochError.code}
    old = await shard.offset_manager.commit(commit_req("g", member="m", generation=epoch), 8)
    assert set(old.values()) == {errors.UnsupportedVersionError.code}
    unknown = await shard.offset_manager.commit(commit_req("g", member="x", generation=epoch), 9)
    assert set(unknown.values()) == {errors.UnknownMemberIdError.code}
    # The injected fault: the group moves on, the member's next commit is stale.
    assert shard.consumer.bump_epoch("g") == 1
    stale = await shard.offset_manager.commit(commit_req("g", member="m", generation=epoch), 9)
    assert set(stale.values()) == {errors.StaleMemberEpochError.code}
    group = shard.consumer_groups["g"]
    with pytest.raises(errors.StaleMemberEpochError):
        shard.consumer.validate_offset_fetch(group, "m", epoch)
    # Its heartbeat with the previous epoch is accepted and brings the new one.
    resp = await send(shard, beat("g", "m", epoch, owned(topics, {TOPIC: [0, 1]})))
    assert resp.error_code == 0 and resp.member_epoch == epoch + 1
    shard.consumer.validate_offset_fetch(group, "m", epoch + 1)
    assert OffsetFetchRequest  # fetch itself is covered through the handler in the cluster tests


@run
async def test_a_commit_with_an_older_epoch_stands_for_partitions_held_since() -> None:
    """Kafka 4.4 (ConsumerGroup.validateOffsetCommit): a commit that a reconciliation
    overtook is taken for each partition the member was given at or before its epoch, and
    refused, partition by partition, for the rest. The epochs survive a coordinator move."""
    topics = Topics(orders=6)
    shard, _, log = make_consumer_shard(topics)
    await send(shard, join("g", "a", TOPIC))                     # a: epoch 1, all six
    await send(shard, join("g", "b", TOPIC))                     # group epoch 2
    a = await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: [0, 1, 2, 3, 4, 5]})))
    keep = (assigned(topics, a) or {})[TOPIC]
    gone = sorted(set(range(6)) - set(keep))
    a = await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: keep})))
    assert a.member_epoch == 2
    b = await send(shard, beat("g", "b", 2, owned(topics, {})))
    got = (assigned(topics, b) or {})[TOPIC]
    assert sorted(got) == gone

    def codes(resp: dict[tuple[str, int], int]) -> dict[int, int]:
        return {p: code for (_, p), code in resp.items()}

    for s in (shard, reload(topics, log)):
        # a, one epoch behind: its kept partitions were given at epoch 1, the others are b's.
        mixed = await s.offset_manager.commit(
            commit_req("g", {p: 5 for p in range(6)}, member="a", generation=1), 9)
        stale = errors.StaleMemberEpochError.code
        assert codes(mixed) == {p: 0 if p in keep else stale for p in range(6)}
        # b was given its partitions at epoch 2: epoch 1 stands for none of them.
        old = await s.offset_manager.commit(
            commit_req("g", {p: 5 for p in got}, member="b", generation=1), 9)
        assert set(old.values()) == {stale}
        ahead = await s.offset_manager.commit(
            commit_req("g", {keep[0]: 5}, member="a", generation=3), 9)
        assert set(ahead.values()) == {stale}
        assert s.consumer_groups["g"].members["a"].assignment_epoch(
            topics.id(TOPIC), keep[0]) == 1


@run
async def test_fenced_member_epoch_fault() -> None:
    topics = Topics(orders=2)
    shard, _, _ = make_consumer_shard(topics)
    await send(shard, join("g", "m", TOPIC))
    assert shard.consumer.fence_epoch("g", "m")
    resp = await send(shard, beat("g", "m", 1, owned(topics, {TOPIC: [0, 1]})))
    assert resp.error_code == errors.FencedMemberEpochError.code
    assert not shard.consumer.fence_epoch("g", "ghost")


@run
async def test_records_load_back_the_same_group() -> None:
    topics = Topics(orders=4)
    shard, _, log = make_consumer_shard(topics)
    for m in ("a", "b", "c"):
        await send(shard, join("g", m, TOPIC, instance_id=f"i-{m}" if m == "c" else None))
    await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: [0, 1, 2, 3]})))
    await send(shard, beat("g", "b", -1))
    loaded = reload(topics, log)
    before, after = shard.consumer_groups["g"], loaded.consumer_groups["g"]
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch,
                                                            before.assignment_epoch)
    assert after.members == before.members and after.target == before.target
    assert after.static_members == before.static_members
    assert after.subscription_metadata == before.subscription_metadata
    # DeleteGroups refuses a group with members, then deletes it with tombstones.
    assert (await shard.offset_manager.delete_groups(["g"]))["g"] == \
        errors.NonEmptyGroupError.code
    for m, member in list(before.members.items()):
        await send(shard, beat("g", m, -1, instance_id=member.instance_id))
    assert (await shard.offset_manager.delete_groups(["g"]))["g"] == 0
    assert "g" not in reload(topics, log).consumer_groups


@run
async def test_empty_groups_change_type() -> None:
    topics = Topics(orders=1)
    shard, _, log = make_consumer_shard(topics)
    # An empty classic group (offsets only) becomes a consumer group on the first join.
    await shard.offset_manager.commit(commit_req("g"), 9)
    assert "g" in shard.groups
    assert (await send(shard, join("g", "m", TOPIC))).error_code == 0
    assert "g" not in shard.groups and "g" in shard.consumer_groups
    assert "g" in reload(topics, log).consumer_groups
    assert shard.offset_manager.fetch("g", None)  # the offsets stay


@run
async def test_a_fenced_member_rejoins_under_its_member_id_at_once() -> None:
    # The 30-minute kaflite soak: after a cluster crash a member gave up its partitions
    # and rejoined with epoch 0 under its member id; the coordinator still knew it at a
    # later epoch and fenced every rejoin for 74 s (until its old session expired).
    # Kafka 4.4 lets epoch 0 in (KAFKA-19233).
    topics = Topics(orders=4)
    shard, _, _ = make_consumer_shard(topics)
    await send(shard, join("g", "a", TOPIC))
    await send(shard, join("g", "b", TOPIC))
    a = await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: [0, 1, 2, 3]})))
    keep = assigned(topics, a)
    assert keep is not None
    a = await send(shard, beat("g", "a", 1, owned(topics, keep)))
    await send(shard, beat("g", "b", 2, owned(topics, {})))
    group = shard.consumer_groups["g"]
    assert group.members["a"].member_epoch == 2 and group.members["a"].previous_member_epoch == 1
    rejoin = await send(shard, join("g", "a", TOPIC))
    assert rejoin.error_code == 0, rejoin.error_message
    assert rejoin.member_id == "a" and rejoin.member_epoch == 2
    assert assigned(topics, rejoin) == keep        # the full assignment, as to a joiner
    owners_ok(group)
    # An epoch it never had is still fenced.
    assert (await send(shard, beat("g", "a", 9))).error_code == \
        errors.FencedMemberEpochError.code


@run
async def test_a_member_that_rejoins_while_revoking_has_released_its_partitions() -> None:
    topics = Topics(orders=4)
    shard, _, _ = make_consumer_shard(topics)
    await send(shard, join("g", "a", TOPIC))
    await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: [0, 1, 2, 3]})))
    await send(shard, join("g", "b", TOPIC))
    a = await send(shard, beat("g", "a", 1, owned(topics, {TOPIC: [0, 1, 2, 3]})))
    keep = assigned(topics, a)
    group = shard.consumer_groups["g"]
    assert keep is not None and group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # a loses everything and rejoins: it owns nothing, so b may have its share now.
    rejoin = await send(shard, join("g", "a", TOPIC))
    assert rejoin.error_code == 0, rejoin.error_message
    b = await send(shard, beat("g", "b", 2, owned(topics, {})))
    got = assigned(topics, b)
    assert got is not None and sorted(got[TOPIC] + keep[TOPIC]) == [0, 1, 2, 3]
    owners_ok(group)
