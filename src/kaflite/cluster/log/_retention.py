"""Which segments retention may delete and which compaction may clean.

Pure decisions over the segment list; ``PartitionLog`` carries them out.

Retention follows Kafka's ``UnifiedLog.deleteOldSegments``:

* only a prefix of the log is deletable, and a segment is in it only when all
  of its offsets are below the high watermark (consumers may still need what
  is not yet committed) and it is not the empty active segment;
* ``retention.ms``: a segment goes when ``now - its largest timestamp`` exceeds
  it (the file's mtime stands in when no record has a timestamp), judged oldest
  first and stopping at the first one that is young enough;
* ``retention.bytes``: the oldest segments go while the log would stay at or
  above the limit without them;
* segments entirely below the log start offset (after DeleteRecords) go too;
* -1 disables either limit.

Kafka applies the three rules one after the other; since each deletes a
prefix, the union is the longest of the three prefixes.

Compaction may clean the segments before the active one, stopping at the
first that still holds records younger than ``min.compaction.lag.ms`` or that
reaches the first offset of an open transaction (Kafka's first uncleanable
offset).
"""

from __future__ import annotations

from collections.abc import Sequence

from kaflite.cluster.log._segment import LogSegment

__all__ = ["cleanable_count", "retention_breaches"]


def retention_breaches(
    segments: Sequence[LogSegment],
    *,
    log_end_offset: int,
    high_watermark: int,
    log_start_offset: int,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
) -> int:
    """How many of the oldest segments may be deleted (possibly all of them)."""
    n = len(segments)

    def upper(i: int) -> int:
        return log_end_offset if i == n - 1 else segments[i + 1].base_offset

    eligible = 0
    for i, segment in enumerate(segments):
        if high_watermark < upper(i) or (i == n - 1 and not segment.size):
            break
        eligible += 1

    by_time = 0
    if retention_ms >= 0:
        for segment in segments[:eligible]:
            if now_ms - segment.largest_timestamp <= retention_ms:
                break
            by_time += 1

    by_size = 0
    if retention_bytes >= 0:
        excess = sum(s.size for s in segments) - retention_bytes
        for segment in segments[:eligible]:
            if excess - segment.size < 0:
                break
            excess -= segment.size
            by_size += 1

    by_start = 0
    for i in range(min(eligible, n - 1)):
        if upper(i) > log_start_offset:
            break
        by_start = i + 1

    return max(by_time, by_size, by_start)


def cleanable_count(
    segments: Sequence[LogSegment],
    *,
    first_unstable_offset: int | None,
    now_ms: int,
    min_compaction_lag_ms: int,
) -> int:
    """How many of the oldest (inactive) segments compaction may rewrite."""
    uncleanable = segments[-1].base_offset
    if first_unstable_offset is not None:
        uncleanable = min(uncleanable, first_unstable_offset)
    count = 0
    for i, segment in enumerate(segments[:-1]):
        if segments[i + 1].base_offset > uncleanable:
            break
        if min_compaction_lag_ms > 0 and now_ms - segment.largest_timestamp < min_compaction_lag_ms:
            break
        count = i + 1
    return count
