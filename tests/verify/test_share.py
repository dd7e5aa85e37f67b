"""The share-group invariant (``kaflite.verify._share``) on hand-made histories.

A share group ``g`` of members c0 and c1 reads topic ``t`` (partition 0: values 0, 2,
4 at offsets 0-2; partition 1: 1, 3, 5), with acquisition locks of ``LOCK_S`` and a
delivery limit of ``LIMIT``, as the run's group configs say. Each test changes one
thing in a clean history and names the anomaly the checker must find.
"""

from __future__ import annotations

from typing import Any

import pytest

from kaflite.verify._share import check_share
from kaflite.verify.checker import CheckResult, check
from kaflite.verify.history import (
    Ack,
    Assign,
    Drain,
    Fault,
    Meta,
    Op,
    Phase,
    Poll,
    Send,
    Unseen,
)

LOCK_S, LIMIT = 4.0, 3
CONFIGS = {"share.record.lock.duration.ms": str(int(LOCK_S * 1000)),
           "share.delivery.count.limit": str(LIMIT)}
LOG = {0: [(0, 0), (1, 2), (2, 4)], 1: [(0, 1), (1, 3), (2, 5)]}


class Share:
    """A share-group history under construction, on a clock the test sets."""

    def __init__(self) -> None:
        self.ops: list[Op] = [Meta(time=0, process="test", config={
            "progress_bound": 10, "share_group_configs": CONFIGS})]
        for part, recs in LOG.items():
            for offset, value in recs:
                self.ops.append(Send(time=0.1, process="p0", type="invoke", topic="t",
                                     value=value))
                self.ops.append(Send(time=0.2, process="p0", type="ok", topic="t",
                                     value=value, partition=part, offset=offset))
        self.ops.append(Phase(time=0.3, process="run", name="healed"))

    def deliver(self, member: str, at: float, part: int, *offsets: int, count: int = 1,
                lock_until: float | None = None) -> Share:
        values = dict(LOG[part])
        self.ops.append(Poll(time=at, process=member, group="g", topic="t", partition=part,
                             records=tuple((o, values[o]) for o in offsets),
                             deliveries=(count,) * len(offsets),
                             lock_until=at + LOCK_S - 0.01 if lock_until is None
                             else lock_until, client=f"{member}.0"))
        return self

    def ack(self, member: str, at: float, part: int, *offsets: int, type: str = "accept",
            outcome: str = "ok", answered: float | None = None) -> Share:
        self.ops.append(Ack(time=at + 0.01 if answered is None else answered, process=member,
                            type=type, outcome=outcome, group="g", topic="t", partition=part,
                            offsets=offsets, invoked=at, client=f"{member}.0",
                            error="INVALID_RECORD_STATE" if outcome == "fail" else None))
        return self

    def close(self, member: str, at: float) -> Share:
        self.ops.append(Assign(time=at, process=member, type="close", group="g", topic="t",
                               partitions=(), client=f"{member}.0"))
        return self

    def fault(self, kind: str, start: float, end: float, process: str = "nemesis") -> Share:
        self.ops.append(Fault(time=end, process=process, fault=kind, start=start, end=end))
        return self

    def clean(self) -> Share:
        """c0 reads partition 0, c1 partition 1, each accepting all, but for offset 1 of
        partition 0: the tests' record."""
        self.deliver("c0", 1.0, 0, 0, 2).ack("c0", 1.1, 0, 0, 2)
        return self.deliver("c1", 1.0, 1, 0, 1, 2).ack("c1", 1.1, 1, 0, 1, 2)

    def history(self) -> list[Op]:
        ops = sorted(self.ops, key=lambda op: op.time)
        ops.append(Phase(time=90, process="run", name="writers-done", topic="t"))
        for part, recs in LOG.items():
            ops.append(Drain(time=91, process="drain", topic="t", partition=part,
                             isolation="read_uncommitted", records=tuple(recs),
                             end_offset=len(recs)))
        return ops

    def check(self) -> CheckResult:
        return check(self.history())


def found(result: CheckResult) -> dict[str, int]:
    return {k: n for k, n in result.counts.items() if n}


def example(result: CheckResult, kind: str) -> dict[str, Any]:
    return result.examples[kind][0]


