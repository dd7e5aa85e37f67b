"""Offsets: commit validation, fetch, delete, group deletion and expiry (fake clock)."""

from __future__ import annotations

from typing import Any

from kaflite.cluster.groups import GroupState
from kaflite.cluster.groups._records import GroupKey, OffsetKey, decode_key, decode_offset_value
from kaflite.protocol import errors
from kaflite.protocol.messages import TxnOffsetCommitRequest
from kaflite.protocol.messages import txn_offset_commit_request as toq

from .helpers import TOPIC, commit_req, join_dynamic, make_shard, run, settle, sync_req

MINUTE = 60_000


@run
async def test_simple_consumer_commit_and_fetch() -> None:
    shard, timer, log = make_shard()
    om = shard.offset_manager
    result = await om.commit(commit_req(offsets={0: 10, 1: 20}), 8)
    assert result == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    assert shard.groups["g"].state is GroupState.EMPTY  # a "simple" group was created
    assert [decode_key(k) for k, _ in log.records] == [OffsetKey("g", TOPIC, 0),
                                                      OffsetKey("g", TOPIC, 1)]
    stored = decode_offset_value(log.records[0][1] or b"")
    assert (stored.offset, stored.leader_epoch, stored.metadata) == (10, 3, "m")
    assert stored.commit_timestamp == timer.now_ms() and stored.expire_timestamp == -1
    [(topic, parts)] = om.fetch("g", None)
    assert topic == TOPIC and [(p, o.offset if o else None) for p, o in parts] == [(0, 10), (1, 20)]
    [(_, parts)] = om.fetch("g", [(TOPIC, [1, 7])])
    assert [(p, o.offset if o else None) for p, o in parts] == [(1, 20), (7, None)]
    assert om.fetch("unknown", None) == []


@run
async def test_commit_is_visible_only_once_written() -> None:
    shard, _, log = make_shard()
    log.hold = True
    om = shard.offset_manager
    import asyncio

    task = asyncio.ensure_future(om.commit(commit_req(offsets={0: 5}), 8))
    await settle()
    assert om.fetch("g", [(TOPIC, [0])])[0][1][0][1] is None
    log.release()
    assert await task == {(TOPIC, 0): 0}
    assert om.fetch("g", [(TOPIC, [0])])[0][1][0][1] is not None


@run
async def test_commit_errors() -> None:
    shard, _timer, log = make_shard()
    om = shard.offset_manager
    assert await om.commit(commit_req(topic="nope"), 8) == \
        {("nope", 0): errors.UnknownTopicOrPartitionError.code}
    assert await om.commit(commit_req(metadata="x" * 5000), 8) == \
        {(TOPIC, 0): errors.OffsetMetadataTooLargeError.code}
    # A member commit to a group that does not exist.
    assert await om.commit(commit_req("other", generation=1, member="m"), 8) == \
        {(TOPIC, 0): errors.IllegalGenerationError.code}
    assert await om.commit(commit_req("other", generation=1, member="m"), 9) == \
        {(TOPIC, 0): errors.GroupIdNotFoundError.code}
    log.error = errors.NotCoordinatorError.code
    assert await om.commit(commit_req(), 8) == {(TOPIC, 0): errors.NotCoordinatorError.code}


@run
async def test_member_commit_validation() -> None:
    shard, timer, _log = make_shard()
    om = shard.offset_manager
    f = await join_dynamic(shard)
    timer.advance(0)
    me = f.result().member_id
    # CompletingRebalance: the member has no assignment yet.
    assert await om.commit(commit_req(member=me, generation=1), 8) == \
        {(TOPIC, 0): errors.RebalanceInProgressError.code}
    await shard.classic.sync(sync_req("g", me, 1, {me: b""}))
    await settle()
    assert await om.commit(commit_req(member=me, generation=1), 8) == {(TOPIC, 0): 0}
    assert await om.commit(commit_req(member=me, generation=0), 8) == \
        {(TOPIC, 0): errors.IllegalGenerationError.code}
    assert await om.commit(commit_req(member="ghost", generation=1), 8) == \
        {(TOPIC, 0): errors.UnknownMemberIdError.code}
    # A simple (generation -1) commit is refused while the group has members.
    assert await om.commit(commit_req(), 8) == {(TOPIC, 0): errors.UnknownMemberIdError.code}
    # The commit kept the member's session alive.
    timer.advance(9000)
    assert await om.commit(commit_req(member=me, generation=1), 8) == {(TOPIC, 0): 0}
    timer.advance(9000)
    assert me in shard.groups["g"].members


