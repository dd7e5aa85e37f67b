"""The share consumer's pure parts: acknowledgement batches and share-session epochs."""

from __future__ import annotations

from kaflite.client.consumer import TopicPartition
from kaflite.client.share._acks import ShareSession, ack_ranges, merge

A, B, C = (TopicPartition("t", p) for p in range(3))


def test_ack_ranges_run_consecutive_offsets_of_one_type() -> None:
    acks = {5: 1, 6: 1, 7: 1, 8: 2, 10: 2, 11: 3, 3: 1}
    assert ack_ranges(acks) == [(3, 3, 1), (5, 7, 1), (8, 8, 2), (10, 10, 2), (11, 11, 3)]
    assert ack_ranges({}) == []
    assert ack_ranges(dict.fromkeys(range(100, 600), 1)) == [(100, 599, 1)]


def test_a_later_acknowledgement_of_an_offset_wins() -> None:
    into = {A: {1: 4}}
    merge(into, {A: {1: 1, 2: 1}, B: {}})
    assert into == {A: {1: 1, 2: 1}}


def test_share_session_names_changes_only_once_open() -> None:
    s = ShareSession(1)
    assert s.changes({A, B}) == ({A, B}, set())     # epoch 0: everything, nothing forgotten
    s.answered({A, B})
    assert (s.epoch, s.open) == (1, True)
    assert s.changes({B, C}) == ({C}, {A})           # C joins, A leaves
    s.answered({B, C})
    assert s.epoch == 2 and s.partitions == {B, C}
    s.answered(None)                                 # a ShareAcknowledge: same partitions
    assert s.epoch == 3 and s.partitions == {B, C}
    s.epoch = 0x7FFFFFFF
    s.answered(None)
    assert s.epoch == 1                              # wraps to 1, never back to 0
    s.reset()
    assert (s.epoch, s.partitions, s.open) == (0, set(), False)
