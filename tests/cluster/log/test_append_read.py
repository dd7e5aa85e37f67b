"""Appends and reads: offsets, stamping, segment rolls, fetch limits, validation."""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path

import pytest

from kaflite.cluster.log import PartitionLog, UnexpectedAppendOffsetError
from kaflite.protocol import errors
from kaflite.protocol.records import Compression, iter_batches
from tests.cluster.log.helpers import T0, batch, open_log, read_batches, read_records


def test_offsets_epoch_and_crc_are_stamped(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    expected = 0
    for i in range(10):
        values = [b"v%d-%d" % (i, j) for j in range(i + 1)]
        result = log.append_as_leader(batch(values), 7, now_ms=T0)
        assert (result.base_offset, result.last_offset) == (expected, expected + i)
        assert result.record_count == i + 1 and not result.duplicate
        assert result.log_append_time == -1
        expected += i + 1
    assert log.log_end_offset == expected == 55
    batches = read_batches(log)
    assert [b.base_offset for b in batches] == [sum(range(1, i + 1)) for i in range(10)]
    for b in batches:
        assert b.crc_ok()
        assert b.partition_leader_epoch == 7
    assert [r[2] for r in read_records(log)] == [
        b"v%d-%d" % (i, j) for i in range(10) for j in range(i + 1)
    ]


def test_the_request_buffer_is_not_modified(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch([b"a"]), 0, now_ms=T0)
    data = bytearray(batch([b"b"]))
    before = bytes(data)
    log.append_as_leader(data, 0, now_ms=T0)
    assert bytes(data) == before


def test_segments_roll_at_segment_bytes_and_reads_cross_them(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000)
    for i in range(60):
        log.append_as_leader(batch([b"x" * 50, b"y" * 20], ts=T0 + i), 1, now_ms=T0)
    segments = log.segments
    assert len(segments) > 5
    for seg in segments:
        assert seg.size_bytes <= 1000
        assert Path(seg.path).name == f"{seg.base_offset:020d}.log"
        assert seg.base_offset % 2 == 0  # segments start at batch boundaries
    for prev, nxt in pairwise(segments):
        assert prev.next_offset == nxt.base_offset
    assert [r[0] for r in read_records(log)] == list(range(120))
    # Each read comes from one segment only, and never splits a batch.
    first = log.read(0, 1 << 20)
    got = list(iter_batches(first.records, allow_partial=False))
    assert got[-1].next_offset == segments[0].next_offset


def test_segment_ms_rolls_by_record_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_ms=1000)
    log.append_as_leader(batch([b"a"], ts=T0), 0, now_ms=T0)
    log.append_as_leader(batch([b"b"], ts=T0 + 999), 0, now_ms=T0)
    assert len(log.segments) == 1
    log.append_as_leader(batch([b"c"], ts=T0 + 1001), 0, now_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_max_bytes_returns_whole_batches_only(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = []
    for i in range(5):
        data = batch([b"z" * (100 + 10 * i)])
        sizes.append(len(data))
        log.append_as_leader(data, 0, now_ms=T0)
    # A limit that ends inside the third batch returns the first two.
    result = log.read(0, sizes[0] + sizes[1] + sizes[2] - 1)
    assert len(result.records) == sizes[0] + sizes[1]
    assert [b.base_offset for b in iter_batches(result.records, allow_partial=False)] == [0, 1]
    assert result.next_offset == 2
    # A first batch larger than max_bytes comes whole with min_one_batch (KIP-74)...
    result = log.read(2, 10)
    assert len(result.records) == sizes[2] and result.first_offset == 2
    assert result.next_offset == 3
    # ...and not at all without it.
    result = log.read(2, 10, min_one_batch=False)
    assert result.records == b"" and result.first_offset == -1
    assert log.read(0, 0, min_one_batch=False).records == b""


def test_max_bytes_with_many_small_batches_uses_the_index(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=256)
    for i in range(400):
        log.append_as_leader(batch([b"%04d" % i]), 0, now_ms=T0)
    for start in (0, 17, 200, 399):
        for limit in (1, 90, 1000, 5000):
            result = log.read(start, limit)
            got = list(iter_batches(result.records, allow_partial=False))
            assert got[0].base_offset == start
            assert len(result.records) <= max(limit, got[0].size_in_bytes)
            assert [b.base_offset for b in got] == list(range(start, start + len(got)))
            if start + len(got) < 400:
                # The next batch would not have fitted.
                assert len(result.records) + got[0].size_in_bytes > limit


def test_max_offset_hides_whole_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(4):
        log.append_as_leader(batch([b"a", b"b", b"c"]), 0, now_ms=T0)  # offsets 3k..3k+2
    def offsets(max_offset: int, start: int = 0) -> list[int]:
        res = log.read(start, 1 << 20, max_offset=max_offset)
        got = [b.base_offset for b in iter_batches(res.records, allow_partial=False)]
        assert res.next_offset == (got[-1] + 3 if got else start)
        return got
    assert offsets(12) == [0, 3, 6, 9]
    assert offsets(9) == [0, 3, 6]
    assert offsets(8) == [0, 3]  # batch 6..8 ends at the bound, so it is not visible
    assert offsets(3) == [0]
    assert offsets(2) == []
    assert offsets(6, start=4) == [3]  # a fetch inside a batch returns the whole batch
    assert offsets(5, start=4) == []


def test_out_of_range_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch([b"a", b"b"]), 0, now_ms=T0)
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(3, 100)
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(-1, 100)
    at_end = log.read(2, 100)
    assert at_end.records == b"" and at_end.log_end_offset == 2
    log.delete_records_before(1)
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(0, 100)
    assert log.read(1, 100).first_offset == 0  # the batch holding offset 1 starts at 0


def test_log_append_time_is_stamped_and_crc_recomputed(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    result = log.append_as_leader(batch([b"a", b"b"], ts=5), 2, now_ms=T0 + 42)
    assert result.log_append_time == T0 + 42
    (b,) = read_batches(log)
    assert b.is_log_append_time and b.max_timestamp == T0 + 42 and b.crc_ok()
    assert [r.timestamp for r in b] == [T0 + 42, T0 + 42]


def test_compressed_batches_round_trip(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        log.append_as_leader(batch([b"c%d" % codec] * 3, compression=codec), 0, now_ms=T0)
    assert [r[2] for r in read_records(log)] == [b"c%d" % c for c in (1, 2, 3, 4) for _ in range(3)]
    assert all(b.crc_ok() for b in read_batches(log))


@pytest.mark.parametrize(
    ("mutate", "error"),
    [
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), errors.CorruptMessageError),  # CRC
        (lambda d: d[:-3], errors.CorruptMessageError),  # torn
        (lambda d: d + d, errors.InvalidRecordError),  # two batches in one Produce
        (lambda d: d[:16] + b"\x01" + d[17:], errors.UnsupportedForMessageFormatError),
    ],
)
def test_invalid_record_sets_are_rejected(tmp_path: Path, mutate, error) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path)
    log.append_as_leader(batch([b"ok"]), 0, now_ms=T0)
    with pytest.raises(error):
        log.append_as_leader(mutate(batch([b"v1", b"v2"])), 0, now_ms=T0)
    assert log.log_end_offset == 1
    assert os.path.getsize(log.segments[0].path) == len(batch([b"ok"]))


