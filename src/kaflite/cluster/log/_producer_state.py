"""Producer state: what idempotent and transactional producers last wrote (KIP-98).

Theory of operation
-------------------
Every batch a producer sends carries (producerId, producerEpoch, baseSequence).
For each producer id the leader keeps its epoch and the metadata of its last
five batches (Kafka's ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``, matching the
client's ``max.in.flight.requests.per.connection`` limit of 5 for idempotence).
On a Produce the checks run in Kafka's order (``UnifiedLog.analyzeAndValidateProducerState``
then ``ProducerAppendInfo``):

1. the batch repeats one of the last five (same epoch, same first and last
   sequence): it is a retry whose response was lost; answer with the offsets
   it got the first time and write nothing;
2. its epoch is below the known one: the producer was fenced,
   INVALID_PRODUCER_EPOCH (what Kafka answers since 2.7, instead of
   PRODUCER_FENCED);
3. a new epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
4. the same epoch must continue at last sequence + 1 (wrapping after
   2^31-1), else OUT_OF_ORDER_SEQUENCE_NUMBER;
5. a producer id with no state is accepted at any sequence: since KIP-360
   the broker no longer answers UNKNOWN_PRODUCER_ID; the state may have been
   removed by retention or expiry, and the client resets its sequence itself.

Replicated batches skip the checks and only update the state, so a follower
holds the same state as its leader and idempotence survives a leader change.

The state is rebuilt after a restart from a snapshot plus the batches after
it. A snapshot ``<offset>.snapshot`` holds the state as of that offset; it is
written when a segment rolls and on a clean close. kaflite's snapshot format
is its own (Kafka's keeps only the last batch per producer, this one keeps all
five, so a retry after a broker restart is still recognised):

    version int16 (=100) | crc32c uint32 (of what follows) | count int32 | entries
    entry: producerId int64 | epoch int16 | coordinatorEpoch int32
           | currentTxnFirstOffset int64 | lastTimestamp int64 | batchCount int8
           | batchCount x (firstSeq int32 | lastSeq int32 | firstOffset int64
                           | lastOffset int64 | timestamp int64)

Transactions are tracked as far as the last stable offset needs: the first
offset of each open transaction, closed by a COMMIT or ABORT marker. As in
Kafka, a closed transaction keeps holding the last stable offset down until
the high watermark passes its marker (``unreplicatedTxns``), so a consumer
never reads a transaction whose outcome a leader change could still lose.
``update`` reports each transaction a marker closes, with which the log
feeds its aborted-transaction index (``_txn_index``).
"""

from __future__ import annotations

import contextlib
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from kaflite.cluster.log._files import SNAPSHOT_SUFFIX, base_offset_of, segment_path
from kaflite.cluster.log._segment import BatchInfo
from kaflite.cluster.log._types import AppendOrigin, ProducerInfo
from kaflite.protocol import errors
from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.records import RecordBatch, crc32c, read_end_txn_marker

__all__ = [
    "NUM_BATCHES_TO_RETAIN",
    "BatchMetadata",
    "CompletedTxn",
    "ProducerStateEntry",
    "ProducerStateManager",
]

