"""``LocalLog``: the ordered list of segments of one partition (Kafka's ``LocalLog``).

This layer knows segments and bytes, not producers or epochs: it appends to
the active segment and rolls it, reads across segments, truncates, and deletes
the oldest segments. ``PartitionLog`` adds validation, producer state, leader
epochs and the log start offset on top, as Kafka's ``UnifiedLog`` does over its
``LocalLog``.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from pathlib import Path

from kaflite.cluster.log._config import LogConfig
from kaflite.cluster.log._segment import BatchInfo, LogSegment
from kaflite.cluster.log._types import SegmentInfo

__all__ = ["LocalLog"]


class LocalLog:
    """Segments sorted by base offset; the last one is active."""

    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment]) -> None:
        self.directory = directory
        self.config = config
        self.segments = segments
        self.bases = [s.base_offset for s in segments]

    def replace(self, segments: list[LogSegment]) -> None:
        self.segments = segments
        self.bases = [s.base_offset for s in segments]

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def infos(self) -> list[SegmentInfo]:
        return [
            SegmentInfo(s.base_offset, s.next_offset, s.size, s.max_timestamp, str(s.log_path))
            for s in self.segments
        ]

    def new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        segment = LogSegment(self.directory, base_offset, self.config.index_interval_bytes, now_ms)
        _ = segment.fd  # create the file now: the directory always shows its active segment
        return segment

    # -- appending -----------------------------------------------------------------------
    def should_roll(self, size: int, last_offset: int, max_timestamp: int, now_ms: int) -> bool:
        """Kafka's ``LogSegment.shouldRoll``: size, age, or index offset overflow.

        Age is measured with record timestamps (the incoming batch's max timestamp
        minus the segment's first batch's) when the segment has them, else with
        the wall clock since the segment was created.
        """
        active = self.active
        if not active.size:
            return False
        if active.size + size > self.config.segment_bytes or not active.fits_offset(last_offset):
            return True
        first_ts = active.first_batch_timestamp
        if first_ts is not None and first_ts >= 0:
            waited = max_timestamp - first_ts
        else:
            waited = now_ms - active.created_ms
        return waited > self.config.max_segment_ms

    def roll(self, base_offset: int, now_ms: int) -> bool:
        """Seal the active segment and start one at ``base_offset``; False if it was empty."""
        active = self.active
        if not active.size:
            return False
        active.seal()
        self.segments.append(self.new_segment(base_offset, now_ms))
        self.bases.append(base_offset)
        return True

    # -- reading -------------------------------------------------------------------------
    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> tuple[bytes, int, int]:
        """Whole batches from the first segment that has any at or after ``offset``.

        Returns (bytes, first batch's base offset or -1, offset to fetch next).
        """
        i = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            got = segment.read(offset, max_bytes, max_offset, min_one_batch)
            if got is not None:
                return got
        return b"", -1, offset

    def iter_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchInfo]]:
        """Headers of every batch whose last offset is >= ``offset``, in log order."""
        i = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            if not segment.size or segment.next_offset <= offset:
                continue
            first = segment.find_batch(offset)
            if first is None:
                continue
            for info in segment.iter_infos(first.position):
                yield segment, info

    def offset_for_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        # Kafka: the first segment whose largest timestamp reaches the target.
        for segment in self.segments:
            if segment.size and segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        best: LogSegment | None = None
        for segment in self.segments:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        return None if best is None else best.find_max_timestamp_record()

    # -- removing -------------------------------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Delete segments above ``offset`` and cut the one holding it."""
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self.segments.pop().delete()
            self.bases.pop()
        self.active.truncate_to(offset)

    def reset_at(self, offset: int, now_ms: int) -> None:
        """Delete every segment and start over, empty, at ``offset``."""
        for segment in self.segments:
            segment.delete()
        self.replace([self.new_segment(offset, now_ms)])

    def delete_oldest(self, count: int) -> int:
        """Delete the ``count`` oldest segments, never the active one."""
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return 0
        doomed = self.segments[:count]
        self.replace(self.segments[count:])
        for segment in doomed:
            segment.delete()
        return count

    # -- durability ------------------------------------------------------------------------
    def flush_from(self, offset: int) -> None:
        """fsync every segment that holds offsets at or above ``offset``."""
        i = max(bisect_right(self.bases, offset) - 1, 0)
        for segment in self.segments[i:]:
            segment.flush()

    def close(self) -> None:
        for segment in self.segments:
            segment.close()

    def release_fds(self) -> None:
        """Close the segments' file descriptors; each reopens at its next read or write."""
        self.close()
