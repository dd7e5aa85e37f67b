"""The two-owners invariant (``kaflite.verify._ownership``) on hand-made histories.

Built with test_checker's ``Run``: partition 0 of topic ``t`` in group ``g``, held by
c0 first, then given to c1. What decides is how c0 let go, and whether it acted on
the partition meanwhile.
"""

from __future__ import annotations

from kaflite.verify._expiry import TOLD_WITHIN_S
from kaflite.verify._ownership import check_ownership
from kaflite.verify.history import Fault, Removed, Subscribe
from tests.verify.test_checker import Run, found


def handover(c0_lets_go: str | None, *, c0_acts: bool = True, commit: bool = False) -> Run:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0)[:1])
    run.assign("c1", 0)                                   # c0 has not let go
    if c0_acts:
        run.poll("c0", 0, Run.log(0)[1:2])
        if commit:
            run.commit("c0", 0, 2)
    if c0_lets_go is not None:
        run.assign("c0", 0, type=c0_lets_go)
    run.poll("c1", 0, Run.log(0)[1:])
    return run.finish()


def test_a_member_that_acted_and_revoked_after_the_handover_is_two_owners() -> None:
    result = handover("revoke").check()
    assert found(result) == {"two-owners": 1}
    ex = result.examples["two-owners"][0]
    assert (ex["first"], ex["second"], ex["partition"], ex["first_let_go"]) == \
        ("c0", "c1", 0, "revoke")
    assert ex["first_did"] == ["polled 1"]


def test_a_member_never_told_until_it_closed_is_two_owners() -> None:
    assert found(handover("close").check()) == {"two-owners": 1}
    assert found(handover(None).check()) == {"two-owners": 1}


def test_a_commit_inside_the_overlap_counts_as_acting() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0))
    run.assign("c1", 0).commit("c0", 0, 3).assign("c0", 0, type="revoke")
    result = run.finish().check()
    assert found(result) == {"two-owners": 1}
    assert result.examples["two-owners"][0]["first_did"] == ["committed 3"]


def test_a_fenced_member_told_late_is_not_an_anomaly_but_is_counted() -> None:
    result = handover("lost").check()
    assert result.valid, found(result)
    assert result.stats["fenced overlaps"] == 1
    assert result.stats["longest fenced overlap (ms)"] > 0


def test_an_overlap_nobody_acted_on_is_harmless() -> None:
    assert handover("close", c0_acts=False).check().valid


def test_a_clean_handover_has_no_overlap() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0)[:1]).assign("c0", 0, type="revoke")
    run.assign("c1", 0).poll("c1", 0, Run.log(0)[1:])
    _, stats = check_ownership(run.finish().ops)
    assert "fenced overlaps" not in stats and "longest fenced overlap (ms)" not in stats
    assert stats["unowned beyond a rebalance"] == 0   # one tick between revoke and assign
    assert stats["longest unowned (ms)"] == 100
    assert run.check().valid


def test_a_partition_nobody_holds_for_long_while_members_live_is_counted() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0)[:1]).assign("c0", 0, type="revoke")
    run.t += 20.0                                         # 20 s: no rebalance takes that long
    run.assign("c1", 0).poll("c1", 0, Run.log(0)[1:])
    _, stats = check_ownership(run.finish().ops)
    assert stats["unowned beyond a rebalance"] == 1
    assert stats["longest unowned (ms)"] >= 20_000


def test_partitions_of_a_group_whose_members_all_left_are_not_unowned() -> None:
    run = Run.clean(reads=False)
    run.assign("c0", 0).poll("c0", 0, Run.log(0)).assign("c0", 0, type="close")
    run.t += 60.0
    run.assign("c1", 0).poll("c1", 0, Run.log(0)[6:])
    _, stats = check_ownership(run.finish().ops)
    assert stats.get("unowned beyond a rebalance", 0) == 0


def test_acting_after_the_second_owner_let_go_is_not_an_overlap() -> None:
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0)[:1])
    run.assign("c1", 0).assign("c1", 0, type="revoke")    # c1 let go before c0 acted
    run.poll("c0", 0, Run.log(0)[1:]).assign("c0", 0, type="revoke")
    assert run.finish().check().valid


def stalled_run(c1_absent: bool, cluster_down: bool = False) -> Run:
    """c0 lets partition 0 go; c1, the only other member, gets it 20 s later. With
    ``c1_absent`` c1 was stalled (or cut off) for those 20 s: nobody was there to
    take the partition, so the wait is not a stuck group. With ``cluster_down`` the
    whole cluster was down (the nemesis's ``crash``): nobody could give it to c1."""
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0)[:1]).assign("c0", 0, type="close")
    start = run.tick()
    run.t += 20.0
    if c1_absent:
        run.add(Fault(time=run.tick(), process="c1", fault="member-stall",
                      args={"member": "c1", "group": "g"}, start=start, end=run.t))
    if cluster_down:
        run.add(Fault(time=run.tick(), process="nemesis", fault="crash", args={},
                      start=start, end=run.t))
    run.assign("c1", 0).poll("c1", 0, Run.log(0)[1:])
    return run.finish()


