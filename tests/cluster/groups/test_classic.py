"""The classic group state machine on a fake clock (no broker, no network)."""

from __future__ import annotations

from kaflite.cluster.groups import GroupState
from kaflite.cluster.groups._records import GroupKey, decode_group_value, decode_key
from kaflite.protocol import errors
from kaflite.protocol.messages import leave_group_request as lgq

from .helpers import CTX, join_dynamic, join_req, make_shard, run, settle, subscription, sync_req

MEMBER_ID_REQUIRED = errors.MemberIdRequiredError.code
REBALANCE = errors.RebalanceInProgressError.code
ILLEGAL_GENERATION = errors.IllegalGenerationError.code
UNKNOWN_MEMBER = errors.UnknownMemberIdError.code


@run
async def test_kip394_member_id_required_then_join() -> None:
    shard, timer, log = make_shard()
    first = await shard.classic.join(CTX, join_req())
    assert first.error_code == MEMBER_ID_REQUIRED
    assert first.member_id.startswith("client-a-")
    group = shard.groups["g"]
    assert first.member_id in group.pending_members and not group.members
    # The new group is committed at once, as an empty GroupMetadata record.
    key, value = log.records[0]
    assert decode_key(key) == GroupKey("g") and value is not None
    assert decode_group_value(value).generation == 0

    fut = shard.classic.join(CTX, join_req("g", first.member_id))
    assert not fut.done() and group.state is GroupState.PREPARING_REBALANCE
    timer.advance(0)  # group.initial.rebalance.delay.ms = 0
    resp = fut.result()
    assert resp.error_code == 0 and resp.generation_id == 1
    assert resp.leader == first.member_id and resp.protocol_name == "range"
    assert [m.member_id for m in resp.members] == [first.member_id]
    assert bytes(resp.members[0].metadata) == subscription("orders")
    assert group.state is GroupState.COMPLETING_REBALANCE


@run
async def test_pending_member_expires_after_session_timeout() -> None:
    shard, timer, _ = make_shard()
    first = await shard.classic.join(CTX, join_req(session_ms=6000))
    timer.advance(5999)
    assert first.member_id in shard.groups["g"].pending_members
    timer.advance(1)
    assert first.member_id not in shard.groups["g"].pending_members
    late = await shard.classic.join(CTX, join_req("g", first.member_id))
    assert late.error_code == UNKNOWN_MEMBER


@run
async def test_old_join_versions_join_without_member_id_round_trip() -> None:
    shard, timer, _ = make_shard()
    from kaflite.cluster.groups import RequestContext

    fut = shard.classic.join(RequestContext("old", "/h", 3), join_req())
    timer.advance(0)
    resp = await fut
    assert resp.error_code == 0 and resp.member_id.startswith("old-")


@run
async def test_initial_rebalance_delay_waits_for_more_members() -> None:
    shard, timer, _ = make_shard(initial_rebalance_delay_ms=3000)
    f1 = await join_dynamic(shard)
    timer.advance(2000)
    f2 = await join_dynamic(shard)  # arrives within the delay: the delay is extended
    timer.advance(1000)
    assert not f1.done() and not f2.done()
    timer.advance(3000)
    r1, r2 = f1.result(), f2.result()
    assert r1.generation_id == r2.generation_id == 1
    assert {len(r1.members), len(r2.members)} == {0, 2}  # only the leader gets the members


@run
async def test_protocol_selection_by_votes_among_common_protocols() -> None:
    shard, timer, _ = make_shard()
    m = subscription("orders")
    futs = [await join_dynamic(shard, protocols=[("range", m), ("roundrobin", m)]),
            await join_dynamic(shard, protocols=[("range", m), ("roundrobin", m)]),
            await join_dynamic(shard, protocols=[("roundrobin", m), ("range", m)])]
    timer.advance(0)
    assert {f.result().protocol_name for f in futs} == {"range"}

    shard2, timer2, _ = make_shard()
    futs = [await join_dynamic(shard2, protocols=[("range", m), ("sticky", m)]),
            await join_dynamic(shard2, protocols=[("sticky", m)])]
    timer2.advance(0)
    assert {f.result().protocol_name for f in futs} == {"sticky"}  # the only common one