@run
async def test_offset_delete() -> None:
    shard, timer, log = make_shard()
    om = shard.offset_manager
    await om.commit(commit_req(offsets={0: 1, 1: 2}), 8)
    top, result = await om.delete_offsets("g", [(TOPIC, [0, 5])])
    assert top == 0 and result == {(TOPIC, 0): 0, (TOPIC, 5): 0}
    assert log.records[-1] == (log.records[0][0], None)  # a tombstone for partition 0
    assert [p for p, _ in om.fetch("g", None)[0][1]] == [1]
    assert (await om.delete_offsets("nope", []))[0] == errors.GroupIdNotFoundError.code
    # A consumer group may not lose offsets of topics it subscribes to.
    f = await join_dynamic(shard, group="busy")
    timer.advance(0)
    me = f.result().member_id
    await shard.classic.sync(sync_req("busy", me, 1, {me: b""}))
    await settle()
    await om.commit(commit_req("busy", member=me, generation=1), 8)
    top, result = await om.delete_offsets("busy", [(TOPIC, [0]), ("other", [0])])
    assert top == 0
    assert result == {(TOPIC, 0): errors.GroupSubscribedToTopicError.code, ("other", 0): 0}


@run
async def test_delete_groups() -> None:
    shard, timer, log = make_shard()
    om = shard.offset_manager
    await om.commit(commit_req("empty", offsets={0: 1, 1: 1}), 8)
    f = await join_dynamic(shard, group="busy")
    timer.advance(0)
    assert f.result().error_code == 0
    before = len(log.records)
    result = await om.delete_groups(["empty", "busy", "nope", ""])
    assert result == {"empty": 0, "busy": errors.NonEmptyGroupError.code,
                      "nope": errors.GroupIdNotFoundError.code,
                      "": errors.InvalidGroupIdError.code}
    written = [(decode_key(k), v) for k, v in log.records[before:]]
    assert written == [(OffsetKey("empty", TOPIC, 0), None), (OffsetKey("empty", TOPIC, 1), None),
                       (GroupKey("empty"), None)]
    assert "empty" not in shard.groups and om.fetch("empty", None) == []


@run
async def test_delete_group_write_failure_restores_it() -> None:
    shard, _, log = make_shard()
    om = shard.offset_manager
    await om.commit(commit_req("g"), 8)
    log.error = errors.NotCoordinatorError.code
    assert await om.delete_groups(["g"]) == {"g": errors.NotCoordinatorError.code}
    assert shard.groups["g"].state is GroupState.EMPTY
    assert om.fetch("g", None)[0][1][0][1] is not None


@run
async def test_expiry_of_simple_and_empty_groups() -> None:
    shard, timer, log = make_shard(retention_ms=10 * MINUTE)
    om = shard.offset_manager
    await om.commit(commit_req("simple", offsets={0: 1}), 8)
    timer.advance(5 * MINUTE)
    await om.commit(commit_req("simple", offsets={1: 1}), 8)
    # An explicit retention (OffsetCommit v2-v4) expires on its own clock.
    await om.commit(commit_req("short", offsets={0: 1}, retention_ms=MINUTE), 4)
    assert decode_offset_value(log.records[-1][1] or b"").expire_timestamp == \
        timer.now_ms() + MINUTE
    timer.advance(2 * MINUTE)
    assert await om.expire() == 1  # "short"
    assert "short" not in shard.groups  # no offsets left, no members: deleted
    timer.advance(3 * MINUTE)
    assert await om.expire() == 1  # simple/0 is 10 minutes old
    assert [p for p, _ in om.fetch("simple", None)[0][1]] == [1]
    timer.advance(5 * MINUTE)
    assert await om.expire() == 1
    assert "simple" not in shard.groups
    assert decode_key(log.records[-1][0]) == GroupKey("simple") and log.records[-1][1] is None


