"""One share-partition: a share group's view of one topic partition (KIP-932).

Theory of operation
-------------------
The leader of a topic partition keeps, for every share group reading it, the
state Kafka's ``SharePartition`` keeps:

* the **share-partition start offset** (SPSO): every record before it is done
  with (acknowledged or archived) and forgotten;
* the **end offset** (``end``, Kafka's SPEO plus one): the next offset never
  handed out yet; the records in ``[start, end)`` are *in flight*;
* for each in-flight offset its state, AVAILABLE, ACQUIRED, ACKNOWLEDGED or
  ARCHIVED (Kafka's ``RecordState``: 0, 1, 2, 4), its delivery count, and, while
  acquired, the member holding it and the deadline of its acquisition lock.

``acquire`` hands a member the AVAILABLE records first (in offset order), then
new ones from ``end``; each acquisition increments the delivery count and takes
a lock for ``record_lock_duration_ms``. Acknowledgements move ACQUIRED records
(of that member only, else INVALID_RECORD_STATE): ACCEPT to ACKNOWLEDGED,
REJECT to ARCHIVED, RELEASE back to AVAILABLE, RENEW (KIP-1222) keeps them with
a fresh lock, GAP (a hole in a compacted log) to ARCHIVED. A lock that expires,
or a member whose session ends, releases its records as RELEASE does. A record
released once it has been delivered ``delivery_count_limit`` times is ARCHIVED
instead: it is never delivered again, nor is one found AVAILABLE at the limit
(its last lock lost with a leader that moved: the state written at its acquisition
holds it as AVAILABLE with its count). The SPSO then moves past every leading
ACKNOWLEDGED or ARCHIVED record.

No more than ``max_record_locks`` records are in flight at once (Kafka's
``group.share.partition.max.record.locks``): past that, ``acquire`` hands out
only redeliveries until the SPSO moves.

The state is pure: time comes from a ``Timer`` (a fake clock in unit tests),
and every change is reported to ``on_change`` so the owner can persist it
(``__share_group_state``, see ``_persister``).
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kaflite.cluster.groups._timer import Timer
from kaflite.protocol import errors

__all__ = [
    "AckType",
    "Acquired",
    "BatchSpan",
    "InFlightRecord",
    "RecordState",
    "SharePartition",
    "ShareSnapshot",
    "StateBatch",
]


class RecordState(enum.IntEnum):
    """Kafka's ``RecordState`` ids (also the ``DeliveryState`` of ShareSnapshot batches)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4

    def __str__(self) -> str:
        return self.name


class AckType(enum.IntEnum):
    """The AcknowledgeTypes of ShareFetch and ShareAcknowledge."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3
    RENEW = 4  # KIP-1222, ShareFetch/ShareAcknowledge v2


@dataclass(frozen=True)
class BatchSpan:
    """A batch of the log as the share-partition sees it: its offsets, and whether it is a
    control batch (a transaction marker, never delivered)."""

    first: int
    last: int
    control: bool = False


@dataclass(frozen=True)
class Acquired:
    """One AcquiredRecords entry of a ShareFetch response."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets with one state and delivery count (ShareSnapshot's StateBatches)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True)
class InFlightRecord:
    """One in-flight record as a tool sees it: its state, how many times it has been
    delivered, and while ACQUIRED the member holding it and how long its lock has left."""

    offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None = None
    lock_remaining_ms: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"offset": self.offset, "state": self.state.name.lower(),
                "delivery_count": self.delivery_count, "member_id": self.member_id,
                "lock_remaining_ms": self.lock_remaining_ms}