@run
async def test_inconsistent_group_protocol() -> None:
    shard, timer, _ = make_shard()
    f = await join_dynamic(shard)
    timer.advance(0)
    assert f.result().error_code == 0
    other_type = await shard.classic.join(CTX, join_req(protocol_type="connect"))
    assert other_type.error_code == errors.InconsistentGroupProtocolError.code
    no_common = await shard.classic.join(CTX, join_req(protocols=[("sticky", b"x")]))
    assert no_common.error_code == errors.InconsistentGroupProtocolError.code
    empty = await shard.classic.join(CTX, join_req("new", protocols=[]))
    assert empty.error_code == errors.InconsistentGroupProtocolError.code


@run
async def test_invalid_session_timeout_and_group_id() -> None:
    shard, _, _ = make_shard()
    low = await shard.classic.join(CTX, join_req(session_ms=5999))
    assert low.error_code == errors.InvalidSessionTimeoutError.code
    assert (await shard.classic.join(CTX, join_req(""))).error_code == \
        errors.InvalidGroupIdError.code
    unknown = await shard.classic.join(CTX, join_req("nope", "someone"))
    assert unknown.error_code == UNKNOWN_MEMBER


async def stable_group(n: int = 2, **kw: object) -> tuple:  # type: ignore[type-arg]
    shard, timer, log = make_shard(**kw)
    futs = [await join_dynamic(shard) for _ in range(n)]
    timer.advance(0)
    resps = [f.result() for f in futs]
    leader = next(r for r in resps if r.members)
    gen = leader.generation_id
    assignment = {r.member_id: f"assign-{r.member_id}".encode() for r in resps}
    syncs = [shard.classic.sync(sync_req("g", r.member_id, gen,
                                         assignment if r is leader else None)) for r in resps]
    await settle()
    for s, r in zip(syncs, resps, strict=True):
        assert s.result().error_code == 0
        assert bytes(s.result().assignment) == assignment[r.member_id]
    assert shard.groups["g"].state is GroupState.STABLE
    return shard, timer, log, [r.member_id for r in resps], gen


@run
async def test_sync_waits_for_leader_and_its_write() -> None:
    shard, timer, log = make_shard()
    f1, f2 = await join_dynamic(shard), await join_dynamic(shard)
    timer.advance(0)
    r1, r2 = f1.result(), f2.result()
    leader, follower = (r1, r2) if r1.members else (r2, r1)
    s_follower = shard.classic.sync(sync_req("g", follower.member_id, 1))
    await settle()
    assert not s_follower.done()
    log.hold = True
    s_leader = shard.classic.sync(sync_req("g", leader.member_id, 1,
                                           {leader.member_id: b"L", follower.member_id: b"F"}))
    await settle()
    assert not s_leader.done()  # not before the GroupMetadata record is committed
    log.release()
    await settle()
    assert bytes(s_leader.result().assignment) == b"L"
    assert bytes(s_follower.result().assignment) == b"F"
    assert s_follower.result().protocol_name == "range"
    value = decode_group_value(log.records[-1][1] or b"")
    assert value.generation == 1 and value.leader == leader.member_id
    assert {m.member_id: bytes(m.assignment) for m in value.members} == \
        {leader.member_id: b"L", follower.member_id: b"F"}


@run
async def test_failed_assignment_write_sends_everyone_back_to_join() -> None:
    shard, timer, log = make_shard()
    f1, f2 = await join_dynamic(shard), await join_dynamic(shard)
    timer.advance(0)
    r1, r2 = f1.result(), f2.result()
    leader, follower = (r1, r2) if r1.members else (r2, r1)
    s_follower = shard.classic.sync(sync_req("g", follower.member_id, 1))
    log.error = errors.NotCoordinatorError.code
    s_leader = shard.classic.sync(sync_req("g", leader.member_id, 1, {}))
    await settle()
    assert s_leader.result().error_code == errors.NotCoordinatorError.code
    assert s_follower.result().error_code == errors.NotCoordinatorError.code
    assert shard.groups["g"].state is GroupState.PREPARING_REBALANCE


