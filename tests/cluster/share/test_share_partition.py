"""The share-partition state machine on a fake clock: acquisition, locks, acknowledgements."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.cluster.groups._timer import ManualTimer
from kaflite.cluster.share import AckType, Acquired, BatchSpan, RecordState, SharePartition
from kaflite.protocol import errors

LOCK = 30_000


def make(limit: int = 5, max_locks: int = 2000, start: int = 0) -> SharePartition:
    return SharePartition("g", "t", 0, ManualTimer(), lock_duration_ms=LOCK,
                          delivery_count_limit=limit, max_record_locks=max_locks,
                          start_offset=start)


def log(*spans: tuple[int, int]) -> list[BatchSpan]:
    return [BatchSpan(a, b) for a, b in spans]


def acquire_all(sp: SharePartition, member: str, end: int, n: int = 1000) -> list[Acquired]:
    return sp.acquire(member, log((sp.next_fetch_offset(), end - 1)), n)


def test_acquire_then_accept_moves_the_start_offset() -> None:
    sp = make()
    got = sp.acquire("a", log((0, 4), (5, 9)), 100)
    assert got == [Acquired(0, 9, 1)]
    assert sp.state_of(3) is RecordState.ACQUIRED and sp.holder(3) == "a"
    sp.acknowledge("a", 0, 4, [AckType.ACCEPT])
    assert sp.start == 5 and sp.end == 10
    assert sp.state_of(2) is RecordState.ARCHIVED   # before the SPSO: done with
    assert sp.check() == []


def test_other_member_records_are_not_given_twice() -> None:
    sp = make()
    sp.acquire("a", log((0, 9)), 100)
    assert sp.acquire("b", log((0, 9)), 100) == []
    assert sp.acquire("b", log((10, 14)), 100) == [Acquired(10, 14, 1)]


def test_lock_expiry_redelivers_with_a_higher_delivery_count() -> None:
    sp = make()
    timer = sp.timer
    assert isinstance(timer, ManualTimer)
    sp.acquire("a", log((0, 2)), 100)
    timer.advance(LOCK - 1)
    assert sp.state_of(0) is RecordState.ACQUIRED
    timer.advance(1)
    assert sp.state_of(0) is RecordState.AVAILABLE and sp.holder(0) is None
    assert sp.next_fetch_offset() == 0
    assert sp.acquire("b", log((0, 2)), 100) == [Acquired(0, 2, 2)]
    with pytest.raises(errors.InvalidRecordStateError):
        sp.acknowledge("a", 0, 0, [AckType.ACCEPT])     # a's lock is gone


def test_release_redelivers_and_reject_archives() -> None:
    sp = make()
    sp.acquire("a", log((0, 3)), 100)
    sp.acknowledge("a", 0, 3, [AckType.RELEASE, AckType.REJECT, AckType.ACCEPT, AckType.RELEASE])
    assert [sp.state_of(o) for o in range(4)] == [
        RecordState.AVAILABLE, RecordState.ARCHIVED, RecordState.ACKNOWLEDGED,
        RecordState.AVAILABLE]
    assert sp.start == 0
    got = sp.acquire("b", log((0, 3)), 100)
    assert got == [Acquired(0, 0, 2), Acquired(3, 3, 2)]
    sp.acknowledge("b", 0, 0, [AckType.ACCEPT])
    sp.acknowledge("b", 3, 3, [AckType.ACCEPT])
    assert sp.start == 4 and sp.records == {}


def test_delivery_count_limit_archives() -> None:
    sp = make(limit=3)
    for attempt in range(1, 4):
        assert sp.acquire("a", log((0, 0)), 100) == [Acquired(0, 0, attempt)]
        sp.acknowledge("a", 0, 0, [AckType.RELEASE])
    assert sp.state_of(0) is RecordState.ARCHIVED
    assert sp.start == 1
    assert sp.acquire("a", log((0, 0)), 100) == []


def test_lock_expiry_at_the_limit_archives() -> None:
    sp = make(limit=2)
    timer = sp.timer
    assert isinstance(timer, ManualTimer)
    for _ in range(2):
        assert sp.acquire("a", log((0, 1)), 100)
        timer.advance(LOCK)
    assert sp.start == 2 and sp.acquire("a", log((0, 1)), 100) == []


def test_renew_extends_the_lock() -> None:
    sp = make()
    timer = sp.timer
    assert isinstance(timer, ManualTimer)
    sp.acquire("a", log((0, 1)), 100)
    timer.advance(LOCK - 10)
    sp.acknowledge("a", 0, 0, [AckType.RENEW])
    timer.advance(20)
    assert sp.state_of(0) is RecordState.ACQUIRED     # renewed
    assert sp.state_of(1) is RecordState.AVAILABLE    # not renewed: expired
    timer.advance(LOCK)
    assert sp.state_of(0) is RecordState.AVAILABLE
    assert sp.delivery_count(0) == 1


def test_acknowledging_what_is_not_acquired_is_invalid_record_state() -> None:
    sp = make()
    sp.acquire("a", log((0, 4)), 100)
    with pytest.raises(errors.InvalidRecordStateError):
        sp.acknowledge("b", 0, 0, [AckType.ACCEPT])
    with pytest.raises(errors.InvalidRecordStateError):
        sp.acknowledge("a", 3, 7, [AckType.ACCEPT])     # 5..7 never acquired
    assert all(sp.state_of(o) is RecordState.ACQUIRED for o in range(5))   # all or nothing
    with pytest.raises(errors.InvalidRequestError):
        sp.acknowledge("a", 0, 4, [1, 1])                 # neither 1 nor 5 types
    with pytest.raises(errors.InvalidRequestError):
        sp.acknowledge("a", 0, 0, [9])
    with pytest.raises(errors.InvalidRecordStateError):
        sp.acknowledge("a", 0, 2**62, [1])                # far past what is in flight


def test_max_records_and_record_limit_mode() -> None:
    sp = make()
    # batch-optimized: whole batches until max_records is reached
    assert sp.acquire("a", log((0, 4), (5, 9)), 3) == [Acquired(0, 4, 1)]
    sp2 = make()
    assert sp2.acquire("a", log((0, 4), (5, 9)), 3, record_limit=True) == [Acquired(0, 2, 1)]
    assert sp2.next_fetch_offset() == 3


def test_max_record_locks_bounds_what_is_in_flight() -> None:
    sp = make(max_locks=100)
    got = sp.acquire("a", log((0, 149)), 1000)
    assert got == [Acquired(0, 99, 1)] and sp.end == 100
    assert sp.acquire("b", log((100, 149)), 1000) == []
    sp.acknowledge("a", 0, 9, [AckType.ACCEPT])
    assert sp.acquire("b", log((100, 149)), 1000) == [Acquired(100, 109, 1)]


def test_control_batches_and_gaps_are_never_delivered() -> None:
    sp = make()
    got = sp.acquire("a", [BatchSpan(0, 1), BatchSpan(2, 2, control=True), BatchSpan(5, 6)], 100)
    assert got == [Acquired(0, 1, 1), Acquired(5, 6, 1)]
    assert sp.state_of(2) is RecordState.ARCHIVED
    assert sp.state_of(3) is RecordState.ARCHIVED and sp.state_of(4) is RecordState.ARCHIVED
    with pytest.raises(errors.InvalidRecordStateError):
        sp.acknowledge("a", 0, 6, [AckType.ACCEPT])      # 2-4 were never delivered
    sp.acknowledge("a", 0, 6, [1, 1, 0, 0, 0, 1, 1])       # the client marks them as gaps
    assert sp.start == 7


def test_member_leaving_releases_and_state_round_trips() -> None:
    sp = make()
    sp.acquire("a", log((0, 3)), 100)
    sp.acknowledge("a", 1, 1, [AckType.ACCEPT])
    assert sp.release_member("a") == 3
    batches = sp.state_batches()
    again = make()
    again.restore(sp.start, batches, 1)
    assert [again.state_of(o) for o in range(4)] == [sp.state_of(o) for o in range(4)]
    assert [again.delivery_count(o) for o in range(4)] == [1, 1, 1, 1]
    assert again.next_fetch_offset() == 0


def test_acquired_records_are_persisted_as_available() -> None:
    sp = make()
    sp.acquire("a", log((0, 1)), 100)
    again = make()
    again.restore(sp.start, sp.state_batches(), 0)
    assert again.state_of(0) is RecordState.AVAILABLE and again.delivery_count(0) == 1


def test_a_record_restored_at_the_delivery_limit_is_archived_not_delivered_again() -> None:
    """Its last acquisition was written (AVAILABLE, with its count) and the leader moved
    before the holder acknowledged it: that delivery ended as a lock expiry ends one,
    and at the limit the record is archived. It used to be delivered once more, with a
    count past the limit (kaflite.verify share rounds, seeds 6002 and 6003)."""
    sp = make(limit=2)
    sp.acquire("a", log((0, 1)), 100)
    sp.acknowledge("a", 0, 1, [AckType.RELEASE])
    sp.acquire("b", log((0, 1)), 100)           # the second and last delivery
    again = make(limit=2)                        # the next leader
    again.restore(sp.start, sp.state_batches(), 0)
    assert again.delivery_count(0) == 2 and again.state_of(0) is RecordState.AVAILABLE
    assert again.acquire("c", log((0, 1), (2, 2)), 100) == [Acquired(2, 2, 1)]
    assert again.state_of(0) is RecordState.ARCHIVED and again.start == 2
    assert again.check() == []


OPS = st.lists(st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from("abc"), st.integers(1, 8), st.booleans()),
    st.tuples(st.just("ack"), st.sampled_from("abc"), st.integers(-2, 40), st.integers(0, 6),
              st.lists(st.integers(-1, 5), min_size=0, max_size=4)),
    st.tuples(st.just("advance"), st.integers(0, LOCK)),
    st.tuples(st.just("leave"), st.sampled_from("abc")),
), max_size=60)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_fuzzed_acknowledgements_keep_the_invariants(ops: list[tuple[object, ...]]) -> None:
    """Whatever members do, nothing crashes with anything but Kafka's errors, an acknowledged
    record is never handed out again, and the state stays consistent."""
    sp = make(limit=3, max_locks=100)
    timer = sp.timer
    assert isinstance(timer, ManualTimer)
    produced = 40
    accepted: set[int] = set()
    for op in ops:
        if op[0] == "acquire":
            _, member, size, limited = op
            assert isinstance(member, str) and isinstance(size, int) and isinstance(limited, bool)
            start = sp.next_fetch_offset()
            spans = [BatchSpan(o, min(o + 4, produced - 1)) for o in range(start, produced, 5)]
            for a in sp.acquire(member, spans, size, limited):
                assert not accepted & set(range(a.first, a.last + 1))
                assert 1 <= a.delivery_count <= 3
        elif op[0] == "ack":
            _, member, first, length, types = op
            assert isinstance(member, str) and isinstance(first, int)
            assert isinstance(length, int) and isinstance(types, list)
            before = {o: sp.state_of(o) for o in range(first, first + length + 1)}
            try:
                sp.acknowledge(member, first, first + length, types)
            except (errors.InvalidRecordStateError, errors.InvalidRequestError):
                assert {o: sp.state_of(o) for o in before} == before   # all or nothing
            else:
                kinds = types if len(types) > 1 else types * (length + 1)
                accepted.update(o for o, k in zip(range(first, first + length + 1), kinds,
                                                  strict=False) if k == AckType.ACCEPT)
        elif op[0] == "advance":
            assert isinstance(op[1], int)
            timer.advance(op[1])
        else:
            assert isinstance(op[1], str)
            sp.release_member(op[1])
        assert sp.check() == []
        for o in accepted:
            assert sp.state_of(o) in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


def test_a_requests_batches_are_applied_all_or_none() -> None:
    """One bad batch fails the partition's acknowledgements, and the good ones before it
    are not taken either (Kafka's SharePartition rolls a request's changes back): the
    member is told they failed, so the broker must not have taken them."""
    sp = make()
    acquire_all(sp, "m1", 4)                       # offsets 0-3, m1's
    sp.acknowledge("m1", 3, 3, [AckType.RELEASE])  # offset 3 is m1's no longer
    with pytest.raises(errors.InvalidRecordStateError):
        sp.acknowledge_all("m1", [(0, 1, [AckType.ACCEPT]), (3, 3, [AckType.ACCEPT])])
    assert [sp.state_of(o) for o in range(4)] == [RecordState.ACQUIRED] * 3 + [
        RecordState.AVAILABLE]
    assert sp.start == 0
    sp.acknowledge_all("m1", [(0, 1, [AckType.ACCEPT]), (2, 2, [AckType.REJECT])])
    assert sp.start == 3 and sp.state_of(3) is RecordState.AVAILABLE   # 0-2 done