def test_a_clean_share_history_is_valid() -> None:
    result = Share().clean().deliver("c0", 1.2, 0, 1).ack("c0", 1.3, 0, 1).check()
    assert result.valid, found(result)
    assert result.stats["share deliveries"] == 6
    assert result.stats["share accept ok"] == 6


def test_the_share_polls_are_not_judged_as_a_consumer_groups() -> None:
    """Members share partitions and get records back: no poll-skip, no unseen."""
    run = Share()
    run.deliver("c0", 1.0, 0, 0, 2).deliver("c1", 1.0, 0, 1)       # one partition, split
    run.ack("c0", 1.1, 0, 0, type="release").ack("c0", 1.1, 0, 2).ack("c1", 1.1, 0, 1)
    run.deliver("c1", 1.2, 0, 0, count=2).ack("c1", 1.3, 0, 0)      # given back, taken again
    run.deliver("c1", 1.5, 1, 0, 1, 2).ack("c1", 1.6, 1, 0, 1, 2)
    result = run.check()
    assert result.valid, found(result)
    assert result.stats["share redeliveries"] == 1


def test_a_record_delivered_to_a_second_member_while_the_first_held_it() -> None:
    run = Share().clean()
    run.deliver("c0", 2.0, 0, 1, count=2, lock_until=5.0)   # c0's, locked until 5.0
    run.deliver("c1", 3.0, 0, 1, count=3)                   # c1's too, at 3.0
    run.ack("c1", 3.1, 0, 1).ack("c0", 3.5, 0, 1, outcome="fail")
    result = run.check()
    assert found(result) == {"share-two-holders": 1}
    ex = example(result, "share-two-holders")
    assert (ex["first"], ex["second"], ex["offset"]) == ("c0.0", "c1.0", 1)


def test_a_record_taken_over_once_the_first_lock_expired_is_no_anomaly() -> None:
    run = Share().clean()
    run.deliver("c0", 2.0, 0, 1, count=2, lock_until=5.0)   # c0 stalls past its lock
    run.deliver("c1", 6.0, 0, 1, count=3).ack("c1", 6.1, 0, 1)
    run.ack("c0", 11.0, 0, 1, outcome="fail")               # its late ack is refused
    result = run.check()
    assert result.valid, found(result)
    assert result.stats["share taken over after a lock expired"] == 1


def test_an_overlap_a_cluster_fault_explains_is_counted_not_reported() -> None:
    """A leader that moves reloads the state without the locks (KIP-932)."""
    run = Share().clean()
    run.deliver("c0", 2.0, 0, 1, count=2, lock_until=5.0)
    run.fault("leader", 2.5, 2.5)
    run.deliver("c1", 3.0, 0, 1, count=2).ack("c1", 3.1, 0, 1)
    run.ack("c0", 3.5, 0, 1, outcome="fail")
    result = run.check()
    assert result.valid, found(result)
    assert result.stats["share overlaps in faults"] == 1


def test_a_member_that_closed_or_was_cut_let_its_records_go() -> None:
    for end in ("close", "cut"):
        run = Share().clean()
        run.deliver("c0", 2.0, 0, 1, count=2, lock_until=5.0)
        if end == "close":
            run.close("c0", 2.5)
        else:
            run.fault("member-cut", 2.5, 10.0, process="c0")
        run.deliver("c1", 3.0, 0, 1, count=3).ack("c1", 3.1, 0, 1)
        result = run.check()
        assert result.valid, (end, found(result))


def test_an_acknowledgement_from_a_member_that_no_longer_held_the_record() -> None:
    run = Share().clean()
    run.deliver("c0", 2.0, 0, 1, count=2, lock_until=5.0)
    run.deliver("c1", 6.0, 0, 1, count=3)                   # c0's lock had expired
    run.ack("c0", 7.0, 0, 1)                                # and yet c0's accept is taken
    run.ack("c1", 7.5, 0, 1, outcome="fail")
    result = run.check()
    assert found(result) == {"share-stale-ack": 1}
    assert example(result, "share-stale-ack")["but"] == "delivered to c1.0 at 6.000"


def test_a_lost_record() -> None:
    run = Share()
    run.deliver("c0", 1.0, 0, 0, 1).ack("c0", 1.1, 0, 0, 1)   # offset 2 never delivered
    run.deliver("c1", 1.0, 1, 0, 1, 2).ack("c1", 1.1, 1, 0, 1, 2)
    result = run.check()
    assert found(result) == {"share-lost": 1}
    assert (example(result, "share-lost")["offset"], example(result, "share-lost")["value"]) \
        == (2, 4)


