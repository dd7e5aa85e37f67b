"""``PartitionState``: a partition log's parts (segments, epochs, producers), checkpoints and writes."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from kaflite.cluster.log._cleaner import NO_HORIZON
from kaflite.cluster.log._config import LogConfig
from kaflite.cluster.log._epoch import LeaderEpochCache
from kaflite.cluster.log._files import (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from kaflite.cluster.log._local import LocalLog
from kaflite.cluster.log._producer_state import ProducerStateManager
from kaflite.cluster.log._segment import BatchInfo
from kaflite.cluster.log._txn_index import AbortedTxn, TransactionIndex
from kaflite.cluster.log._types import LogError, ProducerInfo, SegmentInfo

__all__ = ["PartitionState", "wall_clock_ms"]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionState:
    """The parts of one partition replica's log, their state, checkpoints and the
    write primitives (write, roll, flush); ``PartitionLog`` (``_partition``) builds the
    appends, reads, truncation and deletion on them."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        local: LocalLog,
    ) -> None:
        self.directory = directory
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self._local = local
        self._config = config
        self.epochs = LeaderEpochCache(directory)
        self.producers = ProducerStateManager(directory)
        self.txn_index = TransactionIndex(directory)
        self._log_start_offset = 0
        self._recovery_point = 0
        self._unflushed_messages = 0
        self._closed = False
        # Compaction bookkeeping: nothing new to clean until one of these changes.
        self._cleaned_through = -1
        self._next_horizon_ms = NO_HORIZON
        # What each checkpoint file of this directory holds now (read or written):
        # closing rewrites only the ones that changed, so that stopping a broker of
        # thousands of idle partitions costs no fsyncs for them.
        self._checkpointed: dict[str, int] = {}


    def _read_checkpoint(self, name: str) -> int | None:
        try:
            value = read_offset_checkpoint(self.directory / name, self.topic, self.partition)
        except ValueError:
            return None  # unreadable: fall back to what the segments say
        if value is not None:
            self._checkpointed[name] = value
        return value

    def _write_checkpoint(self, name: str, offset: int) -> None:
        if name == RECOVERY_POINT_CHECKPOINT:
            # recovery will not scan below it again: the epochs up to it go first
            self.epochs.persist_now()
        write_offset_checkpoint(self.directory / name, self.topic, self.partition, offset)
        self._checkpointed[name] = offset

    def _checkpoint_if_changed(self, name: str, offset: int) -> None:
        if self._checkpointed.get(name) != offset:
            self._write_checkpoint(name, offset)

    def legacy_high_watermark(self) -> int | None:
        """The high watermark in this directory's own ``replication-offset-checkpoint``,
        which kaflite wrote before it kept one file per data directory (None without
        one). The broker reads it when the data directory's file has no line for
        this partition, and removes it once its value is in that file."""
        return self._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)

    @property
    def legacy_high_watermark_path(self) -> Path:
        return self.directory / REPLICATION_OFFSET_CHECKPOINT

    # -- state --------------------------------------------------------------------------------
    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        # AlterConfigs takes effect on the next append, roll or retention pass.
        self._config = config
        self._local.config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return self._local.size_bytes

    @property
    def segments(self) -> list[SegmentInfo]:
        return self._local.infos()

    @property
    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch

    def producer_state(self) -> list[ProducerInfo]:
        """Every producer the partition knows (for DescribeProducers)."""
        return self.producers.infos()

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction (the last stable offset bound)."""
        return self.producers.first_unstable_offset()

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO given the partition's high watermark (read_committed reads stop there)."""
        return self.producers.last_stable_offset(min(high_watermark, self.log_end_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)`` (Fetch)."""
        return self.txn_index.collect(fetch_offset, upper_bound_offset)

    # -- leader epochs ----------------------------------------------------------------------------
    def assign_epoch(self, epoch: int, start_offset: int) -> None:
        """A new leader epoch starts at ``start_offset`` (a new leader calls this at its LEO)."""
        self.epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= ``epoch``, its end offset), or (-1, -1)."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def epoch_for_offset(self, offset: int) -> int:
        return self.epochs.epoch_for_offset(offset)


    # -- writes ------------------------------------------------------------------------------------
    def _update_producers(
        self, info: BatchInfo, batch: memoryview | bytes | None, segment_base: int
    ) -> None:
        # A marker that closes an aborted transaction adds an aborted-transaction entry.
        self.txn_index.on_completed(self.producers.update(info, batch), self.producers, segment_base)

    def _write(
        self, data: bytes | bytearray | memoryview, first_offset: int, last_offset: int,
        max_timestamp: int, now: int,
    ) -> None:
        if self._local.should_roll(len(data), last_offset, max_timestamp, now):
            self._roll(first_offset, now)
        self._local.active.append(data, last_offset, max_timestamp)

    def _roll(self, base_offset: int, now: int) -> None:
        if self._local.roll(max(base_offset, self.log_end_offset), now):
            # Kafka snapshots producer state at every roll, so recovery replays one segment.
            self.producers.take_snapshot()

    def roll(self, *, now_ms: int | None = None) -> None:
        """Start a new active segment at the log end (no-op if the active one is empty)."""
        self._check_open()
        self._roll(self.log_end_offset, wall_clock_ms() if now_ms is None else now_ms)

    def _after_append(self, record_count: int) -> None:
        self._unflushed_messages += record_count
        if self._unflushed_messages >= self._config.flush_messages:
            self.flush()

    def release_fds(self) -> None:
        """Close the file descriptors of a log just opened or created, before anything is
        written to it: they reopen when the log is read or written. Thousands of idle
        partitions then hold no descriptor each (60,000 replicas in one process ran out
        of a 20,000-descriptor limit)."""
        self._local.release_fds()

    def _check_open(self) -> None:
        if self._closed:
            raise LogError(f"{self.directory}: the log is closed")

    def flush(self) -> None:
        """fsync every segment past the recovery point, then checkpoint the new point."""
        self._check_open()
        self._local.flush_from(self._recovery_point)
        self.txn_index.flush()
        self._unflushed_messages = 0
        leo = self.log_end_offset
        if leo != self._recovery_point:
            self._recovery_point = leo
            self._write_checkpoint(RECOVERY_POINT_CHECKPOINT, leo)
