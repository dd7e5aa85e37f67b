"""The aborted-transaction index (Kafka's TransactionIndex) and the last stable offset."""

from __future__ import annotations

import struct
from pathlib import Path

from kaflite.cluster.log import AppendOrigin, PartitionLog
from kaflite.cluster.log._txn_index import TXNINDEX_SUFFIX, AbortedTxn
from kaflite.protocol.records import encode_end_txn_marker_batch
from tests.cluster.log.helpers import T0, batch, open_log

P1, P2 = 7001, 7002


class Producer:
    """A transactional producer writing straight into a log (sequences tracked)."""

    def __init__(self, log: PartitionLog, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def send(self, n: int = 2) -> int:
        values = [b"%d-%d" % (self.pid, self.seq + i) for i in range(n)]
        r = self.log.append_as_leader(
            batch(values, pid=self.pid, epoch=self.epoch, seq=self.seq, transactional=True),
            0, now_ms=T0)
        self.seq += n
        return r.base_offset

    def end(self, commit: bool, coordinator_epoch: int = 0) -> int:
        marker = encode_end_txn_marker_batch(commit, producer_id=self.pid,
                                             producer_epoch=self.epoch,
                                             coordinator_epoch=coordinator_epoch, timestamp=T0)
        return self.log.append_as_leader(marker, 0, now_ms=T0,
                                         origin=AppendOrigin.COORDINATOR).base_offset


def plain(log: PartitionLog, n: int = 1) -> int:
    return log.append_as_leader(batch([b"plain"] * n), 0, now_ms=T0).base_offset


def txnindex_files(directory: Path) -> dict[int, bytes]:
    return {int(p.name.split(".")[0]): p.read_bytes()
            for p in directory.iterdir() if p.name.endswith(TXNINDEX_SUFFIX)}


def test_abort_markers_are_indexed_with_the_stable_offset_of_the_moment(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(log, P1), Producer(log, P2)
    plain(log, 2)                       # 0-1
    first_a = a.send()                  # 2-3
    first_b = b.send()                  # 4-5
    abort_a = a.end(commit=False)       # 6: P2 still open, so the stable offset is 4
    commit_b = b.end(commit=True)       # 7: a commit is not indexed
    a.send()                            # 8-9
    abort_a2 = a.end(commit=False)      # 10: nothing open after it: 11
    assert (first_a, first_b, abort_a, commit_b, abort_a2) == (2, 4, 6, 7, 10)
    assert log.txn_index.entries == [
        AbortedTxn(P1, 2, 6, 4),
        AbortedTxn(P1, 8, 10, 11),
    ]
    # Kafka's layout: one 34-byte entry per aborted transaction, version 0.
    files = txnindex_files(log.directory)
    assert list(files) == [0]
    assert files[0] == (struct.pack(">hqqqq", 0, P1, 2, 6, 4)
                        + struct.pack(">hqqqq", 0, P1, 8, 10, 11))


def test_empty_transactions_and_commits_add_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(log, P1)
    a.end(commit=False)  # no data in this transaction: Kafka completes nothing
    a.send()
    a.end(commit=True)
    assert log.txn_index.entries == []
    assert txnindex_files(log.directory) == {}


def test_collect_follows_kafkas_overlap_rule(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(log, P1), Producer(log, P2)
    a.send()              # 0-1
    a.end(commit=False)   # 2 -> (P1, 0, 2, 3)
    b.send()              # 3-4
    b.end(commit=False)   # 5 -> (P2, 3, 5, 6)
    plain(log, 4)         # 6-9
    a.send()              # 10-11
    a.end(commit=False)   # 12 -> (P1, 10, 12, 13)

    def pids(start: int, end: int) -> list[tuple[int, int]]:
        return [(t.producer_id, t.first_offset) for t in log.collect_aborted_txns(start, end)]

    assert pids(0, 13) == [(P1, 0), (P2, 3), (P1, 10)]
    assert pids(0, 1) == [(P1, 0)]            # stops: P1's stable offset 3 >= 1
    assert pids(3, 6) == [(P2, 3)]            # P1's first marker (2) is before the fetch
    assert pids(2, 3) == [(P1, 0)]            # a marker at the fetch offset still counts
    assert pids(6, 10) == []                  # P1's last txn starts at the bound
    assert pids(6, 11) == [(P1, 10)]
    assert pids(13, 20) == []


def test_last_stable_offset_waits_for_the_marker_to_be_replicated(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(log, P1)
    plain(log, 2)
    a.send()                                   # 2-3
    assert log.last_stable_offset(4) == 2
    assert log.last_stable_offset(1) == 1      # never above the high watermark
    marker = a.end(commit=False)               # 4
    assert log.first_unstable_offset() is None
    assert log.last_stable_offset(4) == 2      # the marker is not below the HW yet
    assert log.last_stable_offset(5) == 5
    assert log.last_stable_offset(5) == 5 == marker + 1


def test_the_index_survives_a_clean_restart(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(log, P1)
    a.send()
    a.end(commit=False)
    entries = log.txn_index.entries
    log.close()
    log = open_log(tmp_path)
    assert log.txn_index.entries == entries == [AbortedTxn(P1, 0, 2, 3)]
    assert log.collect_aborted_txns(0, 3) == entries


def test_the_index_is_rebuilt_from_the_log_after_a_crash(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(log, P1), Producer(log, P2)
    a.send()             # 0-1, its transaction stays open across the roll
    b.send()             # 2-3
    b.end(commit=False)  # 4 -> (P2, 2, 4, 0): P1 still open
    log.roll(now_ms=T0)  # snapshot at 5: P1's open transaction is in it
    a.send()             # 5-6
    a.end(commit=False)  # 7 -> (P1, 0, 7, 8), in the second segment
    expected = [AbortedTxn(P2, 2, 4, 0), AbortedTxn(P1, 0, 7, 8)]
    assert log.txn_index.entries == expected
    assert sorted(txnindex_files(log.directory)) == [0, 5]
    log.close(flush=False)  # a crash: no snapshot at the end
    # The active segment's index writes never reached the disk.
    (log.directory / f"{5:020d}{TXNINDEX_SUFFIX}").write_bytes(b"")
    log = open_log(tmp_path)
    # Replayed from the snapshot at 5, which knew P1's open transaction.
    assert log.txn_index.entries == expected
    log.close(flush=False)
    for path in log.directory.iterdir():
        if path.name.endswith(".snapshot") or path.name.endswith(TXNINDEX_SUFFIX):
            path.unlink()
    log = open_log(tmp_path)  # no snapshot at all: the whole log is replayed
    assert log.txn_index.entries == expected
    assert txnindex_files(log.directory) == {
        0: struct.pack(">hqqqq", 0, P2, 2, 4, 0),
        5: struct.pack(">hqqqq", 0, P1, 0, 7, 8),
    }


def test_truncation_drops_the_entries_of_the_truncated_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(log, P1)
    a.send()             # 0-1
    a.end(commit=False)  # 2
    log.roll(now_ms=T0)
    a.send()             # 3-4
    a.end(commit=False)  # 5
    a.send()             # 6-7
    a.end(commit=False)  # 8
    assert [t.last_offset for t in log.txn_index.entries] == [2, 5, 8]
    log.truncate_to(6)
    assert log.txn_index.entries == [AbortedTxn(P1, 0, 2, 3), AbortedTxn(P1, 3, 5, 6)]
    assert txnindex_files(log.directory)[3] == struct.pack(">hqqqq", 0, P1, 3, 5, 6)
    log.truncate_to(5)   # the marker itself goes: the transaction is open again
    assert log.txn_index.entries == [AbortedTxn(P1, 0, 2, 3)]
    assert log.first_unstable_offset() == 3
    assert sorted(txnindex_files(log.directory)) == [0]
    log.close()
    assert open_log(tmp_path).txn_index.entries == [AbortedTxn(P1, 0, 2, 3)]


def test_deleted_segments_take_their_entries_along(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(log, P1)
    a.send()             # 0-1
    a.end(commit=False)  # 2
    log.roll(now_ms=T0)
    a.send()             # 3-4
    a.end(commit=False)  # 5
    log.roll(now_ms=T0)
    plain(log)           # 6
    assert sorted(txnindex_files(log.directory)) == [0, 3]
    log.delete_records_before(4)  # the first segment goes, the second stays
    assert log.txn_index.entries == [AbortedTxn(P1, 3, 5, 6)]
    assert sorted(txnindex_files(log.directory)) == [3]
    log.close()
    log = open_log(tmp_path)
    assert log.txn_index.entries == [AbortedTxn(P1, 3, 5, 6)]
    log.truncate_fully_and_start_at(100)
    assert log.txn_index.entries == []
    assert txnindex_files(log.directory) == {}


def test_a_follower_builds_the_same_index_from_replicated_batches(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader-0")
    a, b = Producer(leader, P1), Producer(leader, P2)
    a.send()
    b.send()
    a.end(commit=False)
    plain(leader)
    b.end(commit=False)
    follower = open_log(tmp_path, "follower-0")
    offset = 0
    for _ in range(leader.log_end_offset):  # bounded: at least one batch per round
        if offset >= leader.log_end_offset:
            break
        got = leader.read(offset, 100)
        follower.append_as_follower(got.records)
        offset = got.next_offset
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.txn_index.entries == leader.txn_index.entries
    assert len(leader.txn_index.entries) == 2