def test_a_record_whose_accept_failed_and_never_came_back_is_lost() -> None:
    run = Share().clean()
    run.deliver("c0", 2.0, 0, 1, count=2).ack("c0", 2.1, 0, 1, type="release")
    run.deliver("c1", 2.5, 0, 1, count=3, lock_until=2.6).ack("c1", 9.0, 0, 1, outcome="fail")
    assert found(run.check()) == {}     # delivered LIMIT times: archived
    # refused while its lock may have held: perhaps taken before (sent again after a
    # connection dropped), so not known to be lost
    run = Share().clean().deliver("c0", 2.0, 0, 1).ack("c0", 2.1, 0, 1, outcome="fail")
    result = run.check()
    assert result.valid, found(result)
    assert result.stats["share finished, outcome unknown"] == 1
    # refused well after its lock ended, and never delivered again: lost
    run = Share().clean().deliver("c0", 2.0, 0, 1).ack("c0", 9.0, 0, 1, outcome="fail")
    result = run.check()
    assert found(result) == {"share-lost": 1}
    assert example(result, "share-lost")["acks"] == ["c0.0 accept fail"]


def test_records_released_up_to_the_limit_are_archived_not_lost() -> None:
    run = Share().clean()
    for n, member in enumerate(("c0", "c1", "c0")):
        run.deliver(member, 2.0 + n, 0, 1, count=n + 1).ack(member, 2.1 + n, 0, 1,
                                                             type="release")
    result = run.check()
    assert result.valid, found(result)
    assert result.stats["share archived at the limit"] == 1


def test_a_record_delivered_again_after_it_was_accepted() -> None:
    run = Share().clean().deliver("c0", 1.2, 0, 1).ack("c0", 1.3, 0, 1)
    run.deliver("c1", 3.0, 0, 2, count=2)      # accepted by c0 at 1.1, acquired after
    result = run.check()
    assert found(result) == {"share-redelivered": 1}
    assert example(result, "share-redelivered")["member"] == "c0.0"


def test_a_delivery_count_above_the_limit() -> None:
    run = Share()
    run.deliver("c0", 1.0, 0, 0, 1, 2, count=LIMIT + 1).ack("c0", 1.1, 0, 0, 1, 2)
    run.deliver("c1", 1.0, 1, 0, 1, 2).ack("c1", 1.1, 1, 0, 1, 2)
    assert found(run.check()) == {"share-delivery-limit": 3}


def test_the_checker_flags_two_holders_a_lost_and_a_redelivered_record_together() -> None:
    """The brief's history: each anomaly found, each by its name, so that an invariant
    that breaks fails here."""
    run = Share()
    run.deliver("c0", 1.0, 0, 0, lock_until=5.0)                   # offset 0: two holders
    run.deliver("c1", 2.0, 0, 0, count=2).ack("c1", 2.1, 0, 0)
    run.deliver("c0", 1.0, 0, 1, lock_until=5.0).ack("c0", 1.1, 0, 1)   # 1: accepted, then
    run.deliver("c1", 7.0, 0, 1, count=2).ack("c1", 7.1, 0, 1)          # delivered again
    run.deliver("c1", 1.0, 1, 0, 1, 2).ack("c1", 1.1, 1, 0, 1, 2)
    result = run.check()                                    # offset 2: never delivered
    assert found(result) == {"share-two-holders": 1, "share-redelivered": 1, "share-lost": 1}
    assert not result.valid
    findings, _ = check_share(run.history())
    assert sorted(f.kind for f in findings) == ["share-lost", "share-redelivered",
                                                "share-two-holders"]


def unseen(run: Share, member: str, at: float, part: int, *offsets: int) -> Share:
    run.ops.append(Unseen(time=at, process=member, group="g", topic="t", partition=part,
                          offsets=offsets, client=f"{member}.0", why="gave back"))
    return run