NUM_BATCHES_TO_RETAIN = 5
_INT32_MAX = (1 << 31) - 1
_SNAPSHOT_VERSION = 100
_PREFIX = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Kafka's ``DefaultRecordBatch.incrementSequence``: sequences wrap after int32 max."""
    if base_sequence < 0:
        return -1
    if base_sequence > _INT32_MAX - last_offset_delta:
        return last_offset_delta - (_INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class CompletedTxn(NamedTuple):
    """A non-empty transaction closed by a marker (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = -1
    batches: list[BatchMetadata] = field(default_factory=list)
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1
    markers: int = 0        # COMMIT/ABORT markers applied since this broker loaded it
    marker_epoch: int = -1  # the epoch of the last of them

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def update_epoch(self, epoch: int) -> None:
        # A new epoch starts a new sequence space: the old batches no longer count.
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, meta: BatchMetadata) -> None:
        self.update_epoch(epoch)
        self.batches.append(meta)
        if len(self.batches) > NUM_BATCHES_TO_RETAIN:
            del self.batches[0]
        self.last_timestamp = meta.timestamp


class ProducerStateManager:
    """Per-partition producer state plus its snapshot files."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        # State reflects every batch below this offset.
        self.map_end_offset = 0
        self._open_txns: dict[int, int] = {}  # producer id -> first offset of its open txn
        # Closed transactions whose marker the high watermark has not passed yet:
        # (marker offset, first offset), in marker order.
        self._unreplicated: list[tuple[int, int]] = []

    # -- checks on the leader --------------------------------------------------------------
    def in_transaction(self, producer_id: int, epoch: int) -> bool:
        """The producer has a transaction open here, at this epoch (a leader then appends
        its batches without asking the transaction coordinator again)."""
        entry = self.producers.get(producer_id)
        return entry is not None and entry.producer_epoch == epoch \
            and entry.current_txn_first_offset >= 0

    def markers_seen(self, producer_id: int) -> tuple[int, int]:
        """How many transaction markers of this producer were applied, and the epoch of
        the last: a leader that asked the coordinator compares them before and after
        (KIP-890's verification guard)."""
        entry = self.producers.get(producer_id)
        return (entry.markers, entry.marker_epoch) if entry is not None else (0, -1)

    def check(
        self,
        producer_id: int,
        epoch: int,
        first_seq: int,
        last_seq: int,
        *,
        transactional: bool,
        control: bool,
        origin: AppendOrigin,
    ) -> BatchMetadata | None:
        """Validate a batch about to be appended; return the original on a duplicate."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return None  # KIP-360: no state yet, so any sequence is accepted
        if origin is AppendOrigin.CLIENT and not control:
            duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
            if duplicate is not None:
                return duplicate
        if epoch < entry.producer_epoch:
            raise errors.InvalidProducerEpochError(
                f"producer {producer_id} epoch {epoch} is older than the current {entry.producer_epoch}"
            )
        if control or origin is not AppendOrigin.CLIENT:
            return None
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != -1:
                raise errors.OutOfOrderSequenceNumberError(
                    f"producer {producer_id} starts epoch {epoch} at sequence {first_seq}, not 0"
                )
        elif not in_sequence(entry.last_seq, first_seq):
            raise errors.OutOfOrderSequenceNumberError(
                f"producer {producer_id} sent sequence {first_seq} after {entry.last_seq}"
            )
        if entry.current_txn_first_offset >= 0 and not transactional:
            raise errors.InvalidTxnStateError(
                f"producer {producer_id} wrote a non-transactional batch inside a transaction"
            )
        return None

    def check_batch(self, batch: RecordBatch, origin: AppendOrigin) -> BatchMetadata | None:
        """The leader's checks for one batch: a marker's, or a data batch's (which
        returns the original batch when this one repeats it)."""
        if batch.producer_id < 0:
            return None
        if batch.is_control:
            try:
                marker = read_end_txn_marker(batch)
            except RemoteProtocolError:
                return None
            self.check_marker(batch.producer_id, batch.producer_epoch, marker.coordinator_epoch)
            return None
        return self.check(batch.producer_id, batch.producer_epoch, batch.base_sequence,
                          last_sequence(batch.base_sequence, batch.last_offset_delta),
                          transactional=batch.is_transactional, control=False, origin=origin)

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Kafka's checks for a COMMIT/ABORT marker written by a transaction coordinator."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.producer_epoch:
            raise errors.InvalidProducerEpochError(
                f"marker for producer {producer_id} has epoch {epoch} < {entry.producer_epoch}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise errors.TransactionCoordinatorFencedError(
                f"coordinator epoch {coordinator_epoch} < {entry.coordinator_epoch}"
            )

    # -- updates -----------------------------------------------------------------------------
    def update(
        self, info: BatchInfo, batch: memoryview | bytes | None = None
    ) -> CompletedTxn | None:
        """Apply one batch now in the log (leader, follower and recovery alike).

        Returns the transaction a COMMIT/ABORT marker closed, if it had any data.
        """
        pid = info.producer_id
        completed = None
        if pid >= 0:
            entry = self.producers.get(pid)
            if entry is None:
                entry = self.producers[pid] = ProducerStateEntry(pid)
            if info.is_control:
                completed = self._apply_control(entry, info, batch)
            else:
                delta = info.last_offset - info.base_offset
                meta = BatchMetadata(
                    info.base_sequence,
                    last_sequence(info.base_sequence, delta),
                    info.base_offset,
                    info.last_offset,
                    info.max_timestamp,
                )
                entry.add_batch(info.producer_epoch, meta)
                if info.is_transactional and entry.current_txn_first_offset < 0:
                    entry.current_txn_first_offset = info.base_offset
                    self._open_txns[pid] = info.base_offset
        self.map_end_offset = max(self.map_end_offset, info.last_offset + 1)
        return completed

    def _apply_control(
        self, entry: ProducerStateEntry, info: BatchInfo, batch: memoryview | bytes | None
    ) -> CompletedTxn | None:
        if batch is None:
            return None
        try:
            marker = read_end_txn_marker(RecordBatch.from_buffer(batch))
        except RemoteProtocolError:
            return None  # not a transaction marker (or an emptied control batch)
        first = entry.current_txn_first_offset
        entry.markers += 1
        entry.marker_epoch = info.producer_epoch
        entry.update_epoch(info.producer_epoch)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = info.max_timestamp
        self._open_txns.pop(entry.producer_id, None)
        if first < 0:
            return None  # Kafka: a marker for an empty transaction completes nothing
        self._unreplicated.append((info.last_offset, first))
        return CompletedTxn(entry.producer_id, first, info.last_offset, not marker.is_commit)

    def last_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its last batch (the cleaner keeps that header)."""
        return {pid: e.batches[-1].last_offset for pid, e in self.producers.items() if e.batches}

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (bounds the last stable offset)."""
        return min(self._open_txns.values()) if self._open_txns else None

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka's ``lastStableOffset(completedTxn)``, stored in the aborted-txn index.

        Called once ``completed`` is closed: the oldest transaction still open,
        else the offset right after the marker.
        """
        first = self.first_unstable_offset()
        return completed.last_offset + 1 if first is None else first

    def last_stable_offset(self, high_watermark: int) -> int:
        """The partition's LSO: the high watermark, held down by open transactions
        and by closed ones whose marker is not replicated yet (below the watermark)."""
        unreplicated = self._unreplicated
        if unreplicated and unreplicated[0][0] < high_watermark:
            drop = 0
            while drop < len(unreplicated) and unreplicated[drop][0] < high_watermark:
                drop += 1
            del unreplicated[:drop]
        lso = high_watermark
        if self._open_txns:
            lso = min(lso, min(self._open_txns.values()))
        for _, first in unreplicated:
            lso = min(lso, first)
        return lso

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (no open transaction)."""
        expired = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def infos(self) -> list[ProducerInfo]:
        return [
            ProducerInfo(e.producer_id, e.producer_epoch, e.last_seq, e.last_timestamp,
                         e.coordinator_epoch, e.current_txn_first_offset)
            for e in sorted(self.producers.values(), key=lambda e: e.producer_id)
        ]

    def reset(self, map_end_offset: int) -> None:
        self.producers.clear()
        self._open_txns.clear()
        self._unreplicated.clear()
        self.map_end_offset = map_end_offset

    # -- snapshots ----------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        offsets = []
        for name in os.listdir(self.directory):
            if name.endswith(SNAPSHOT_SUFFIX):
                offset = base_offset_of(name)
                if offset is not None:
                    offsets.append(offset)
        return sorted(offsets)

    def _snapshot_path(self, offset: int) -> Path:
        return segment_path(self.directory, offset, SNAPSHOT_SUFFIX)

    def take_snapshot(self, *, sync: bool = False) -> None:
        """Write the state as of ``map_end_offset`` (skipped if that snapshot exists)."""
        path = self._snapshot_path(self.map_end_offset)
        if path.exists():
            return
        body = bytearray(_COUNT.pack(len(self.producers)))
        for e in self.producers.values():
            body += _ENTRY.pack(e.producer_id, e.producer_epoch, e.coordinator_epoch,
                                e.current_txn_first_offset, e.last_timestamp, len(e.batches))
            for b in e.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset,
                                    b.timestamp)
        data = _PREFIX.pack(_SNAPSHOT_VERSION, crc32c(body)) + bytes(body)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    def _read_snapshot(self, offset: int) -> dict[int, ProducerStateEntry] | None:
        try:
            data = self._snapshot_path(offset).read_bytes()
            version, crc = _PREFIX.unpack_from(data, 0)
            body = memoryview(data)[_PREFIX.size :]
            if version != _SNAPSHOT_VERSION or crc32c(body) != crc:
                return None
            (count,) = _COUNT.unpack_from(body, 0)
            at = _COUNT.size
            producers: dict[int, ProducerStateEntry] = {}
            for _ in range(count):
                pid, epoch, coord, txn, ts, n = _ENTRY.unpack_from(body, at)
                at += _ENTRY.size
                batches = []
                for _ in range(n):
                    batches.append(BatchMetadata(*_BATCH.unpack_from(body, at)))
                    at += _BATCH.size
                producers[pid] = ProducerStateEntry(pid, epoch, batches, coord, txn, ts)
            if at != len(body):
                return None
            return producers
        except (OSError, struct.error):
            return None

    def load_snapshot(self, max_offset: int) -> int | None:
        """Load the newest readable snapshot at or below ``max_offset``; return its offset.

        Unreadable snapshots are deleted, as Kafka does with a corrupt one.
        """
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                continue
            producers = self._read_snapshot(offset)
            if producers is None:
                self._snapshot_path(offset).unlink(missing_ok=True)
                continue
            self.producers = producers
            self._open_txns = {
                pid: e.current_txn_first_offset
                for pid, e in producers.items()
                if e.current_txn_first_offset >= 0
            }
            # Closed before the snapshot and still unreplicated: the replay will not see them.
            self._unreplicated = [u for u in self._unreplicated if u[0] < offset]
            self.map_end_offset = offset
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        for snap in self.snapshot_offsets():
            if snap > offset:
                self._snapshot_path(snap).unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshots below ``offset`` but always keep the newest one."""
        offsets = self.snapshot_offsets()
        for snap in offsets[:-1]:
            if snap < offset:
                self._snapshot_path(snap).unlink(missing_ok=True)

    def delete_all_snapshots(self) -> None:
        for snap in self.snapshot_offsets():
            with contextlib.suppress(FileNotFoundError):
                self._snapshot_path(snap).unlink()
