"""ListOffsets by timestamp and max timestamp; the leader epoch cache and its checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.cluster.log import flush_deferred_fsyncs
from kaflite.cluster.log._epoch import LeaderEpochCache
from kaflite.cluster.log._index import OffsetIndex, TimeIndex
from tests.cluster.log.helpers import T0, batch, open_log

# -- the index classes ---------------------------------------------------------------------


def test_offset_index_lookup_truncate_and_file_format(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100)
    for rel, pos in [(5, 0), (9, 400), (20, 900)]:
        index.append(100 + rel, pos)
    index.append(110, 950)  # not increasing: ignored, as Kafka refuses it
    assert [index.lookup(o) for o in (99, 104, 105, 108, 109, 119, 120, 500)] == [
        0, 0, 0, 0, 400, 400, 900, 900,
    ]
    assert index.floor_position(899) == 400 and index.floor_position(900) == 900
    index.write()
    assert (tmp_path / "x.index").read_bytes() == bytes.fromhex(
        "00000005 00000000 00000009 00000190 00000014 00000384".replace(" ", "")
    )
    other = OffsetIndex(tmp_path / "x.index", 100)
    assert other.load(log_size=1000)
    assert list(other.positions) == [0, 400, 900]
    assert not other.load(log_size=900)  # an entry past the end of the log
    index.truncate_to(109)
    assert list(index.relative_offsets) == [5]


def test_time_index_keeps_increasing_timestamps(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 50)
    for ts, off in [(10, 51), (10, 52), (30, 55), (20, 56), (40, 60)]:
        index.maybe_append(ts, off)
    assert list(index.timestamps) == [10, 30, 40]
    assert [index.lookup(t) for t in (5, 10, 29, 30, 100)] == [50, 51, 51, 55, 60]
    index.write()
    data = (tmp_path / "x.timeindex").read_bytes()
    assert len(data) == 36 and data[:12] == (10).to_bytes(8, "big") + (1).to_bytes(4, "big")
    index.truncate_to(55)
    assert index.last_entry == (10, 51)


# -- ListOffsets ---------------------------------------------------------------------------------


def test_offset_for_timestamp_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=50)
    for i in range(40):
        log.append_as_leader(batch([b"a", b"b"], timestamps=[T0 + 10 * i, T0 + 10 * i + 5]), 0,
                             now_ms=T0)
    assert len(log.segments) > 3
    for target, expected in [(0, 0), (T0, 0), (T0 + 1, 1), (T0 + 5, 1), (T0 + 6, 2),
                             (T0 + 200, 40), (T0 + 395, 79)]:
        found = log.offset_for_timestamp(target)
        assert found is not None and found.offset == expected, target
        assert found.timestamp >= target
    assert log.offset_for_timestamp(T0 + 396) is None
    # Records below the log start offset are not answers any more.
    log.delete_records_before(41)
    found = log.offset_for_timestamp(T0)
    assert found is not None and found.offset == 41


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append_as_leader(batch([b"a", b"b", b"c"], timestamps=[T0 + 50, T0 + 10, T0 + 30]), 0,
                         now_ms=T0)
    log.append_as_leader(batch([b"d"], ts=T0 + 20), 0, now_ms=T0)
    found = log.offset_for_timestamp(T0 + 25)
    assert found is not None and tuple(found) == (0, T0 + 50)  # first offset whose ts >= target
    found = log.offset_for_timestamp(T0 + 15)
    assert found is not None and found.offset == 0


def test_max_timestamp_finds_the_record_not_just_the_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    assert log.max_timestamp() is None
    for i in range(10):
        ts = [T0 + i, T0 + 1000 + i if i == 4 else T0 + i, T0 + i]
        log.append_as_leader(batch([b"x", b"y", b"z"], timestamps=ts), 0, now_ms=T0)
    found = log.max_timestamp()
    assert found is not None and tuple(found) == (13, T0 + 1004)
    log.close()
    log = open_log(tmp_path, segment_bytes=300)  # the answer survives a restart
    found = log.max_timestamp()
    assert found is not None and tuple(found) == (13, T0 + 1004)


def test_max_timestamp_with_log_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    log.append_as_leader(batch([b"a", b"b"]), 0, now_ms=T0 + 7)
    log.append_as_leader(batch([b"c", b"d"]), 0, now_ms=T0 + 5)
    found = log.max_timestamp()
    assert found is not None and tuple(found) == (0, T0 + 7)


# -- the leader epoch cache ---------------------------------------------------------------------


def test_end_offset_for_epoch_follows_kafka(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.end_offset_for_epoch(0) == (-1, -1)
    for epoch, n in [(1, 3), (3, 2), (6, 4)]:
        for _ in range(n):
            log.append_as_leader(batch([b"v"]), epoch, now_ms=T0)
    assert log.epochs.entries == [(1, 0), (3, 3), (6, 5)]
    assert log.latest_epoch == 6
    assert log.end_offset_for_epoch(6) == (6, 9)  # the current epoch ends at the log end
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(4) == (3, 5)  # largest epoch <= 4 is 3
    assert log.end_offset_for_epoch(2) == (1, 3)
    assert log.end_offset_for_epoch(0) == (0, 0)  # older than any: Kafka answers its start
    assert log.end_offset_for_epoch(7) == (-1, -1)
    assert log.end_offset_for_epoch(-1) == (-1, -1)
    assert [log.epoch_for_offset(o) for o in (0, 2, 3, 5, 8)] == [1, 1, 3, 6, 6]


def test_epoch_checkpoint_format_and_persistence(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.assign_epoch(2, 0)
    log.append_as_leader(batch([b"a", b"b"]), 2, now_ms=T0)
    log.assign_epoch(5, 2)  # a new leader starts its epoch at its log end
    log.append_as_leader(batch([b"c"]), 5, now_ms=T0)
    path = tmp_path / "topic-0" / "leader-epoch-checkpoint"
    flush_deferred_fsyncs()   # the file is written by a background thread (issue 36)
    assert path.read_text() == "0\n2\n2 0\n5 2\n"
    log.close(flush=False)
    log = open_log(tmp_path)
    assert log.epochs.entries == [(2, 0), (5, 2)]
    # Truncation drops the epochs that started after the new end.
    log.truncate_to(2)
    assert log.epochs.entries == [(2, 0)]
    flush_deferred_fsyncs()
    assert path.read_text() == "0\n1\n2 0\n"
    # A checkpoint that runs past the log end (a crash after it was written) is cut back.
    path.write_text("0\n3\n2 0\n5 2\n9 50\n")
    log.close(flush=False)
    log = open_log(tmp_path)
    assert log.log_end_offset == 2
    assert log.epochs.entries == [(2, 0)]
    flush_deferred_fsyncs()
    assert path.read_text() == "0\n1\n2 0\n"


def test_epoch_cache_unit_rules(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.assign(1, 10)
    assert not cache.assign(1, 12)  # same epoch, later offset: nothing new
    assert cache.assign(1, 5)  # same epoch, earlier offset: replaces it
    assert cache.entries == [(1, 5)]
    cache.assign(3, 20)
    cache.assign(4, 30)
    cache.assign(2, 25)  # breaks monotonicity: 3 and 4 go
    assert cache.entries == [(1, 5), (2, 25)]
    cache.truncate_from_start(27)
    assert cache.entries == [(2, 27)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 200)), max_size=12),
    requested=st.integers(-1, 25),
)
def test_epoch_cache_is_always_monotonic(tmp_path: Path, entries: list[tuple[int, int]],
                                         requested: int) -> None:
    cache = LeaderEpochCache(tmp_path, persist=False)
    for epoch, start in entries:
        cache.assign(epoch, start)
        epochs = [e for e, _ in cache.entries]
        starts = [s for _, s in cache.entries]
        assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))
    # Kafka's rule, restated: the largest epoch <= requested, ending where the next begins.
    table = cache.entries
    if requested < 0 or not table or requested > table[-1][0]:
        expected = (-1, -1)
    elif requested == table[-1][0]:
        expected = (requested, 1000)
    else:
        lower = [e for e, _ in table if e <= requested]
        next_start = next(s for e, s in table if e > requested)
        expected = (lower[-1] if lower else requested, next_start)
    assert cache.end_offset_for(requested, 1000) == expected


def test_truncating_at_the_log_end_drops_an_epoch_started_there(tmp_path: Path) -> None:
    """A broker that became leader (epoch 1 starts at its log end) and lost the
    leadership before appending anything: when the new leader says the log
    diverged at that end, the empty epoch must go, or every later Fetch of this
    follower diverges again."""
    log = open_log(tmp_path)
    log.append_as_leader(batch([b"a", b"b"]), 0, now_ms=T0)
    log.epochs.assign(1, log.log_end_offset)
    assert log.epochs.latest_epoch == 1
    log.truncate_to(log.log_end_offset)
    assert log.epochs.latest_epoch == 0
    assert log.log_end_offset == 2


def test_an_epoch_checkpoint_is_written_at_once_and_fsynced_off_the_callers_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Leader changes rewrite thousands of these at once (issue 36): the file is in
    place when the call returns, its fsync runs on the deferred-sync thread, and
    ``flush_deferred_fsyncs`` waits for it."""
    import os
    import threading

    from kaflite.cluster.log import flush_deferred_fsyncs
    from kaflite.cluster.log._files import read_epoch_checkpoint, write_epoch_checkpoint

    caller = threading.get_ident()
    synced_on: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced_on.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    write_epoch_checkpoint(tmp_path, [(0, 0), (3, 17)])
    assert read_epoch_checkpoint(tmp_path) == [(0, 0), (3, 17)]
    assert flush_deferred_fsyncs(10)
    assert synced_on and caller not in synced_on   # the file and its directory, elsewhere