def test_deliveries_no_poll_shows_count_toward_the_limit() -> None:
    """A record released twice, then fetched by a member that lost its partition before
    handing it out: its third delivery, unseen, archived it."""
    run = Share().clean()
    run.deliver("c0", 2.0, 0, 1, count=1).ack("c0", 2.1, 0, 1, type="release")
    run.deliver("c1", 2.2, 0, 1, count=2).ack("c1", 2.3, 0, 1, type="release")
    assert found(run.check()) == {"share-lost": 1}
    result = unseen(run, "c0", 2.5, 0, 1).check()
    assert result.valid, found(result)
    assert result.stats["share archived at the limit"] == 1
    assert result.stats["share deliveries unseen"] == 1


def test_one_member_giving_a_record_back_again_and_again_counts_once() -> None:
    """The fault of seeds 6002 and 7002: a member that fetched a partition no longer its
    own, and gave its records back until the limit archived them."""
    run = Share().clean()
    run.deliver("c0", 2.0, 0, 1, count=1).ack("c0", 2.1, 0, 1, type="release")
    for n in range(3):
        unseen(run, "c1", 2.5 + n / 10, 0, 1)
    assert found(run.check()) == {"share-lost": 1}


def test_the_kaflite_share_consumers_events_name_what_it_never_handed_out() -> None:
    from kaflite.client.events import Event
    from kaflite.client.share._fetcher import offset_ranges
    from kaflite.verify.clients._kaflite import _unseen

    events = [Event(1.0, "share", f"gave back 5 buffered records of my-topic-3 (offsets "
                                  f"{offset_ranges([1, 2, 3, 7, 9])})"),
              Event(2.0, "share", "gave back 1 records of t-0, no longer assigned (offsets 4)"),
              Event(3.0, "share", "dropped 2 buffered records of t-1 (offsets 5-6): their "
                                  "acquisition lock ended before the application polled them"),
              Event(4.0, "share", "share session reset")]
    assert [(t, topic, part, offs) for t, topic, part, offs, _ in _unseen(events)] == [
        (1.0, "my-topic", 3, (1, 2, 3, 7, 9)), (2.0, "t", 0, (4,)), (3.0, "t", 1, (5, 6))]


def test_a_share_run_says_what_its_group_runs_with() -> None:
    from kaflite.verify._churn import CUT_S, STALL_S
    from kaflite.verify.runner import SHARE_GROUP_CONFIGS, RunConfig, run

    meta = RunConfig(group_protocol="share").meta()
    assert meta["share_group_configs"] == SHARE_GROUP_CONFIGS
    # the locks end within a stall or a cut, and the checker reads them from there
    assert int(SHARE_GROUP_CONFIGS["share.record.lock.duration.ms"]) < \
        min(STALL_S, CUT_S) * 1000
    assert "share_group_configs" not in RunConfig().meta()
    with pytest.raises(ValueError, match="queue workload"):
        run(RunConfig(workload="txn", group_protocol="share"))


@pytest.mark.parametrize("client", ["kaflite", "kaflite-sync"])
def test_unseen_records_outlive_the_clients_bounded_event_log(client: str) -> None:
    """A member that lives through a long run emits more events than its client keeps
    (``events.max``). The records it dropped early must still reach the history as
    unseen: read from the event log at close, they were gone, and a 30-minute soak
    reported 493 records that had been delivered three times as never delivered."""
    from kaflite.cluster import Cluster
    from kaflite.verify.clients import _kaflite as adapters
    from kaflite.verify.clients import factory

    original = adapters.share_config

    def small_log(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {**original(*args, **kwargs), "events.max": 3}

    dropped = ("dropped 2 buffered records of queue-1 (offsets 142735-142736): their "
               "acquisition lock ended before the application polled them")
    with Cluster(brokers=1) as cluster:
        f = factory(client)
        ctx = f.context()
        adapters.share_config = small_log
        try:
            member = f.share_consumer(ctx, cluster.bootstrap_servers, "m", "g",
                                      lambda *_: None)
        finally:
            adapters.share_config = original
        try:
            async_client = getattr(member.c, "_async", member.c)   # the sync façade's client
            emit = async_client._events.emit
            for kind, text in [("share", dropped)] + [("metadata", f"refresh {n}")
                                                      for n in range(10)]:  # more than it keeps
                if client == "kaflite":
                    ctx.call(emit, kind, text)
                else:
                    emit(kind, text)
            assert len(member.c.events()) == 3
            [(_, topic, partition, offsets, why)] = member.unseen()
            assert (topic, partition, offsets, why) == ("queue", 1, (142735, 142736), dropped)
        finally:
            member.close()
            ctx.close()