@dataclass(frozen=True)
class ShareSnapshot:
    """A read-only copy of a share-partition's in-flight window ``[start_offset,
    end_offset)``: the count of records in each state over the whole window, and the first
    records of it (``records``, at most the limit asked for). ``live``: taken from the
    leader's share-partition; otherwise from the persisted state (``__share_group_state``),
    where no record is acquired (a lock does not outlive its leader)."""

    group_id: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    state_epoch: int
    delivery_count_limit: int
    counts: dict[RecordState, int]
    records: tuple[InFlightRecord, ...]
    live: bool

    @property
    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def to_json(self) -> dict[str, object]:
        return {"group_id": self.group_id, "topic": self.topic, "partition": self.partition,
                "start_offset": self.start_offset, "end_offset": self.end_offset,
                "state_epoch": self.state_epoch,
                "delivery_count_limit": self.delivery_count_limit,
                "in_flight": self.in_flight, "live": self.live,
                "counts": {s.name.lower(): n for s, n in self.counts.items()},
                "records": [r.to_json() for r in self.records],
                "truncated": len(self.records) < self.in_flight}


@dataclass(slots=True)
class _Record:
    state: RecordState
    delivery_count: int
    member: str | None = None
    deadline: int = 0
    lock: int = 0   # the acquisition this lock belongs to (its timer)


