"""Idempotent producers (KIP-98): dedup of the last five batches, sequence and epoch checks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kaflite.cluster.log import AppendOrigin, AppendResult, PartitionLog
from kaflite.protocol import errors
from kaflite.protocol.records import encode_end_txn_marker_batch
from tests.cluster.log.helpers import T0, batch, open_log

INT32_MAX = (1 << 31) - 1
PID = 4000


def produce(
    log: PartitionLog, seq: int, n: int = 2, epoch: int = 0, pid: int = PID
) -> AppendResult:
    values = [b"p%d-s%d-%d" % (epoch, seq, i) for i in range(n)]
    return log.append_as_leader(batch(values, pid=pid, epoch=epoch, seq=seq), 0, now_ms=T0)


def _send_seven(log: PartitionLog) -> list[tuple[int, int]]:
    offsets = []
    for k in range(7):
        r = produce(log, seq=2 * k)
        assert not r.duplicate
        offsets.append((r.base_offset, r.last_offset))
    return offsets


def test_retries_of_the_last_five_batches_return_the_original_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    offsets = _send_seven(log)
    end = log.log_end_offset
    for k in range(2, 7):
        r = produce(log, seq=2 * k)
        assert r.duplicate and (r.base_offset, r.last_offset) == offsets[k]
    assert log.log_end_offset == end
    # The sixth batch back is forgotten: a retry of it is out of order.
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        produce(log, seq=2)
    assert log.log_end_offset == end


def test_gaps_and_repeats_in_sequence_are_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, seq=0)
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        produce(log, seq=3)
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        produce(log, seq=1)  # overlaps the last batch without being a retry of it
    assert produce(log, seq=2).base_offset == 2
    assert log.log_end_offset == 4


def test_epoch_fencing_and_new_epochs(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, seq=0, epoch=1)
    with pytest.raises(errors.InvalidProducerEpochError):
        produce(log, seq=2, epoch=0)
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        produce(log, seq=5, epoch=2)  # a new epoch must start at sequence 0
    assert not produce(log, seq=0, epoch=2).duplicate
    with pytest.raises(errors.InvalidProducerEpochError):
        produce(log, seq=0, epoch=1)  # the old epoch's batch is no duplicate any more
    (info,) = log.producer_state()
    assert (info.producer_epoch, info.last_sequence) == (2, 1)


def test_unknown_producer_is_accepted_at_any_sequence(tmp_path: Path) -> None:
    # KIP-360 / ProducerAppendInfo: with no state (e.g. removed by retention) the
    # broker accepts the batch and the state starts from it.
    log = open_log(tmp_path)
    assert produce(log, seq=17).base_offset == 0
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        produce(log, seq=0)
    assert produce(log, seq=19).base_offset == 2


def test_sequence_numbers_wrap_after_int32_max(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, seq=INT32_MAX - 1, n=2)  # last sequence INT32_MAX
    produce(log, seq=0, n=1)
    (info,) = log.producer_state()
    assert info.last_sequence == 0
    other = open_log(tmp_path, "other-0")
    produce(other, seq=INT32_MAX, n=3)  # a batch that wraps inside itself
    (info,) = other.producer_state()
    assert info.last_sequence == 1
    assert produce(other, seq=2).base_offset == 3
    assert produce(other, seq=INT32_MAX, n=3).duplicate


def test_idempotent_batch_without_sequence_is_invalid(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    with pytest.raises(errors.InvalidRecordError):
        log.append_as_leader(batch([b"x"], pid=PID, epoch=0, seq=-1), 0, now_ms=T0)


def test_duplicate_under_log_append_time_returns_the_original_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    first = log.append_as_leader(batch([b"x"], pid=PID, epoch=0, seq=0), 0, now_ms=T0 + 1)
    again = log.append_as_leader(batch([b"x"], pid=PID, epoch=0, seq=0), 0, now_ms=T0 + 99)
    assert again.duplicate and again.log_append_time == first.log_append_time == T0 + 1


@pytest.mark.parametrize("clean", [True, False])
def test_state_survives_a_restart(tmp_path: Path, clean: bool) -> None:
    log = open_log(tmp_path, segment_bytes=250)
    offsets = _send_seven(log)
    assert len(log.segments) > 2  # snapshots were taken at the rolls
    log.close(flush=clean)
    log = open_log(tmp_path, segment_bytes=250)
    for k in range(2, 7):
        r = produce(log, seq=2 * k)
        assert r.duplicate and (r.base_offset, r.last_offset) == offsets[k]
    assert produce(log, seq=14).base_offset == 14


def test_corrupt_snapshot_falls_back_to_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=250)
    offsets = _send_seven(log)
    log.close()
    directory = tmp_path / "topic-0"
    for name in os.listdir(directory):
        if name.endswith(".snapshot"):
            (directory / name).write_bytes(b"\x00\x64garbage")
    log = open_log(tmp_path, segment_bytes=250)
    r = produce(log, seq=12)
    assert r.duplicate and (r.base_offset, r.last_offset) == offsets[6]


def test_a_follower_that_becomes_leader_knows_the_producers(tmp_path: Path) -> None:
    leader = open_log(tmp_path, "leader-0")
    follower = open_log(tmp_path, "follower-0")
    offsets = _send_seven(leader)
    follower.append_as_follower(leader.read(0, 1 << 20).records, now_ms=T0)
    assert follower.producer_state() == leader.producer_state()
    r = produce(follower, seq=12)
    assert r.duplicate and (r.base_offset, r.last_offset) == offsets[6]
    with pytest.raises(errors.OutOfOrderSequenceNumberError):
        produce(follower, seq=20)


def test_truncation_rolls_the_producer_state_back(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=250)
    offsets = _send_seven(log)
    log.truncate_to(offsets[4][0])  # batches 4, 5, 6 are gone
    (info,) = log.producer_state()
    assert info.last_sequence == 7
    r = produce(log, seq=8)
    assert not r.duplicate and r.base_offset == offsets[4][0]
    log.close()
    log = open_log(tmp_path, segment_bytes=250)
    (info,) = log.producer_state()
    assert info.last_sequence == 9


def test_idle_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path, producer_id_expiration_ms=1000)
    produce(log, seq=0)
    log.housekeeping(T0 + 500)
    assert len(log.producer_state()) == 1
    log.housekeeping(T0 + 1000)
    assert log.producer_state() == []
    assert produce(log, seq=9).base_offset == 2  # unknown again: any sequence


def test_transactions_bound_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, seq=0, pid=1)
    txn = log.append_as_leader(
        batch([b"t1", b"t2"], pid=PID, epoch=3, seq=0, transactional=True), 0, now_ms=T0
    )
    assert log.first_unstable_offset() == txn.base_offset == 2
    with pytest.raises(errors.InvalidTxnStateError):
        produce(log, seq=2, epoch=3)  # a plain batch inside the open transaction
    (info,) = [p for p in log.producer_state() if p.producer_id == PID]
    assert info.current_txn_start_offset == 2
    marker = encode_end_txn_marker_batch(True, producer_id=PID, producer_epoch=3,
                                         coordinator_epoch=7, timestamp=T0)
    with pytest.raises(errors.InvalidRecordError):
        log.append_as_leader(marker, 0, now_ms=T0)  # clients may not write control batches
    log.append_as_leader(marker, 0, now_ms=T0, origin=AppendOrigin.COORDINATOR)
    assert log.first_unstable_offset() is None
    (info,) = [p for p in log.producer_state() if p.producer_id == PID]
    assert (info.coordinator_epoch, info.current_txn_start_offset) == (7, -1)
    stale = encode_end_txn_marker_batch(False, producer_id=PID, producer_epoch=3,
                                        coordinator_epoch=6, timestamp=T0)
    with pytest.raises(errors.TransactionCoordinatorFencedError):
        log.append_as_leader(stale, 0, now_ms=T0, origin=AppendOrigin.COORDINATOR)
    # The open/closed transaction state survives a crash too.
    log.append_as_leader(batch([b"t3"], pid=PID, epoch=3, seq=2, transactional=True), 0,
                         now_ms=T0)
    log.close(flush=False)
    log = open_log(tmp_path)
    assert log.first_unstable_offset() == 5