def test_size_and_key_and_timestamp_limits(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=200, segment_bytes=4096)
    with pytest.raises(errors.MessageTooLargeError):
        log.append_as_leader(batch([b"x" * 300]), 0, now_ms=T0)
    with pytest.raises(errors.MessageTooLargeError):
        log.append_as_leader(batch([b"x" * 100]), 0, now_ms=T0, max_message_bytes=100)
    with pytest.raises(errors.RecordListTooLargeError):
        log.append_as_leader(batch([b"x" * 5000]), 0, now_ms=T0, max_message_bytes=10000)
    # Kafka 4.0: message.timestamp.after.max.ms defaults to one hour.
    with pytest.raises(errors.InvalidTimestampError):
        log.append_as_leader(batch([b"x"], ts=T0 + 3_600_001), 0, now_ms=T0)
    log.append_as_leader(batch([b"x"], ts=T0 + 3_600_000), 0, now_ms=T0)
    before = open_log(tmp_path, "before-0", message_timestamp_before_max_ms=5)
    with pytest.raises(errors.InvalidTimestampError):
        before.append_as_leader(batch([b"x"], ts=T0 - 10), 0, now_ms=T0)
    before.append_as_leader(batch([b"x"], ts=T0 - 5), 0, now_ms=T0)
    compacted = open_log(tmp_path, "compacted-0", cleanup_policy=("compact",))
    with pytest.raises(errors.InvalidRecordError):
        compacted.append_as_leader(batch([b"v", b"w"], keys=[b"k", None]), 0, now_ms=T0)
    compacted.append_as_leader(batch([b"v", b"w"], keys=[b"k", b"j"]), 0, now_ms=T0)
    assert compacted.log_end_offset == 2