@run
async def test_consumer_group_offsets_expire_once_empty_for_the_retention() -> None:
    shard, timer, _log = make_shard(retention_ms=10 * MINUTE)
    om = shard.offset_manager
    f = await join_dynamic(shard, session_ms=60_000)
    timer.advance(0)
    me = f.result().member_id
    await shard.classic.sync(sync_req("g", me, 1, {me: b""}))
    await settle()
    await om.commit(commit_req(member=me, generation=1), 8)
    timer.advance(30 * MINUTE // 60)  # 30 s: still a member, nothing expires
    assert await om.expire() == 0
    from kaflite.protocol.messages import leave_group_request as lgq

    shard.classic.leave("g", [lgq.MemberIdentity(member_id=me)])
    assert shard.groups["g"].state is GroupState.EMPTY
    timer.advance(10 * MINUTE - 1)
    assert await om.expire() == 0  # counted from the moment the group became Empty
    timer.advance(1)
    assert await om.expire() == 1
    assert "g" not in shard.groups


@run
async def test_txn_offset_commit_without_member_fields_is_accepted_by_a_group_with_members(
) -> None:
    """TxnOffsetCommit v0-v2 carry no member id or generation (kafkajs sends only those):
    Kafka accepts them whatever the group's state. kaflite answered UNKNOWN_MEMBER_ID
    while the group had members, so every kafkajs ``sendOffsets`` aborted its
    transaction (found by ``python -m kaflite.verify --client kafkajs --workload txn
    --nemesis none --seconds 10 --seed 1``)."""
    shard, timer, _log = make_shard()
    f = await join_dynamic(shard)
    timer.advance(0)
    me = f.result().member_id
    assert shard.groups["g"].members        # CompletingRebalance, with a member
    written: list[int] = []

    async def write_txn(records: list[Any], producer_id: int, producer_epoch: int) -> int:
        written.append(producer_id)
        return 0

    shard.txn_offsets.write = write_txn     # the shard's log, written transactionally

    def txn_req(member: str = "", generation: int = -1) -> TxnOffsetCommitRequest:
        return TxnOffsetCommitRequest(
            transactional_id="t", group_id="g", producer_id=7, producer_epoch=0,
            generation_id_or_member_epoch=generation, member_id=member,
            topics=[toq.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                toq.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])

    assert await shard.txn_offsets.commit(txn_req()) == {(TOPIC, 0): 0}
    await shard.classic.sync(sync_req("g", me, 1, {me: b""}))
    await settle()
    assert await shard.txn_offsets.commit(txn_req()) == {(TOPIC, 0): 0}
    # With member fields they are still checked.
    assert await shard.txn_offsets.commit(txn_req("ghost", 1)) == \
        {(TOPIC, 0): errors.UnknownMemberIdError.code}
    assert await shard.txn_offsets.commit(txn_req(me, 0)) == \
        {(TOPIC, 0): errors.IllegalGenerationError.code}
    assert await shard.txn_offsets.commit(txn_req(me, 1)) == {(TOPIC, 0): 0}
    assert written == [7, 7, 7]


@run
async def test_txn_offset_commit_to_a_kip848_group() -> None:
    """TxnOffsetCommit to a consumer (KIP-848) group is checked against that group (member
    and member epoch; a stale epoch is ILLEGAL_GENERATION, as Kafka's
    validateTransactionalOffsetCommit says), and its transaction's commit makes no classic
    group of the same id. It did: every later commit of the group was then checked against
    that empty classic group and refused, for ever (franz-go's TestTxnEtl, KIP-848 cases,
    hung)."""
    from tests.cluster.groups.consumer_helpers import Topics, join, make_consumer_shard, send

    topics = Topics(**{TOPIC: 2})
    shard, _timer, _log = make_consumer_shard(topics)
    joined = await send(shard, join("g", "m1", TOPIC))
    epoch = joined.member_epoch
    written: list[int] = []

    async def write_txn(records: list[Any], producer_id: int, producer_epoch: int) -> int:
        written.append(producer_id)
        return 0

    shard.txn_offsets.write = write_txn

    def txn_req(member: str, generation: int, group: str = "g") -> TxnOffsetCommitRequest:
        return TxnOffsetCommitRequest(
            transactional_id="t", group_id=group, producer_id=7, producer_epoch=0,
            generation_id_or_member_epoch=generation, member_id=member,
            topics=[toq.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                toq.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=5)])])

    ok = {(TOPIC, 0): 0}
    assert await shard.txn_offsets.commit(txn_req("m1", epoch)) == ok
    shard.txn_offsets.complete(7, committed=True)
    assert "g" not in shard.groups                       # no classic twin
    assert shard.offsets["g"][(TOPIC, 0)].offset == 5
    assert await shard.txn_offsets.commit(txn_req("m1", epoch)) == ok      # and again
    assert await shard.txn_offsets.commit(txn_req("", -1)) == ok           # v0-v2 fields
    assert await shard.txn_offsets.commit(txn_req("ghost", epoch)) == \
        {(TOPIC, 0): errors.UnknownMemberIdError.code}
    assert await shard.txn_offsets.commit(txn_req("m1", epoch + 1)) == \
        {(TOPIC, 0): errors.IllegalGenerationError.code}
    # m1 was given partition 0 at its first epoch; an older epoch stands for nothing, and the
    # partition's refusal is ILLEGAL_GENERATION too (Kafka 4.4's per-partition check).
    assert shard.consumer.bump_epoch("g") == 1
    assert await shard.txn_offsets.commit(txn_req("m1", epoch)) == \
        {(TOPIC, 0): errors.IllegalGenerationError.code}
    # no group of any kind: a generation is refused, none makes a simple group
    assert await shard.txn_offsets.commit(txn_req("m", 3, "none")) == \
        {(TOPIC, 0): errors.IllegalGenerationError.code}
    assert await shard.txn_offsets.commit(txn_req("", -1, "simple")) == ok
    assert written == [7, 7, 7, 7]
