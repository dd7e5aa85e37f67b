"""DeleteRecords, retention by time and size, and compaction."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kaflite.cluster.log import PartitionLog
from kaflite.protocol import errors
from kaflite.protocol.records import Compression, iter_batches
from tests.cluster.log.helpers import T0, batch, open_log, read_batches, read_records

HOUR = 3_600_000


def _segments_of_ten(log: PartitionLog, n_segments: int, ts_step: int = 0) -> None:
    """Fill segments of exactly ten single-record batches each, rolling by hand."""
    for s in range(n_segments):
        for i in range(10):
            ts = T0 + s * ts_step
            log.append_as_leader(batch([b"s%d-%d" % (s, i)], ts=ts), 0, now_ms=ts)
        if s < n_segments - 1:
            log.roll(now_ms=T0)


# -- DeleteRecords --------------------------------------------------------------------------------


def test_delete_records_before_moves_the_start_and_survives_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    _segments_of_ten(log, 4)
    log.assign_epoch(1, 0)
    log.assign_epoch(2, 15)
    assert log.delete_records_before(25) == 25
    assert [s.base_offset for s in log.segments] == [20, 30]  # whole segments below 25 went
    assert log.epochs.entries == [(2, 25)]
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(24, 100)
    assert read_records(log)[0][0] == 25
    assert log.delete_records_before(10) == 25  # never moves back
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.delete_records_before(41)
    log.close(flush=False)
    text = (tmp_path / "topic-0" / "log-start-offset-checkpoint").read_text()
    assert text == "0\n1\ntopic 0 25\n"
    log = open_log(tmp_path)
    assert log.log_start_offset == 25
    with pytest.raises(errors.OffsetOutOfRangeError):
        log.read(22, 100)
    assert log.delete_records_before(40) == 40  # up to the log end is allowed
    assert log.read(40, 100).records == b""
    assert log.append_as_leader(batch([b"z"]), 0, now_ms=T0).base_offset == 40


# -- retention --------------------------------------------------------------------------------------


def test_retention_by_time_uses_each_segments_largest_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    _segments_of_ten(log, 4, ts_step=HOUR)  # segment s holds timestamps T0 + s hours
    now = T0 + 3 * HOUR
    assert log.apply_retention(now, retention_ms=-1, retention_bytes=-1) == 0
    assert log.apply_retention(now, retention_ms=HOUR + 1, retention_bytes=-1) == 2
    assert [s.base_offset for s in log.segments] == [20, 30]
    assert log.log_start_offset == 20
    # The high watermark protects segments not fully replicated.
    assert log.apply_retention(now + 10 * HOUR, retention_ms=HOUR, high_watermark=35) == 1
    assert log.log_start_offset == 30
    # With everything expired the active segment goes too: the log rolls first.
    assert log.apply_retention(now + 10 * HOUR, retention_ms=HOUR) == 1
    assert log.log_start_offset == log.log_end_offset == 40
    assert [(s.base_offset, s.size_bytes) for s in log.segments] == [(40, 0)]
    log.close()
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset) == (40, 40)


def test_retention_by_size_deletes_oldest_while_staying_above_the_limit(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    _segments_of_ten(log, 5)
    size = log.segments[0].size_bytes
    assert all(s.size_bytes == size for s in log.segments)
    assert log.apply_retention(T0, retention_ms=-1, retention_bytes=5 * size) == 0
    assert log.apply_retention(T0, retention_ms=-1, retention_bytes=3 * size - 1) == 2
    assert log.size_bytes == 3 * size
    assert log.apply_retention(T0, retention_ms=-1, retention_bytes=3 * size - 1) == 0
    assert [r[0] for r in read_records(log)] == list(range(20, 50))


def test_housekeeping_follows_the_cleanup_policy(tmp_path: Path) -> None:
    deleting = open_log(tmp_path, "d-0", retention_ms=HOUR)
    compacted = open_log(tmp_path, "c-0", retention_ms=HOUR, cleanup_policy=("compact",))
    for log in (deleting, compacted):
        for s in range(3):
            log.append_as_leader(batch([b"v"], keys=[b"k%d" % s], ts=T0), 0, now_ms=T0)
            log.roll(now_ms=T0)
    assert deleting.housekeeping(T0 + 2 * HOUR) == 3
    assert compacted.housekeeping(T0 + 2 * HOUR) == 0
    assert len(read_records(compacted)) == 3


# -- compaction --------------------------------------------------------------------------------------


def _keyed(log: PartitionLog, rounds: int, keys: int, *, compression: int = 0) -> None:
    """Write ``rounds`` values for each key."""
    for r in range(rounds):
        for k in range(keys):
            key, value = b"key-%d" % k, b"r%d-k%d" % (r, k)
            log.append_as_leader(batch([value], keys=[key], compression=compression), 0, now_ms=T0)


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.ZSTD])
def test_compaction_keeps_the_latest_value_per_key_at_its_offset(
    tmp_path: Path, compression: int
) -> None:
    log = open_log(tmp_path, segment_bytes=1500, cleanup_policy=("compact",))
    _keyed(log, rounds=12, keys=5, compression=compression)
    active_base = log.segments[-1].base_offset
    before = read_records(log)
    size_before = log.size_bytes
    stats = log.compact(T0)
    assert stats.segments_rewritten > 0 and stats.records_removed > 0
    assert log.size_bytes < size_before
    after = read_records(log)
    # Every surviving record is unchanged and at its original offset...
    assert set(after) <= set(before)
    # ...the cleaned part keeps exactly the latest record of each key within it (the
    # active segment is not part of the offset map, as in Kafka)...
    newest: dict[bytes | None, tuple[int, bytes | None, bytes | None]] = {}
    for record in before:
        if record[0] < active_base:
            newest[record[1]] = record
    assert [r for r in after if r[0] < active_base] == sorted(newest.values())
    assert len(newest) == 5
    # ...and the active segment is untouched.
    assert [r for r in after if r[0] >= active_base] == [r for r in before if r[0] >= active_base]
    assert all(b.crc_ok() for b in read_batches(log))
    # A consumer that follows next_offset walks over the gaps batch by batch.
    offset, walked = log.log_start_offset, []
    while offset < log.log_end_offset:
        result = log.read(offset, 1)
        walked += [b.base_offset for b in iter_batches(result.records, allow_partial=False)]
        assert result.next_offset > offset
        offset = result.next_offset
    assert walked == [b.base_offset for b in read_batches(log)]
    assert log.compact(T0).segments_rewritten == 0  # nothing new to clean
    log.close()
    log = open_log(tmp_path, segment_bytes=1500, cleanup_policy=("compact",))
    assert read_records(log) == after


def test_tombstones_live_for_delete_retention_ms(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy=("compact",), delete_retention_ms=HOUR)
    log.append_as_leader(batch([b"v1"], keys=[b"a"]), 0, now_ms=T0)
    log.append_as_leader(batch([b"v1"], keys=[b"b"]), 0, now_ms=T0)
    log.append_as_leader(batch([None], keys=[b"a"]), 0, now_ms=T0)  # delete a
    log.roll(now_ms=T0)
    log.append_as_leader(batch([b"v2"], keys=[b"c"]), 0, now_ms=T0)
    log.compact(T0)
    assert read_records(log) == [(1, b"b", b"v1"), (2, b"a", None), (3, b"c", b"v2")]
    tombstone_batch = next(b for b in read_batches(log) if b.base_offset == 2)
    assert tombstone_batch.delete_horizon_ms == T0 + HOUR  # KIP-534
    assert [r.timestamp for r in tombstone_batch] == [T0]  # record timestamps unchanged
    log.compact(T0 + HOUR - 1)
    assert (2, b"a", None) in read_records(log)
    log.compact(T0 + HOUR)
    assert read_records(log) == [(1, b"b", b"v1"), (3, b"c", b"v2")]


def test_min_compaction_lag_holds_young_segments_back(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy=("compact",), min_compaction_lag_ms=HOUR)
    for _ in range(3):
        log.append_as_leader(batch([b"v"], keys=[b"k"], ts=T0), 0, now_ms=T0)
    log.roll(now_ms=T0)
    log.append_as_leader(batch([b"v"], keys=[b"x"], ts=T0), 0, now_ms=T0)
    assert log.compact(T0 + HOUR - 1).records_removed == 0
    assert log.compact(T0 + HOUR).records_removed == 2


def test_compaction_keeps_a_producers_last_batch_header(tmp_path: Path) -> None:
    log = open_log(tmp_path, cleanup_policy=("compact",))
    log.append_as_leader(batch([b"old"], keys=[b"k"], pid=5, epoch=0, seq=0), 0, now_ms=T0)
    log.append_as_leader(batch([b"mid"], keys=[b"k"], pid=5, epoch=0, seq=1), 0, now_ms=T0)
    log.append_as_leader(batch([b"new"], keys=[b"k"]), 0, now_ms=T0)
    log.roll(now_ms=T0)
    log.append_as_leader(batch([b"other"], keys=[b"z"]), 0, now_ms=T0)
    log.compact(T0)
    batches = read_batches(log)
    assert [(b.base_offset, len(b)) for b in batches] == [(1, 0), (2, 1), (3, 1)]
    assert batches[0].producer_id == 5 and batches[0].base_sequence == 1
    # Rebuilt from the log alone, the producer state still knows sequence 1.
    log.close(flush=False)
    directory = tmp_path / "topic-0"
    for name in os.listdir(directory):
        if name.endswith(".snapshot"):
            os.remove(directory / name)
    log = open_log(tmp_path, cleanup_policy=("compact",))
    retry = log.append_as_leader(batch([b"mid"], keys=[b"k"], pid=5, epoch=0, seq=1), 0,
                                 now_ms=T0)
    assert retry.duplicate and retry.base_offset == 1


def test_segments_without_timestamps_age_by_file_time(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(2):
        log.append_as_leader(batch([b"v"], ts=-1), 0, now_ms=T0)  # NO_TIMESTAMP records
        log.roll(now_ms=T0)
    first = Path(log.segments[0].path)
    os.utime(first, ns=((T0 - 10 * HOUR) * 1_000_000, (T0 - 10 * HOUR) * 1_000_000))
    second = Path(log.segments[1].path)
    os.utime(second, ns=(T0 * 1_000_000, T0 * 1_000_000))
    # Kafka's largestTimestamp falls back to the file's modification time.
    assert log.apply_retention(T0, retention_ms=HOUR, retention_bytes=-1) == 1
    assert log.log_start_offset == 1


def test_an_aborted_write_does_not_supersede_the_committed_value(tmp_path: Path) -> None:
    """Compaction ignores records of aborted transactions when it picks each key's latest
    value: the committed value before an aborted one survives (committed ones count)."""
    from kaflite.cluster.log import AppendOrigin
    from kaflite.protocol.records import encode_end_txn_marker_batch

    log = open_log(tmp_path, segment_bytes=400, cleanup_policy=("compact",))

    def txn(pid: int, value: bytes, commit: bool) -> None:
        log.append_as_leader(batch([value], keys=[b"k"], pid=pid, epoch=0, seq=0,
                                   transactional=True), 0, now_ms=T0)
        log.append_as_leader(encode_end_txn_marker_batch(
            commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=T0),
            0, now_ms=T0, origin=AppendOrigin.COORDINATOR)

    log.append_as_leader(batch([b"committed-1"], keys=[b"k"]), 0, now_ms=T0)
    txn(501, b"aborted", commit=False)
    log.append_as_leader(batch([b"other"], keys=[b"j"]), 0, now_ms=T0)
    _keyed(log, rounds=3, keys=3)  # roll past these, so they are cleanable
    log.compact(T0)
    values = [v for _, k, v in read_records(log) if k == b"k"]
    assert b"committed-1" in values  # without the fix the aborted record superseded it
    # a committed transactional value does supersede the older one
    txn(502, b"committed-2", commit=True)
    _keyed(log, rounds=3, keys=3)
    log.compact(T0)
    values = [v for _, k, v in read_records(log) if k == b"k"]
    assert b"committed-1" not in values and b"committed-2" in values
    log.close()


def test_a_clean_close_rewrites_only_the_checkpoints_that_changed(tmp_path: Path) -> None:
    """Stopping a broker closes every log it holds: an idle log's close must not
    rewrite (and fsync) its log-start checkpoint, or a stop of thousands of idle
    partitions takes seconds per thousand."""
    log = open_log(tmp_path)
    _segments_of_ten(log, 3)
    assert log.delete_records_before(12) == 12
    log.close()
    path = tmp_path / "topic-0" / "log-start-offset-checkpoint"
    written = path.stat().st_ino
    log = open_log(tmp_path)
    log.close()                  # unchanged: the file stays the one written before
    assert path.stat().st_ino == written
    log = open_log(tmp_path)
    assert log.delete_records_before(15) == 15
    log.close()
    assert path.read_text() == "0\n1\ntopic 0 15\n"
    assert open_log(tmp_path).log_start_offset == 15
