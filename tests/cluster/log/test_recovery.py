"""Restart recovery: torn and corrupt tails, index rebuilds, leftovers of compaction."""

from __future__ import annotations

import os
import struct
import uuid
from pathlib import Path

import pytest

from kaflite.cluster.log import LogConfig, PartitionLog, flush_deferred_fsyncs
from kaflite.protocol import errors
from tests.cluster.log.helpers import T0, batch, open_log, read_batches, read_records


def _fill(log: PartitionLog, n: int, epoch: int = 0) -> list[int]:
    """Append n batches of 2 records; return each batch's size."""
    sizes = []
    for i in range(n):
        data = batch([b"value-%03d" % i, b"x" * (i % 7)], ts=T0 + i)
        log.append_as_leader(data, epoch, now_ms=T0)
        sizes.append(len(data))
    return sizes


def _reopen(tmp_path: Path, **config: object) -> PartitionLog:
    return open_log(tmp_path, "topic-0", **config)


@pytest.mark.parametrize("cut", [1, 12, 40, 61, 70])
def test_torn_tail_is_cut_and_every_complete_batch_kept(tmp_path: Path, cut: int) -> None:
    log = open_log(tmp_path)
    sizes = _fill(log, 10)
    log.close(flush=False)  # a crash: no flush, no snapshot, no index files
    path = tmp_path / "topic-0" / f"{0:020d}.log"
    full = sum(sizes)
    with open(path, "r+b") as f:
        f.truncate(full - sizes[-1] + cut)  # part of the last batch reached the disk
    log = _reopen(tmp_path)
    assert log.log_end_offset == 18
    assert os.path.getsize(path) == full - sizes[-1]
    assert [r[2] for r in read_records(log)][-2:] == [b"value-008", b"x"]
    # The log carries on where the valid data ends.
    assert log.append_as_leader(batch([b"after"]), 0, now_ms=T0).base_offset == 18
    assert read_records(log)[-1] == (18, None, b"after")


@pytest.mark.parametrize("where", ["crc-covered", "length", "magic"])
def test_corrupt_byte_ends_the_log_at_that_batch(tmp_path: Path, where: str) -> None:
    log = open_log(tmp_path)
    sizes = _fill(log, 10)
    log.close(flush=False)
    path = tmp_path / "topic-0" / f"{0:020d}.log"
    start_of_sixth = sum(sizes[:5])
    offset_in_batch = {"crc-covered": 70, "length": 10, "magic": 16}[where]
    data = bytearray(path.read_bytes())
    data[start_of_sixth + offset_in_batch] ^= 0x5A
    path.write_bytes(bytes(data))
    log = _reopen(tmp_path)
    assert log.log_end_offset == 10
    assert os.path.getsize(path) == start_of_sixth
    assert [b.base_offset for b in read_batches(log)] == [0, 2, 4, 6, 8]