@run
async def test_heartbeat_errors_where_kafka_returns_them() -> None:
    shard, _timer, _, members, gen = await stable_group(2)
    a, b = members
    hb = shard.classic.heartbeat
    assert hb("g", a, None, gen) == 0
    assert hb("g", a, None, gen + 1) == ILLEGAL_GENERATION
    assert hb("g", "ghost", None, gen) == UNKNOWN_MEMBER
    assert hb("nope", a, None, gen) == UNKNOWN_MEMBER
    # A third member triggers a rebalance: the others learn it from their heartbeat.
    f3 = await join_dynamic(shard)
    assert shard.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert hb("g", a, None, gen) == REBALANCE
    # Sync during the rebalance, commits keep working with the old generation.
    assert (await shard.classic.sync(sync_req("g", b, gen))).error_code == REBALANCE
    rejoin_a = shard.classic.join(CTX, join_req("g", a))
    rejoin_b = shard.classic.join(CTX, join_req("g", b))
    await settle()
    for f in (f3, rejoin_a, rejoin_b):
        assert f.result().generation_id == gen + 1
    assert hb("g", a, None, gen) == ILLEGAL_GENERATION
    assert hb("g", a, None, gen + 1) == 0  # CompletingRebalance: a normal heartbeat


@run
async def test_session_timeout_removes_member_and_rebalances() -> None:
    shard, timer, _, members, gen = await stable_group(2)
    a, b = members
    timer.advance(9000)
    assert shard.classic.heartbeat("g", a, None, gen) == 0
    group = shard.groups["g"]
    assert b in group.members
    timer.advance(1000)  # b never heartbeated: its 10 s session runs out now
    assert b not in group.members
    assert shard.classic.heartbeat("g", a, None, gen) == REBALANCE
    assert group.state is GroupState.PREPARING_REBALANCE
    assert shard.classic.heartbeat("g", b, None, gen) == UNKNOWN_MEMBER
    fut = shard.classic.join(CTX, join_req("g", a))
    await settle()
    resp = fut.result()
    assert resp.generation_id == gen + 1 and [m.member_id for m in resp.members] == [a]


@run
async def test_rebalance_timeout_drops_members_that_do_not_rejoin() -> None:
    shard, timer, _, members, gen = await stable_group(2)
    a, b = members
    fut = shard.classic.join(CTX, join_req("g", a, rebalance_ms=20_000))  # a triggers it
    await settle()
    assert not fut.done()
    for _ in range(4):  # b keeps its session alive but never rejoins
        timer.advance(8000)
        if not fut.done():
            assert shard.classic.heartbeat("g", b, None, gen) == REBALANCE
    # The group waited for the largest rebalance timeout (b's 30 s), not a's 20 s.
    resp = fut.result()
    assert resp.generation_id == gen + 1
    assert [m.member_id for m in resp.members] == [a]
    assert b not in shard.groups["g"].members


@run
async def test_members_without_sync_are_removed_after_rebalance_timeout() -> None:
    shard, timer, _ = make_shard()
    kw = {"rebalance_ms": 10_000, "session_ms": 60_000}
    f1, f2 = await join_dynamic(shard, **kw), await join_dynamic(shard, **kw)
    timer.advance(0)
    r1, r2 = f1.result(), f2.result()
    leader = r1 if r1.members else r2
    s = shard.classic.sync(sync_req("g", leader.member_id, 1, {}))
    await settle()
    assert s.result().error_code == 0
    timer.advance(9_999)
    assert len(shard.groups["g"].members) == 2
    timer.advance(1)
    group = shard.groups["g"]
    assert set(group.members) == {leader.member_id}
    assert group.state is GroupState.PREPARING_REBALANCE


