"""The share fetcher's buffer: records acquired for the member, not yet handed out.

Theory of operation
-------------------
A ShareFetch's answer brings records the leader acquired for the member, each
locked for the record lock duration the broker gave (``AcquisitionLockTimeoutMs``).
The broker took the locks after the request came and before it answered, so a
record's lock ends no sooner than the send time plus the duration (what the
application is told: ``drain`` hands each record out with it) and no later than
the answer's arrival plus the duration: the record is dropped only once that
latest end has passed while it waited here.

A buffered record stops being the member's before it is handed out in two more
ways. The share session it was acquired in ends (its connection lost, or the
broker forgot the session): the broker released it, and may deliver it again, to
this member or another (``session_ended``). Its partition is revoked, or the
consumer closes: it goes back to the group, RELEASEd (``drop``, whose
acknowledgements the fetcher sends). Each way is told as a ``share`` event naming
the offsets (``offset_ranges``), which ``kaflite.verify`` reads as records the
member was delivered and never saw.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from typing import Generic

from kaflite.client.consumer._types import K, TopicPartition, V
from kaflite.client.events import Emit
from kaflite.client.share._acks import Acks, ack_ranges
from kaflite.client.share._types import AcknowledgeType, ShareRecord

__all__ = ["RecordBuffer", "offset_ranges"]


def offset_ranges(offsets: Iterable[int]) -> str:
    """``1-4, 7``: the events' way of naming the records given back or dropped."""
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b, _ in
                     ack_ranges(dict.fromkeys(offsets, 0)))


class RecordBuffer(Generic[K, V]):
    """Buffered records, oldest first, and how many of each partition."""

    def __init__(self, emit: Emit) -> None:
        # each record with the monotonic times its acquisition lock ends (at the earliest,
        # at the latest) and the leader whose share session acquired it
        self.entries: deque[tuple[float, float, int, ShareRecord[K, V]]] = deque()
        self.counts: dict[TopicPartition, int] = {}
        self._emit = emit

    def __len__(self) -> int:
        return len(self.entries)

    def holds(self, tp: TopicPartition) -> bool:
        """Whether records of ``tp`` wait here."""
        return tp in self.counts

    def partitions(self) -> set[TopicPartition]:
        return set(self.counts)

    def add(self, tp: TopicPartition, records: list[ShareRecord[K, V]],
            lock_ends: tuple[float, float], node: int) -> None:
        """Records of ``tp`` that leader ``node`` acquired, locked until ``lock_ends``
        (at the earliest, at the latest)."""
        if records:
            self.entries.extend((*lock_ends, node, r) for r in records)
            self.counts[tp] = self.counts.get(tp, 0) + len(records)

    def replace(self, entries: Iterable[tuple[float, float, int, ShareRecord[K, V]]]) -> None:
        """Buffer ``entries`` instead of what is buffered."""
        self.entries = deque(entries)
        self.counts = {}
        for *_, record in self.entries:
            tp = record.topic_partition
            self.counts[tp] = self.counts.get(tp, 0) + 1

    def drain(self, max_records: int) -> list[tuple[float, ShareRecord[K, V]]]:
        """Buffered records, oldest first, each with the ``time.monotonic()`` at which its
        acquisition lock ends at the earliest (the ShareFetch's send time plus the lock
        duration). One whose lock has ended for certain while it waited here (the
        answer's arrival plus the lock duration has passed) is no longer the member's
        (the group may have delivered it to another): it is dropped, not handed out.
        One whose lock may still run is handed out, as Java's consumer hands out
        everything: a broker that held the ShareFetch for longer than a lock lasts (a
        long poll, a share-partition loading its state after a restart) acquired the
        records just before it answered, and dropping them at the send time plus the
        lock spent a delivery of each for nothing (a 30-minute soak: 500 records
        dropped on arrival three times, then archived at the delivery limit)."""
        out: list[tuple[float, ShareRecord[K, V]]] = []
        now = time.monotonic()
        expired: dict[TopicPartition, list[int]] = {}
        while self.entries and len(out) < max_records:
            earliest, latest, _, record = self.entries.popleft()
            tp = TopicPartition(record.topic, record.partition)
            left = self.counts[tp] - 1
            if left:
                self.counts[tp] = left
            else:
                del self.counts[tp]
            if latest <= now:
                expired.setdefault(tp, []).append(record.offset)
                continue
            out.append((earliest, record))
        for tp, offsets in expired.items():
            self._emit("share", f"dropped {len(offsets)} buffered records of {tp} (offsets "
                       f"{offset_ranges(offsets)}): their acquisition "
                       "lock ended before the application polled them", cause=None)
        return out

    def session_ended(self, node: int, why: str) -> None:
        """The share session with ``node`` ended (its connection lost, or the broker
        forgot it): the broker released what the member had acquired in it, and may
        deliver it again, to this member or another. Records of that session still in
        the buffer are no longer the member's: dropped, not handed out. A 30-minute soak
        handed out such stale copies beside the new delivery of the same records, and
        the application acknowledged each offset twice in one commit."""
        kept: deque[tuple[float, float, int, ShareRecord[K, V]]] = deque()
        stale: dict[TopicPartition, list[int]] = {}
        for item in self.entries:
            if item[2] == node:
                record = item[3]
                stale.setdefault(TopicPartition(record.topic, record.partition),
                                 []).append(record.offset)
            else:
                kept.append(item)
        if not stale:
            return
        self.entries = kept
        for tp, offsets in stale.items():
            left = self.counts.get(tp, 0) - len(offsets)
            if left > 0:
                self.counts[tp] = left
            else:
                self.counts.pop(tp, None)
            self._emit("share", f"dropped {len(offsets)} buffered records of {tp} (offsets "
                       f"{offset_ranges(offsets)}): their share session with broker {node} "
                       "ended, which released them", cause=why)

    def drop(self, tps: set[TopicPartition]) -> dict[TopicPartition, Acks]:
        """Partitions revoked: their buffered records leave the buffer. Returned: their
        acknowledgements, RELEASE (they go back to the group)."""
        kept: deque[tuple[float, float, int, ShareRecord[K, V]]] = deque()
        released: dict[TopicPartition, Acks] = {}
        for item in self.entries:
            record = item[3]
            tp = TopicPartition(record.topic, record.partition)
            if tp in tps:
                released.setdefault(tp, {})[record.offset] = AcknowledgeType.RELEASE
            else:
                kept.append(item)
        self.entries = kept
        for tp in tps:
            self.counts.pop(tp, None)
        for tp, acks in released.items():
            self._emit("share", f"gave back {len(acks)} buffered records of {tp} (offsets "
                       f"{offset_ranges(acks)})", cause=None)
        return released