def test_unowned_time_counts_only_while_a_member_was_there_to_take_it() -> None:
    _, stats = check_ownership(stalled_run(c1_absent=False).ops)
    assert stats["unowned beyond a rebalance"] == 1
    _, stats = check_ownership(stalled_run(c1_absent=True).ops)
    assert stats["unowned beyond a rebalance"] == 0
    assert stats["longest unowned (ms)"] < 1_000
    _, stats = check_ownership(stalled_run(c1_absent=False, cluster_down=True).ops)
    assert stats["unowned beyond a rebalance"] == 0
    assert stats["longest unowned (ms)"] < 1_000


# -- silent expiries (``kaflite.verify._expiry``) -------------------------------------------
def expired_run(c0_then: str, *, gap: float = 20.0, c0_client: str = "c0.0",
                cut_until: float | None = None) -> Run:
    """c0 (client ``c0_client``) holds partition 0; the coordinator removes client c0.0
    (its session expired); ``gap`` seconds later c0 does ``c0_then``: ``poll`` (it was
    never told), ``lost`` (it was), or ``poll-after-lost`` (told, then assigned again)."""
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0, client=c0_client).poll("c0", 0, Run.log(0)[:1])
    removed_at = run.tick()
    run.add(Removed(time=removed_at, process="c0", group="g", client="c0.0",
                    member_id="c0.0-abc", protocol="consumer", cause="the session expired"))
    if cut_until is not None:
        run.add(Fault(time=run.tick(), process="c0", fault="member-cut",
                      args={"member": "c0", "group": "g"}, start=removed_at - 1,
                      end=removed_at + cut_until))
    run.t += gap
    if c0_then == "poll":
        run.poll("c0", 0, Run.log(0)[1:2])
    else:
        run.assign("c0", 0, type="lost", client=c0_client)
        if c0_then == "poll-after-lost":
            run.assign("c0", 0, client="c0.1").poll("c0", 0, Run.log(0)[1:2])
            run.assign("c0", 0, type="revoke", client="c0.1")
    run.assign("c1", 0).poll("c1", 0, Run.log(0)[2:])    # the rest, by its new owner
    return run.finish()


def expiries(run: Run) -> tuple[list[dict[str, object]], dict[str, int]]:
    """The silent-expiry examples and the statistics of ``run``'s ownership check."""
    findings, stats = check_ownership(run.ops)
    assert {f.kind for f in findings} <= {"silent-expiry"}, findings
    return [f.example for f in findings], stats


def test_a_removed_member_that_goes_on_polling_untold_is_a_silent_expiry() -> None:
    silent, stats = expiries(expired_run("poll"))
    assert len(silent) == 1
    ex = silent[0]
    assert (ex["member"], ex["client"], ex["partition"], ex["cause"]) == \
        ("c0", "c0.0", 0, "the session expired")
    assert str(ex["then"]).startswith("polled 1 at ")
    assert stats["members removed"] == 1 and stats["removed holding partitions"] == 1
    assert found(expired_run("poll").check())["silent-expiry"] == 1   # an anomaly


def test_a_removed_member_that_let_go_was_told() -> None:
    for then in ("lost", "poll-after-lost"):
        silent, stats = expiries(expired_run(then))
        assert not silent, then
        assert stats["longest until told (ms)"] >= 20_000


def test_acting_soon_after_a_removal_is_not_yet_silent() -> None:
    # within TOLD_WITHIN_S its next heartbeat may not have come back yet
    assert expiries(expired_run("poll", gap=TOLD_WITHIN_S - 2))[0] == []


def test_the_clock_starts_when_a_cut_member_can_hear_again() -> None:
    # removed 1 s into a 30 s cut: 20 s after the removal it could not have been told
    assert expiries(expired_run("poll", cut_until=30.0))[0] == []
    assert len(expiries(expired_run("poll", gap=50.0, cut_until=30.0))[0]) == 1


def test_a_removal_of_the_consumer_a_process_had_before_does_not_count() -> None:
    # the coordinator removed c0.0, but c0 holds the partition with its next consumer c0.1
    silent, stats = expiries(expired_run("poll", c0_client="c0.1"))
    assert not silent and stats["removed holding partitions"] == 0


def dropped_topic_run(drop: bool) -> Run:
    """c0 subscribes to t and ``idle``, holds idle's partition 0, then (with ``drop``)
    subscribes to t alone and revokes it; 20 s later it closes."""
    run = Run.clean(reads=False)
    run.add(Subscribe(time=run.tick(), process="c0", group="g", topics=("t", "idle")))
    run.assign("c0", 0, 1).poll("c0", 0, Run.log(0)).poll("c0", 1, Run.log(1))
    run.assign("c0", 0, topic="idle")
    if drop:
        run.add(Subscribe(time=run.tick(), process="c0", group="g", topics=("t",)))
    run.assign("c0", 0, topic="idle", type="revoke")
    run.t += 20.0
    run.assign("c0", topic="idle", type="close").assign("c0", topic="t", type="close")
    return run.finish()


def test_a_topic_nobody_is_subscribed_to_is_not_unowned() -> None:
    _, stats = check_ownership(dropped_topic_run(drop=True).ops)
    assert stats["unowned beyond a rebalance"] == 0
    assert stats["subscription changes"] == 1
    _, stats = check_ownership(dropped_topic_run(drop=False).ops)   # still subscribed
    assert stats["unowned beyond a rebalance"] == 1
    assert "subscription changes" not in stats