def test_producer_may_not_claim_log_append_time(tmp_path: Path) -> None:
    from kaflite.protocol.records import encode_batch

    log = open_log(tmp_path)
    with pytest.raises(errors.InvalidTimestampError):
        log.append_as_leader(encode_batch([b"x"], timestamps=[T0], log_append_time=True), 0,
                             now_ms=T0)


def test_empty_append_is_a_no_op(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    result = log.append_as_leader(b"", 0, now_ms=T0)
    assert result.base_offset == -1 and log.log_end_offset == 0


def test_follower_append_copies_the_leader_byte_for_byte(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader-0", segment_bytes=600)
    follower = open_log(tmp_path, "follower-0", segment_bytes=600)
    for i in range(20):
        leader.append_as_leader(batch([b"r%d" % i] * 3, ts=T0 + i), 1 + i // 10, now_ms=T0)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 700).records
        result = follower.append_as_follower(data, now_ms=T0)
        offset = result.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset == 60
    assert [bytes(b.buffer) for b in read_batches(follower)] == [
        bytes(b.buffer) for b in read_batches(leader)
    ]
    assert follower.epochs.entries == leader.epochs.entries == [(1, 0), (2, 30)]
    assert len(follower.segments) > 1
    # Overlap is refused; a torn tail is left for the next fetch.
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(leader.read(57, 100).records)
    one_more = leader.append_as_leader(batch([b"new"]), 2, now_ms=T0)
    data = leader.read(one_more.base_offset, 1000).records
    torn_extra = data + data[:20]
    assert follower.append_as_follower(torn_extra).last_offset == one_more.base_offset
    with pytest.raises(errors.CorruptMessageError):
        follower.append_as_follower(data[:-1] + bytes([data[-1] ^ 0xFF]))


def test_follower_accepts_gaps_from_a_compacted_leader(tmp_path: Path) -> None:
    from kaflite.protocol.records import encode_batch

    follower = open_log(tmp_path)
    follower.append_as_follower(encode_batch([b"a"], base_offset=0, partition_leader_epoch=0))
    follower.append_as_follower(encode_batch([b"b"], base_offset=10, partition_leader_epoch=0))
    assert follower.log_end_offset == 11
    assert [r[0] for r in read_records(follower)] == [0, 10]


def test_flush_messages_moves_the_recovery_point(tmp_path: Path) -> None:
    log = open_log(tmp_path, flush_messages=3)
    log.append_as_leader(batch([b"a", b"b"]), 0, now_ms=T0)
    assert log.recovery_point == 0
    log.append_as_leader(batch([b"c"]), 0, now_ms=T0)
    assert log.recovery_point == 3
    text = (tmp_path / "topic-0" / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n1\ntopic 0 3\n"


def test_a_follower_indexes_each_batch_of_one_append_as_the_leader_did(tmp_path: Path) -> None:
    """A replica fetch brings many batches in one append; Kafka's LogSegment.append
    indexes batch by batch, so the follower's indexes match the leader's (and what
    recovery rebuilds from the headers)."""
    leader = open_log(tmp_path, "leader-0", index_interval_bytes=2048)
    for i in range(12):
        leader.append_as_leader(batch([b"%04d" % i * 250], ts=T0 + i), 0, now_ms=T0)
    follower = open_log(tmp_path, "follower-0", index_interval_bytes=2048)
    follower.append_as_follower(leader.read(0, 1 << 20).records, now_ms=T0)

    def indexes(log: PartitionLog) -> tuple[list[int], list[int], list[int], list[int]]:
        seg = log._local.active
        return (list(seg.offset_index.relative_offsets), list(seg.offset_index.positions),
                list(seg.time_index.timestamps), list(seg.time_index.relative_offsets))

    assert indexes(leader)[0], "the leader indexed nothing: the test needs bigger batches"
    assert indexes(follower) == indexes(leader)
    follower._local.active.rebuild_from_headers()
    assert indexes(follower) == indexes(leader)
