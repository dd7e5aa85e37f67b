"""``RecordBuffer`` on its own: what it holds per partition, and each way a record
leaves it without being handed out (its lock ended, its session ended, its partition
revoked), with the event that names it."""

from __future__ import annotations

import time

from kaflite.client.consumer._types import TopicPartition
from kaflite.client.share._buffer import RecordBuffer
from kaflite.client.share._types import AcknowledgeType, ShareRecord

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def records(tp: TopicPartition, *offsets: int) -> list[ShareRecord[bytes, bytes]]:
    return [ShareRecord(tp.topic, tp.partition, o, 0, None, b"v") for o in offsets]


def buffer() -> tuple[RecordBuffer[bytes, bytes], list[tuple[str, object]]]:
    events: list[tuple[str, object]] = []
    buf: RecordBuffer[bytes, bytes] = RecordBuffer(
        lambda kind, message, cause=None, **_: events.append((message, cause)))
    return buf, events


def test_records_are_handed_out_oldest_first_with_their_earliest_lock_end() -> None:
    buf, events = buffer()
    now = time.monotonic()
    buf.add(A, records(A, 0, 1), (now + 1, now + 2), node=0)
    buf.add(B, records(B, 5), (now + 3, now + 4), node=1)
    buf.add(B, [], (now, now), node=1)                   # nothing: nothing counted
    assert len(buf) == 3 and buf.partitions() == {A, B} and buf.counts == {A: 2, B: 1}
    assert [(e, r.offset) for e, r in buf.drain(2)] == [(now + 1, 0), (now + 1, 1)]
    assert not buf.holds(A) and buf.holds(B)
    assert [(e, r.offset) for e, r in buf.drain(10)] == [(now + 3, 5)]
    assert not buf and buf.counts == {} and not events


def test_replace_counts_what_it_buffers() -> None:
    buf, _ = buffer()
    now = time.monotonic()
    buf.add(A, records(A, 0, 1), (now + 1, now + 2), node=0)
    buf.replace((e, latest, 2, r) for e, latest, _, r in buf.entries if r.offset == 1)
    assert buf.counts == {A: 1} and [item[2] for item in buf.entries] == [2]


def test_ways_out_name_the_records() -> None:
    buf, events = buffer()
    now = time.monotonic()
    buf.add(A, records(A, 0, 1, 2), (now - 2, now - 1), node=0)   # lock ended
    assert buf.drain(10) == []
    buf.add(B, records(B, 3, 4), (now + 1, now + 2), node=1)
    buf.add(A, records(A, 7), (now + 1, now + 2), node=2)
    buf.session_ended(0, "gone")                                  # nothing of node 0 left
    buf.session_ended(2, "ShareFetch failed")
    assert buf.drop({B}) == {B: {3: AcknowledgeType.RELEASE, 4: AcknowledgeType.RELEASE}}
    assert buf.drop({A}) == {}
    assert not buf and buf.counts == {}
    assert events == [
        ("dropped 3 buffered records of t-0 (offsets 0-2): their acquisition lock ended "
         "before the application polled them", None),
        ("dropped 1 buffered records of t-0 (offsets 7): their share session with broker 2 "
         "ended, which released them", "ShareFetch failed"),
        ("gave back 2 buffered records of t-1 (offsets 3-4)", None)]