@run
async def test_leave_group_batch() -> None:
    shard, _timer, _, members, gen = await stable_group(3)
    a, b, c = members
    top, results = shard.classic.leave("g", [
        lgq.MemberIdentity(member_id=a), lgq.MemberIdentity(member_id="ghost"),
        lgq.MemberIdentity(member_id=b)])
    assert top == 0
    assert [r.error_code for r in results] == [0, UNKNOWN_MEMBER, 0]
    group = shard.groups["g"]
    assert set(group.members) == {c} and group.state is GroupState.PREPARING_REBALANCE
    top, _ = shard.classic.leave("nope", [lgq.MemberIdentity(member_id=a)])
    assert top == UNKNOWN_MEMBER
    # The last member leaving empties the group (and a record says so).
    shard.classic.leave("g", [lgq.MemberIdentity(member_id=c)])
    assert group.state is GroupState.EMPTY and group.generation_id == gen + 1


@run
async def test_static_member_rejoin_fences_old_id_without_rebalance() -> None:
    shard, timer, log = make_shard()
    fut = shard.classic.join(CTX, join_req(instance_id="i-1"))
    timer.advance(0)
    first = await fut
    assert first.error_code == 0 and first.member_id.startswith("i-1-")
    await shard.classic.sync(sync_req("g", first.member_id, 1, {first.member_id: b"A"}, "i-1"))
    group = shard.groups["g"]
    assert group.state is GroupState.STABLE
    # The same instance restarts: it joins with no member id and gets a new one.
    again = await shard.classic.join(CTX, join_req(instance_id="i-1"))
    assert again.error_code == 0 and again.member_id != first.member_id
    assert again.generation_id == 1 and group.state is GroupState.STABLE  # no rebalance
    assert again.skip_assignment  # v9: the leader keeps its assignment
    # The old incarnation is fenced.
    assert shard.classic.heartbeat("g", first.member_id, "i-1", 1) == \
        errors.FencedInstanceIdError.code
    assert shard.classic.heartbeat("g", again.member_id, "i-1", 1) == 0
    sync = await shard.classic.sync(sync_req("g", again.member_id, 1, None, "i-1"))
    assert bytes(sync.assignment) == b"A"
    value = decode_group_value(log.records[-1][1] or b"")
    assert [(m.member_id, m.group_instance_id) for m in value.members] == \
        [(again.member_id, "i-1")]


@run
async def test_cooperative_two_rebalances_in_a_row() -> None:
    """KIP-429 is client-driven: revoke, rejoin, and the coordinator just runs again."""
    shard, _timer, _, members, _gen = await stable_group(2)
    a, b = members
    f3 = await join_dynamic(shard)
    fa = shard.classic.join(CTX, join_req("g", a))
    fb = shard.classic.join(CTX, join_req("g", b))
    await settle()
    gen2 = f3.result().generation_id
    leader = next(f.result() for f in (f3, fa, fb) if f.result().members)
    syncs = [shard.classic.sync(sync_req("g", f.result().member_id, gen2,
                                         {} if f.result() is not leader else None))
             for f in (f3, fa, fb)]
    await settle()
    assert all(s.result().error_code == 0 for s in syncs)
    # Members that revoked partitions rejoin at once, their subscription now listing
    # fewer owned partitions (new metadata): a second rebalance follows.
    owned = [("range", subscription("orders") + b"-owned-after-revoke")]
    again = [shard.classic.join(CTX, join_req("g", f.result().member_id, protocols=owned))
             for f in (f3, fa, fb)]
    await settle()
    assert {f.result().generation_id for f in again} == {gen2 + 1}


@run
async def test_unload_answers_parked_requests_not_coordinator() -> None:
    shard, _timer, _ = make_shard(initial_rebalance_delay_ms=3000)
    fut = await join_dynamic(shard)
    shard.close()
    assert (await fut).error_code == errors.NotCoordinatorError.code
    assert shard.groups["g"].state is GroupState.DEAD


@run
async def test_group_max_size() -> None:
    shard, timer, _ = make_shard(max_size=1)
    f1 = await join_dynamic(shard)
    timer.advance(0)
    assert f1.result().error_code == 0
    second = await shard.classic.join(CTX, join_req())
    assert second.error_code == errors.GroupMaxSizeReachedError.code
    assert len(shard.groups["g"].members) == 1