def test_corrupt_base_offset_outside_the_crc_is_caught(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    sizes = _fill(log, 4)
    log.close(flush=False)
    path = tmp_path / "topic-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, sizes[0] + sizes[1], 1)  # third batch claims offset 1
    path.write_bytes(bytes(data))
    log = _reopen(tmp_path)
    assert log.log_end_offset == 4


def test_crash_in_an_earlier_unflushed_segment_drops_the_later_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    _fill(log, 20)
    segments = log.segments
    assert len(segments) >= 4
    log.close(flush=False)
    second = Path(segments[1].path)
    data = bytearray(second.read_bytes())
    data[-5] ^= 0xFF  # corrupt the last batch of the second segment
    second.write_bytes(bytes(data))
    log = _reopen(tmp_path, segment_bytes=300)
    assert len(log.segments) == 2
    assert log.log_end_offset < segments[1].next_offset
    assert [r[0] for r in read_records(log)] == list(range(log.log_end_offset))


def test_after_a_clean_close_only_the_active_segment_is_rescanned(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    _fill(log, 20)
    segments = log.segments
    log.close()
    assert log.recovery_point == segments[-1].next_offset
    # Damage a flushed segment's data: it is trusted (as Kafka trusts data below
    # the recovery point), so the segment keeps its size.
    first = Path(segments[0].path)
    data = bytearray(first.read_bytes())
    data[-5] ^= 0xFF
    first.write_bytes(bytes(data))
    # Tear the active segment: that one is always recovered.
    active = Path(segments[-1].path)
    with open(active, "r+b") as f:
        f.truncate(os.path.getsize(active) - 3)
    log = _reopen(tmp_path, segment_bytes=300)
    assert log.segments[0].size_bytes == segments[0].size_bytes
    assert log.log_end_offset == segments[-1].next_offset - 2


def test_missing_or_corrupt_indexes_are_rebuilt_identically(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=4000, index_interval_bytes=100)
    _fill(log, 100)
    log.close()
    directory = tmp_path / "topic-0"
    base = log.segments[1].base_offset
    index = directory / f"{base:020d}.index"
    timeindex = directory / f"{base:020d}.timeindex"
    original = (index.read_bytes(), timeindex.read_bytes())
    assert len(original[0]) % 8 == 0 and len(original[0]) >= 8 * 5
    assert len(original[1]) % 12 == 0 and original[1]
    # Missing files.
    index.unlink()
    timeindex.unlink()
    log = _reopen(tmp_path, segment_bytes=4000, index_interval_bytes=100)
    assert (index.read_bytes(), timeindex.read_bytes()) == original
    assert log.read(base + 7, 1).first_offset == base + 6
    log.close()
    # Garbage in the offset index (entries not increasing).
    index.write_bytes(original[0][:8] + original[0][:8])
    log = _reopen(tmp_path, segment_bytes=4000, index_interval_bytes=100)
    assert index.read_bytes() == original[0]
    assert [r[0] for r in read_records(log)] == list(range(200))
    log.close()
    # An index pointing past the end of the log file.
    index.write_bytes(struct.pack(">ii", 1, 10**6))
    log = _reopen(tmp_path, segment_bytes=4000, index_interval_bytes=100)
    assert index.read_bytes() == original[0]


def test_index_entries_point_at_batch_starts(tmp_path: Path) -> None:
    log = open_log(tmp_path, index_interval_bytes=64)
    sizes = _fill(log, 30)
    log.roll(now_ms=T0)
    data = (tmp_path / "topic-0" / f"{0:020d}.index").read_bytes()
    starts = {sum(sizes[:i]): 2 * i + 1 for i in range(30)}  # position -> last offset
    entries = list(struct.iter_unpack(">ii", data))
    assert entries
    for rel, pos in entries:
        assert starts[pos] == rel


def test_partition_metadata_and_topic_id(tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    log = PartitionLog.open(tmp_path / "orders-3", LogConfig(), topic_id, now_ms=T0)
    assert (log.topic, log.partition) == ("orders", 3)
    flush_deferred_fsyncs()   # partition.metadata is written by a background thread
    text = (tmp_path / "orders-3" / "partition.metadata").read_text()
    lines = text.splitlines()
    assert lines[0] == "version: 0" and lines[1].startswith("topic_id: ")
    assert len(lines[1].split(": ")[1]) == 22  # Kafka's base64 Uuid
    log.close()
    again = PartitionLog.open(tmp_path / "orders-3", now_ms=T0)
    assert again.topic_id == topic_id
    again.close()
    with pytest.raises(errors.InconsistentTopicIdError):
        PartitionLog.open(tmp_path / "orders-3", LogConfig(), uuid.uuid4(), now_ms=T0)


def test_leftovers_of_an_interrupted_compaction_are_settled(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    _fill(log, 10)
    segments = log.segments
    log.close()
    directory = tmp_path / "topic-0"
    # An unfinished cleaned file is dropped...
    (directory / f"{0:020d}.log.cleaned").write_bytes(b"partial")
    # ...and a finished swap file replaces its segment (here: the first batch only).
    first = Path(segments[0].path).read_bytes()
    one_batch = first[: 12 + struct.unpack_from(">i", first, 8)[0]]
    (directory / f"{0:020d}.log.swap").write_bytes(one_batch)
    log = _reopen(tmp_path, segment_bytes=300)
    names = os.listdir(directory)
    assert not [n for n in names if n.endswith((".cleaned", ".swap"))]
    assert log.segments[0].size_bytes == len(one_batch)
    assert [r[0] for r in read_records(log)][:3] == [0, 1, segments[1].base_offset]


def test_crash_without_snapshot_rebuilds_state_from_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch([b"a"], pid=9, epoch=0, seq=0), 4, now_ms=T0)
    log.append_as_leader(batch([b"b", b"c"], pid=9, epoch=0, seq=1), 5, now_ms=T0)
    log.close(flush=False)
    assert not [n for n in os.listdir(tmp_path / "topic-0") if n.endswith(".snapshot")]
    log = _reopen(tmp_path)
    (info,) = log.producer_state()
    assert (info.producer_id, info.producer_epoch, info.last_sequence) == (9, 0, 2)
    assert log.epochs.entries == [(4, 0), (5, 1)]
