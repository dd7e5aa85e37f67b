"""The two-owners invariant (``kaflite.verify._ownership``) on hand-made histories.

Built with test_checker's ``Run``: partition 0 of topic ``t`` in group ``g``, held by
c0 first, then given to c1. What decides is how c0 let go, and whether it acted on
the partition meanwhile.
"""

from __future__ import annotations

from kaflite.verify._ownership import check_ownership
from kaflite.verify.history import Fault
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


def stalled_run(c1_absent: bool) -> Run:
    """c0 lets partition 0 go; c1, the only other member, gets it 20 s later. With
    ``c1_absent`` c1 was stalled (or cut off) for those 20 s: nobody was there to
    take the partition, so the wait is not a stuck group."""
    run = Run.clean(reads=False)
    run.assign("c1", 1).poll("c1", 1, Run.log(1))
    run.assign("c0", 0).poll("c0", 0, Run.log(0)[:1]).assign("c0", 0, type="close")
    start = run.tick()
    run.t += 20.0
    if c1_absent:
        run.add(Fault(time=run.tick(), process="c1", fault="member-stall",
                      args={"member": "c1", "group": "g"}, start=start, end=run.t))
    run.assign("c1", 0).poll("c1", 0, Run.log(0)[1:])
    return run.finish()


def test_unowned_time_counts_only_while_a_member_was_there_to_take_it() -> None:
    _, stats = check_ownership(stalled_run(c1_absent=False).ops)
    assert stats["unowned beyond a rebalance"] == 1
    _, stats = check_ownership(stalled_run(c1_absent=True).ops)
    assert stats["unowned beyond a rebalance"] == 0
    assert stats["longest unowned (ms)"] < 1_000