class SharePartition:
    def __init__(self, group_id: str, topic: str, partition: int, timer: Timer, *,
                 lock_duration_ms: int = 30_000, delivery_count_limit: int = 5,
                 max_record_locks: int = 2000, start_offset: int = 0,
                 state_epoch: int = 0,
                 on_change: Callable[[SharePartition], None] | None = None) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.timer = timer
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.start = start_offset
        self.end = start_offset
        self.state_epoch = state_epoch
        self.leader_epoch = -1
        self.topic_id = uuid.UUID(int=0)
        self.dirty = False
        self.records: dict[int, _Record] = {}
        self.on_change = on_change
        self._locks = itertools.count(1)
        self._lock_ranges: dict[int, tuple[int, int]] = {}
        self.closed = False
        # one write of the state at a time, each of the state as it is when it goes: two in
        # flight at once may land in either order, and the older would undo the newer
        self.write_lock = asyncio.Lock()

    # -- views --------------------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return self.end - self.start

    def state_of(self, offset: int) -> RecordState:
        if offset < self.start:
            return RecordState.ARCHIVED   # done with: acknowledged or archived, forgotten
        rec = self.records.get(offset)
        return RecordState.AVAILABLE if rec is None else rec.state

    def delivery_count(self, offset: int) -> int:
        rec = self.records.get(offset)
        return 0 if rec is None else rec.delivery_count

    def holder(self, offset: int) -> str | None:
        rec = self.records.get(offset)
        return None if rec is None else rec.member

    def acquired_by(self, member_id: str) -> list[int]:
        return sorted(o for o, r in self.records.items()
                      if r.state is RecordState.ACQUIRED and r.member == member_id)

    def counts(self) -> dict[RecordState, int]:
        out = dict.fromkeys(RecordState, 0)
        for o in range(self.start, self.end):
            out[self.state_of(o)] += 1
        return out

    def snapshot(self, limit: int) -> ShareSnapshot:
        """A read-only copy of the in-flight window, listing its first ``limit`` records."""
        now = self.timer.now_ms()
        shown: list[InFlightRecord] = []
        for o in range(self.start, min(self.end, self.start + max(limit, 0))):
            rec = self.records.get(o)
            if rec is None:
                shown.append(InFlightRecord(o, RecordState.AVAILABLE, 0))
            elif rec.state is RecordState.ACQUIRED:
                shown.append(InFlightRecord(o, rec.state, rec.delivery_count, rec.member,
                                            max(0, rec.deadline - now)))
            else:
                shown.append(InFlightRecord(o, rec.state, rec.delivery_count))
        return ShareSnapshot(self.group_id, self.topic, self.partition, self.start, self.end,
                             self.state_epoch, self.delivery_count_limit, self.counts(),
                             tuple(shown), live=True)

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as runs (what a ShareSnapshot holds). Acquired records are
        written as AVAILABLE with their delivery count: a lock does not survive a restart."""
        out: list[StateBatch] = []
        for o in range(self.start, self.end):
            rec = self.records.get(o)
            state = RecordState.AVAILABLE if rec is None or rec.state is RecordState.ACQUIRED \
                else rec.state
            count = 0 if rec is None else rec.delivery_count
            if out and out[-1].last == o - 1 and out[-1].state is state \
                    and out[-1].delivery_count == count:
                out[-1] = StateBatch(out[-1].first, o, state, count)
            else:
                out.append(StateBatch(o, o, state, count))
        return out

    def restore(self, start: int, batches: Iterable[StateBatch], state_epoch: int) -> None:
        """Load persisted state (ShareSnapshot plus ShareUpdates, already merged)."""
        self.start = self.end = start
        self.records.clear()
        self.state_epoch = state_epoch
        for b in batches:
            for o in range(max(b.first, start), b.last + 1):
                state = RecordState.AVAILABLE if b.state is RecordState.ACQUIRED else b.state
                self.records[o] = _Record(state, b.delivery_count)
                self.end = max(self.end, o + 1)
        self._advance_start()

    # -- acquiring ----------------------------------------------------------------------------
    def next_fetch_offset(self) -> int:
        """Where the log must be read from: the first AVAILABLE in-flight record, else ``end``."""
        for o in range(self.start, self.end):
            if self.state_of(o) is RecordState.AVAILABLE:
                return o
        return self.end

    def acquire(self, member_id: str, batches: Sequence[BatchSpan], max_records: int,
                record_limit: bool = False) -> list[Acquired]:
        """Acquire records of ``batches`` (read from the log at ``next_fetch_offset``) for a
        member: at most ``max_records``, except that in batch-optimized mode (the default,
        ShareAcquireMode 0) the last batch is taken whole (KIP-1206)."""
        now = self.timer.now_ms()
        taken: list[int] = []
        changed = False
        for span in batches:
            if len(taken) >= max_records > 0:
                break
            for o in range(span.first, span.last + 1):
                if o < self.start:
                    continue
                if o >= self.end:
                    if self.end - self.start >= self.max_record_locks:
                        break
                    for gap in range(self.end, o):  # compacted away: nothing to deliver
                        self.records[gap] = _Record(RecordState.ARCHIVED, 0)
                        changed = True
                    self.end = o + 1
                    if span.control:
                        self.records[o] = _Record(RecordState.ARCHIVED, 0)
                        changed = True
                        continue
                    self.records[o] = _Record(RecordState.AVAILABLE, 0)
                rec = self.records.get(o)
                if rec is None:
                    rec = self.records[o] = _Record(RecordState.AVAILABLE, 0)
                if rec.state is not RecordState.AVAILABLE:
                    continue
                if span.control or rec.delivery_count >= self.delivery_count_limit:
                    # A record available that was delivered the limit times already
                    # lost its last lock with a leader that moved or restarted (the
                    # state written at its acquisition says AVAILABLE, with the count):
                    # that delivery ended as a lock expiry does, and a record released
                    # at the limit is archived. Acquired, its count would pass the limit
                    # (kaflite.verify, share groups, seeds 6002 and 6003).
                    rec.state = RecordState.ARCHIVED
                    changed = True
                    continue
                if record_limit and len(taken) >= max_records > 0:
                    break
                taken.append(o)
        if not taken:
            if changed:
                self._advance_start()
                self._changed()
            return []
        lock = next(self._locks)
        deadline = now + self.lock_duration_ms
        for o in taken:
            rec = self.records[o]
            rec.state = RecordState.ACQUIRED
            rec.delivery_count += 1
            rec.member = member_id
            rec.deadline = deadline
            rec.lock = lock
        self._lock_ranges[lock] = (taken[0], taken[-1])
        self.timer.schedule(self._lock_key(lock), self.lock_duration_ms, self._expiry(lock))
        self._advance_start()
        self._changed()
        return _runs(taken, self.records)

    # -- acknowledging ------------------------------------------------------------------------
    def acknowledge(self, member_id: str, first: int, last: int,
                    types: Sequence[int]) -> None:
        """Apply one AcknowledgementBatch, all or nothing; raises Kafka's error."""
        self.acknowledge_all(member_id, [(first, last, types)])

    def acknowledge_all(self, member_id: str,
                        batches: Sequence[tuple[int, int, Sequence[int]]]) -> None:
        """Apply a request's AcknowledgementBatches of this partition, all or nothing:
        every batch is checked before any is applied, as Kafka's ``SharePartition``
        rolls back a request's changes when one of its batches fails. Applied one by
        one, the batches before a bad one took effect while the partition's answer was
        the error, so the member counted as failed acknowledgements the broker had taken
        (a 30-minute soak: records ACCEPTed, told INVALID_RECORD_STATE, never delivered
        again). Raises the first batch's error."""
        checked = [(first, last, self._check_batch(member_id, first, last, types))
                   for first, last, types in batches]
        now = self.timer.now_ms()
        for first, last, kinds in checked:
            self._apply_batch(first, last, kinds, now)
        self._advance_start()
        self._changed()

    def _check_batch(self, member_id: str, first: int, last: int,
                     types: Sequence[int]) -> list[AckType]:
        if first > last or first < 0:
            raise errors.InvalidRequestError(
                f"Acknowledgement batch [{first}, {last}] is not a valid range.")
        n = last - first + 1
        if len(types) not in (1, n):
            raise errors.InvalidRequestError(
                f"Acknowledgement batch [{first}, {last}] has {len(types)} acknowledge types.")
        if first < self.start or last >= self.end:
            raise errors.InvalidRecordStateError(
                f"The record state is invalid. Offsets [{first}, {last}] of "
                f"{self.topic}-{self.partition} are not all in flight ([{self.start}, "
                f"{self.end}): none of them is acquired by member {member_id}.")
        kinds: list[AckType] = []
        for t in types:
            try:
                kinds.append(AckType(t))
            except ValueError:
                raise errors.InvalidRequestError(f"Invalid acknowledge type {t}.") from None
        for i, o in enumerate(range(first, last + 1)):
            kind = kinds[0] if len(kinds) == 1 else kinds[i]
            rec = self.records.get(o)
            if kind is AckType.GAP and (rec is None or rec.state is RecordState.ARCHIVED):
                continue
            if rec is None or rec.state is not RecordState.ACQUIRED or rec.member != member_id:
                raise errors.InvalidRecordStateError(
                    f"The record state is invalid. The acknowledgement of offset {o} of "
                    f"{self.topic}-{self.partition} failed: it is not acquired by member "
                    f"{member_id}.")
        return kinds

    def _apply_batch(self, first: int, last: int, kinds: list[AckType], now: int) -> None:
        for i, o in enumerate(range(first, last + 1)):
            kind = kinds[0] if len(kinds) == 1 else kinds[i]
            rec = self.records.get(o)
            if rec is None or rec.state is not RecordState.ACQUIRED:
                continue   # a gap already archived
            if kind is AckType.ACCEPT:
                self._finish(rec, RecordState.ACKNOWLEDGED)
            elif kind in (AckType.REJECT, AckType.GAP):
                self._finish(rec, RecordState.ARCHIVED)
            elif kind is AckType.RELEASE:
                self._release(rec)
            else:  # RENEW: a fresh lock, same delivery
                rec.deadline = now + self.lock_duration_ms
                lock = next(self._locks)
                rec.lock = lock
                self._lock_ranges[lock] = (o, o)
                self.timer.schedule(self._lock_key(lock), self.lock_duration_ms,
                                    self._expiry(lock))

    def release_member(self, member_id: str) -> int:
        """A member's session ended: its acquired records are released. Returns how many."""
        n = 0
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and rec.member == member_id:
                self._release(rec)
                n += 1
        if n:
            self._advance_start()
            self._changed()
        return n

    def expire_locks(self, member_id: str | None = None) -> int:
        """Fault injection: every lock (of one member, or all) expires now."""
        n = 0
        for rec in self.records.values():
            if rec.state is RecordState.ACQUIRED and (member_id is None or rec.member == member_id):
                self._release(rec)
                n += 1
        if n:
            self._advance_start()
            self._changed()
        return n

    def skip_to(self, offset: int) -> None:
        """The log start moved past in-flight records (retention): they are gone."""
        if offset <= self.start:
            return
        for o in range(self.start, min(offset, self.end)):
            rec = self.records.pop(o, None)
            if rec is not None and rec.state is RecordState.ACQUIRED:
                rec.member = None
        self.start = offset
        self.end = max(self.end, offset)
        self._advance_start()
        self._changed()

    def reset_to(self, offset: int) -> None:
        """AlterShareGroupOffsets: start over at ``offset`` (the group has no members)."""
        self.start = self.end = offset
        self.records.clear()
        self._changed()

    def close(self) -> None:
        """Leadership moved: stop every lock timer (the state lives on in the log)."""
        self.closed = True
        for lock in list(self._lock_ranges):
            self.timer.cancel(self._lock_key(lock))
        self._lock_ranges.clear()

    # -- internals ------------------------------------------------------------------------------
    def _lock_key(self, lock: int) -> str:
        return f"share-lock-{self.group_id}-{self.topic}-{self.partition}-{lock}"

    def _expiry(self, lock: int) -> Callable[[], None]:
        return lambda: self._lock_expired(lock)

    def _lock_expired(self, lock: int) -> None:
        span = self._lock_ranges.pop(lock, None)
        if span is None or self.closed:
            return
        released = 0
        for o in range(span[0], span[1] + 1):
            rec = self.records.get(o)
            if rec is not None and rec.state is RecordState.ACQUIRED and rec.lock == lock:
                self._release(rec)
                released += 1
        if released:
            self._advance_start()
            self._changed()

    def _finish(self, rec: _Record, state: RecordState) -> None:
        rec.state = state
        rec.member = None
        rec.lock = 0

    def _release(self, rec: _Record) -> None:
        limit_reached = rec.delivery_count >= self.delivery_count_limit
        self._finish(rec, RecordState.ARCHIVED if limit_reached else RecordState.AVAILABLE)

    def _advance_start(self) -> None:
        while self.start < self.end:
            rec = self.records.get(self.start)
            if rec is None or rec.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self.records[self.start]
            self.start += 1

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self)

    # -- invariants (tests and fuzzing) -------------------------------------------------------
    def check(self) -> list[str]:
        problems = []
        if self.start > self.end:
            problems.append(f"start {self.start} > end {self.end}")
        if self.end - self.start > self.max_record_locks:
            problems.append("more records in flight than max_record_locks")
        for o, rec in self.records.items():
            if not self.start <= o < self.end:
                problems.append(f"offset {o} outside [{self.start}, {self.end})")
            if rec.state is RecordState.ACQUIRED and rec.member is None:
                problems.append(f"offset {o} acquired by nobody")
            if rec.state is not RecordState.ACQUIRED and rec.member is not None:
                problems.append(f"offset {o} is {rec.state} but held by {rec.member}")
            if rec.delivery_count > self.delivery_count_limit:
                problems.append(f"offset {o} delivered {rec.delivery_count} times")
        first = self.records.get(self.start)
        if first is not None and first.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
            problems.append("start offset not advanced")
        return problems


def _runs(offsets: list[int], records: dict[int, _Record]) -> list[Acquired]:
    """Consecutive offsets with one delivery count, as AcquiredRecords entries."""
    out: list[Acquired] = []
    for o in offsets:
        count = records[o].delivery_count
        if out and out[-1].last == o - 1 and out[-1].delivery_count == count:
            out[-1] = Acquired(out[-1].first, o, count)
        else:
            out.append(Acquired(o, o, count))
    return out
