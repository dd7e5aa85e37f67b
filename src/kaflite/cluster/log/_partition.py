"""``PartitionLog``: one partition replica's log on disk (Kafka's ``UnifiedLog``).

Theory of operation
-------------------
The segments live in a ``LocalLog``; the last one is active and takes every
append. Offsets below ``log_start_offset`` are logically gone (DeleteRecords or
retention); ``log_end_offset`` is the offset the next record gets.

A leader append (``append_as_leader``) is, in order:

1. validate the record set on its raw bytes (``_validation``): framing,
   CRC-32C, counts, size, one batch per Produce, sequence, timestamps;
2. check the producer state: a retry of one of the producer's last five
   batches is answered with its original offsets and nothing is written;
3. copy the request bytes once (``bytearray``) and stamp the copy: base
   offset, partition leader epoch, and LogAppendTime when the topic wants it
   (only that last one changes bytes under the CRC, which is recomputed);
4. roll the active segment if the batch would overflow ``segment.bytes`` or the
   segment is older than ``segment.ms`` (a producer snapshot is taken then);
5. record the leader epoch if this is the epoch's first batch, write the bytes
   with one ``os.write`` (no fsync unless ``flush.messages`` says so), index
   them in memory, and update the producer state (a marker closing an aborted
   transaction also adds an entry to the aborted-transaction index, ``_txn_index``).

A read is a binary search over segments, one over the offset index, a short
header walk and one ``os.pread``; the bytes returned are the bytes on disk.
The parts, their state and the write primitives are in ``_partition_state``.
Loading at startup is in ``_recovery``; retention and compaction decisions in
``_retention``, the rewrite itself in ``_cleaner``.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from kaflite.cluster.log._cleaner import CleanerStats, clean_segments
from kaflite.cluster.log._config import LogConfig
from kaflite.cluster.log._files import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    parse_partition_dir,
    parse_topic_id,
    read_partition_metadata,
    write_partition_metadata,
)
from kaflite.cluster.log._local import LocalLog
from kaflite.cluster.log._partition_state import PartitionState, wall_clock_ms
from kaflite.cluster.log._recovery import load_segments
from kaflite.cluster.log._retention import cleanable_count, retention_breaches
from kaflite.cluster.log._segment import BatchInfo
from kaflite.cluster.log._types import (
    AppendOrigin,
    AppendResult,
    ReadResult,
    TimestampOffset,
)
from kaflite.cluster.log._validation import parse_replicated, validate_produce
from kaflite.protocol import errors
from kaflite.protocol.records import (
    RecordBatch,
    assign_offsets,
    set_log_append_time,
)

__all__ = ["PartitionLog"]

_LOG_APPEND_TIME_BIT = 0x08


class PartitionLog(PartitionState):
    """The log of one partition replica; see the module docstring. Open with ``open``."""

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: LogConfig | None = None,
        topic_id: uuid.UUID | str | None = None,
        *,
        now_ms: int | None = None,
    ) -> PartitionLog:
        """Create the partition directory, or load and recover an existing one."""
        directory = Path(directory)
        # A new log has nothing to read or recover: creating 1,000 partitions a request
        # spent most of its time reading checkpoints that do not exist yet (issue 36).
        fresh = not directory.is_dir()
        directory.mkdir(parents=True, exist_ok=True)
        config = config or LogConfig()
        topic, partition = parse_partition_dir(directory.name) or (directory.name, 0)
        now = wall_clock_ms() if now_ms is None else now_ms
        try:
            known = None if fresh else read_partition_metadata(directory)
        except ValueError:
            known = None  # unreadable: rewritten below when the topic id is known
        wanted = None if topic_id is None else parse_topic_id(topic_id)
        if wanted is not None and known is not None and wanted != known:
            raise errors.InconsistentTopicIdError(
                f"{directory} belongs to topic id {known}, not {wanted}"
            )
        if wanted is not None and known is None:
            write_partition_metadata(directory, wanted)
        local = LocalLog(directory, config, [])
        self = cls(directory, config, topic, partition, wanted or known, local)
        if fresh:
            self._recovery_point = start = 0
            segments = []
        else:
            self._recovery_point = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT) or 0
            segments = load_segments(
                directory,
                index_interval=config.index_interval_bytes,
                recovery_point=self._recovery_point,
                epochs=self.epochs,
                now_ms=now,
            )
            start = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT) or 0
        local.replace(segments or [local.new_segment(start, now)])
        self.txn_index.load(local.bases, local.log_end_offset)
        self._log_start_offset = max(start, local.segments[0].base_offset)
        if self._log_start_offset > self.log_end_offset:
            self.truncate_fully_and_start_at(self._log_start_offset)
        self._recovery_point = min(self._recovery_point, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.truncate_from_start(self._log_start_offset)
        # A snapshot past the recovered end describes batches that are gone.
        self.producers.delete_snapshots_after(self.log_end_offset)
        self._rebuild_producer_state()
        return self

    # -- appends --------------------------------------------------------------------------------
    def append_as_leader(
        self,
        records: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        now_ms: int | None = None,
        timestamp_type: str | None = None,
        max_message_bytes: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Validate, stamp and append a Produce record set; see the module docstring.

        ``timestamp_type`` and ``max_message_bytes`` default to the topic config.
        Raises the Kafka error a Produce response carries: CORRUPT_MESSAGE,
        INVALID_RECORD, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_TIMESTAMP,
        INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, ...
        """
        self._check_open()
        cfg = self._config
        now = wall_clock_ms() if now_ms is None else now_ms
        view = memoryview(records).cast("B")
        if not len(view):
            return AppendResult(-1, -1, -1, self._log_start_offset, False, 0)
        log_append = (timestamp_type or cfg.message_timestamp_type) == "LogAppendTime"
        batches = validate_produce(
            view, cfg, now_ms=now, log_append_time=log_append,
            max_message_bytes=cfg.max_message_bytes if max_message_bytes is None else max_message_bytes,
            from_client=origin is AppendOrigin.CLIENT,
        )
        for batch in batches:
            duplicate = self._check_producer(batch, origin, log_append)
            if duplicate is not None:
                return duplicate
        # One copy of the request bytes; offsets and the epoch are stamped into it.
        buffer = bytearray(view)
        base = self.log_end_offset
        next_offset = assign_offsets(buffer, base, partition_leader_epoch=leader_epoch)
        if log_append:
            pos = 0
            for batch in batches:
                set_log_append_time(buffer, now, pos)
                pos += batch.size_in_bytes
        max_ts = now if log_append else max(b.max_timestamp for b in batches)
        if leader_epoch >= 0 and leader_epoch > self.epochs.latest_epoch:
            self.epochs.assign(leader_epoch, base)
        self._write(buffer, base, next_offset - 1, max_ts, now)
        pos, offset, count = 0, base, 0
        for batch in batches:
            size = batch.size_in_bytes
            info = BatchInfo(
                pos, size, offset, offset + batch.last_offset_delta, leader_epoch,
                batch.attributes | (_LOG_APPEND_TIME_BIT if log_append else 0),
                now if log_append else batch.max_timestamp, batch.producer_id,
                batch.producer_epoch, batch.base_sequence, batch.record_count,
            )
            self._update_producers(info, memoryview(buffer)[pos : pos + size],
                                   self._local.active.base_offset)
            offset, pos, count = info.last_offset + 1, pos + size, count + batch.record_count
        self._after_append(count)
        return AppendResult(
            base, next_offset - 1, now if log_append else -1, self._log_start_offset, False, count
        )

    def _check_producer(
        self, batch: RecordBatch, origin: AppendOrigin, log_append: bool
    ) -> AppendResult | None:
        duplicate = self.producers.check_batch(batch, origin)
        if duplicate is None:
            return None
        # Kafka answers a duplicate with the original offsets and, under
        # LogAppendTime, the original append time.
        return AppendResult(
            duplicate.first_offset, duplicate.last_offset,
            duplicate.timestamp if log_append else -1, self._log_start_offset, True,
            batch.record_count,
        )

    def append_as_follower(
        self, records: bytes | bytearray | memoryview, *, now_ms: int | None = None
    ) -> AppendResult:
        """Append batches replicated from the leader, offsets and epochs already stamped.

        Offsets must move forward from the log end offset; gaps are allowed (a
        compacted leader has them), overlap raises ``UnexpectedAppendOffsetError``
        (Kafka's ``UnexpectedAppendOffsetException``). A torn trailing batch (a
        fetch response cut at its size limit) is left out.
        """
        self._check_open()
        now = wall_clock_ms() if now_ms is None else now_ms
        view = memoryview(records).cast("B")
        infos = parse_replicated(view, self.log_end_offset)
        if not infos:
            return AppendResult(-1, -1, -1, self._log_start_offset, False, 0)
        # Write in runs that fit a segment, so a fetch larger than segment.bytes rolls.
        start = 0
        while start < len(infos):
            end, size = start + 1, infos[start].size
            while end < len(infos) and size + infos[end].size <= self._config.segment_bytes:
                size += infos[end].size
                end += 1
            run = infos[start:end]
            for info in run:
                if info.leader_epoch >= 0 and info.leader_epoch > self.epochs.latest_epoch:
                    self.epochs.assign(info.leader_epoch, info.base_offset)
            at = run[0].position
            self._write(view[at : at + size], run[0].base_offset, run[-1].last_offset,
                        max(i.max_timestamp for i in run), now)
            for info in run:
                self._update_producers(info, view[info.position : info.position + info.size],
                                       self._local.active.base_offset)
            start = end
        count = sum(i.record_count for i in infos)
        self._after_append(count)
        return AppendResult(
            infos[0].base_offset, infos[-1].last_offset, -1, self._log_start_offset, False, count
        )


    # -- reads ------------------------------------------------------------------------------------
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, from a single segment.

        ``max_offset`` is exclusive (the high watermark for a consumer): a batch
        is returned only if its last offset is below it. At most ``max_bytes``
        are returned, except that with ``min_one_batch`` a first batch larger
        than that comes whole (KIP-74).
        """
        self._check_open()
        leo = self.log_end_offset
        if fetch_offset < self._log_start_offset or fetch_offset > leo:
            raise errors.OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{self._log_start_offset}, {leo}] "
                f"of {self.topic}-{self.partition}"
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        if fetch_offset >= limit:
            return ReadResult(b"", -1, fetch_offset, self._log_start_offset, leo)
        data, first, following = self._local.read(fetch_offset, max_bytes, limit, min_one_batch)
        if not data:
            return ReadResult(b"", -1, fetch_offset, self._log_start_offset, leo)
        return ReadResult(data, first, following, self._log_start_offset, leo)

    def offset_for_timestamp(self, timestamp: int) -> TimestampOffset | None:
        """ListOffsets by timestamp: the first record with a timestamp >= ``timestamp``."""
        self._check_open()
        found = self._local.offset_for_timestamp(timestamp, self._log_start_offset)
        return None if found is None else TimestampOffset(*found)

    def max_timestamp(self) -> TimestampOffset | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the record with the largest timestamp."""
        self._check_open()
        found = self._local.max_timestamp()
        return None if found is None else TimestampOffset(*found)

    # -- truncation ----------------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop everything at or after ``offset`` (a follower whose log diverged).

        A batch that straddles ``offset`` is dropped whole, so the log end may
        land below ``offset``. Indexes, epoch cache and producer state follow.
        """
        self._check_open()
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        if offset >= self.log_end_offset:
            # Nothing to drop from the log, but the epoch cache may end in an epoch
            # this broker started as leader without appending to it (Kafka's
            # UnifiedLog.truncateTo does the same): left there, it would make every
            # Fetch of this follower diverge again, for ever.
            self.epochs.truncate_from_end(self.log_end_offset)
            return
        if offset < self._log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self._local.truncate_to(offset)
        leo = self.log_end_offset
        self.epochs.truncate_from_end(leo)
        self.producers.delete_snapshots_after(leo)
        self._rebuild_producer_state()
        if self._recovery_point > leo:
            # Segments rolled later must not pass as flushed if we crash before a flush.
            self._recovery_point = leo
            self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, leo)
        self._cleaned_through = -1

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything and restart the log, empty, at ``offset``."""
        self._check_open()
        self._local.reset_at(offset, wall_clock_ms())
        self._log_start_offset = offset
        self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, offset)
        self.epochs.clear()
        self.producers.delete_all_snapshots()
        self.producers.reset(offset)
        self.txn_index.clear()
        self._recovery_point = offset
        self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, offset)
        self._cleaned_through = -1

    def _rebuild_producer_state(self) -> None:
        """The newest snapshot at or below the log end, then the batches after it."""
        leo = self.log_end_offset
        loaded = self.producers.load_snapshot(leo)
        if loaded is None:
            loaded = self._local.segments[0].base_offset
            self.producers.reset(loaded)
        # Markers from ``loaded`` on are replayed: their index entries are recomputed.
        self.txn_index.truncate_to(loaded, self._local.bases)
        for segment, info in self._local.iter_from(loaded):
            batch = segment.pread(info.size, info.position) if info.is_control else None
            self._update_producers(info, batch, segment.base_offset)
        self.producers.map_end_offset = leo

    # -- deletion -----------------------------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset``; returns the new start.

        Whole segments below it are deleted; the start is checkpointed so a
        restart keeps it. An ``offset`` above the log end is OFFSET_OUT_OF_RANGE
        (the handler bounds it by the high watermark first).
        """
        self._check_open()
        if offset > self.log_end_offset:
            raise errors.OffsetOutOfRangeError(
                f"cannot delete records before {offset}: the log ends at {self.log_end_offset}"
            )
        if offset > self._log_start_offset:
            self._set_log_start(offset)
            self.apply_retention(wall_clock_ms(), -1, -1)
        return self._log_start_offset

    def _set_log_start(self, offset: int) -> None:
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._write_checkpoint(LOG_START_OFFSET_CHECKPOINT, offset)
            self.epochs.truncate_from_start(offset)

    def apply_retention(
        self,
        now_ms: int,
        retention_ms: int | None = None,
        retention_bytes: int | None = None,
        *,
        high_watermark: int | None = None,
    ) -> int:
        """Delete the oldest segments past retention.ms / retention.bytes; returns how many.

        Arguments default to the topic config; -1 disables a limit. Segments
        below the log start offset always go. See ``_retention``.
        """
        self._check_open()
        leo = self.log_end_offset
        count = retention_breaches(
            self._local.segments,
            log_end_offset=leo,
            high_watermark=leo if high_watermark is None else min(high_watermark, leo),
            log_start_offset=self._log_start_offset,
            now_ms=now_ms,
            retention_ms=self._config.retention_ms if retention_ms is None else retention_ms,
            retention_bytes=(
                self._config.retention_bytes if retention_bytes is None else retention_bytes
            ),
        )
        if count <= 0:
            return 0
        if count >= len(self._local.segments):
            self._roll(leo, now_ms)  # the log always keeps one (new, empty) segment
        deleted = self._local.delete_oldest(count)
        first = self._local.segments[0].base_offset
        self._set_log_start(first)
        self.producers.delete_snapshots_before(first)
        self.txn_index.drop_before(self._local.bases)
        return deleted

    def compact(self, now_ms: int | None = None) -> CleanerStats:
        """Compact the inactive segments (``cleanup.policy=compact``); see ``_cleaner``."""
        self._check_open()
        now = wall_clock_ms() if now_ms is None else now_ms
        segments = self._local.segments
        count = cleanable_count(
            segments,
            first_unstable_offset=self.producers.first_unstable_offset(),
            now_ms=now,
            min_compaction_lag_ms=self._config.min_compaction_lag_ms,
        )
        if not count:
            return CleanerStats()
        end = segments[count].base_offset
        if end == self._cleaned_through and now < self._next_horizon_ms:
            return CleanerStats()  # nothing became cleanable and no tombstone is due
        cleaned, stats = clean_segments(
            self.directory, segments[:count], now_ms=now,
            delete_retention_ms=self._config.delete_retention_ms,
            producer_last_offsets=self.producers.last_offsets(),
            aborted=self.txn_index.ranges_before(end),
        )
        self._local.replace(cleaned + segments[count:])
        self._cleaned_through = end
        self._next_horizon_ms = stats.next_horizon_ms
        return stats

    def housekeeping(self, now_ms: int | None = None, *, high_watermark: int | None = None,
                     retention: bool = True) -> int:
        """The periodic work of Kafka's log manager for this log; returns segments deleted.

        Retention when cleanup.policy has ``delete`` (otherwise only segments
        below the log start offset go), when ``retention`` (the broker's check,
        every ``log.retention.check.interval.ms``); compaction when it has
        ``compact``, and expiry of producers idle for ``producer.id.expiration.ms``.
        """
        self._check_open()
        now = wall_clock_ms() if now_ms is None else now_ms
        deleted = 0
        if retention and self._config.delete:
            deleted = self.apply_retention(now, high_watermark=high_watermark)
        elif retention:
            deleted = self.apply_retention(now, -1, -1, high_watermark=high_watermark)
        if self._config.compact:
            self.compact(now)
        self.producers.remove_expired(now, self._config.producer_id_expiration_ms)
        return deleted

    # -- durability -------------------------------------------------------------------------------------

    def close(self, *, flush: bool = True) -> None:
        """Close the files. ``flush=False`` models a crash: nothing more is written."""
        if self._closed:
            return
        if flush:
            self.producers.take_snapshot(sync=True)
            self.flush()
            self._checkpoint_if_changed(LOG_START_OFFSET_CHECKPOINT, self._log_start_offset)
            self._local.active.seal()
        self._local.close()
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start_offset}, "
            f"end={self.log_end_offset}, segments={len(self._local.segments)})"
        )
