"""Log compaction for ``cleanup.policy=compact`` (Kafka's ``LogCleaner``, simplified).

Theory of operation
-------------------
Compaction keeps, for every key, only the record with the highest offset. It
runs over the *cleanable* segments: every segment before the active one whose
records are all older than ``min.compaction.lag.ms``.

1. Build the offset map: key -> latest offset, over the cleanable range.
2. Rewrite each cleanable segment. A record survives when its offset is the
   one in the map. Offsets never change: a rewritten batch keeps its base
   offset and its records keep their offset deltas, so consumers' positions
   and committed offsets stay valid (gaps are normal in a compacted log).
3. Tombstones (null values) survive for ``delete.retention.ms`` after their
   batch was first cleaned, so consumers that are behind still see the delete
   (KIP-534): the first cleaning stamps the batch with a delete horizon
   (attribute bit 6, baseTimestamp = horizon), a later cleaning past that time
   drops the tombstone.
4. A batch whose records all survive, and which needs no horizon, is copied
   byte for byte. A batch with no survivors is dropped, except the last batch
   of a producer still known to the producer state: its header stays, with no
   records, so the producer's sequence survives a restart (Kafka does the same).
5. Control batches and transactional data batches are copied as they are
   (aborted data is not dropped; the ``.txnindex`` files are left untouched).
   Records of aborted transactions are left out of the offset map: an aborted
   write must not make the committed value before it look superseded (the
   cleanable range ends before the oldest open transaction, so every
   transaction in it is decided).

Records without a key cannot be compacted and are removed, as Kafka's cleaner
does. Each segment is rewritten on its own (Kafka also merges small segments;
kaflite does not). The swap is crash-safe: the new file is written as
``.log.cleaned`` and fsynced, renamed ``.log.swap``, the old indexes are
deleted, the swap file replaces the ``.log``, and the indexes are rebuilt.
Recovery finishes a swap it finds and deletes a ``.cleaned`` file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kaflite.cluster.log._files import CLEANED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, segment_path
from kaflite.cluster.log._segment import LogSegment, parse_info
from kaflite.protocol.records import (
    RecordBatch,
    RecordColumns,
    assemble_batch,
    compress,
    encode_records,
)

__all__ = ["CleanerStats", "clean_segments"]

_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME_BIT = 0x08
_DELETE_HORIZON_BIT = 0x40
NO_HORIZON = (1 << 63) - 1


@dataclass
class CleanerStats:
    segments_rewritten: int = 0
    records_removed: int = 0
    # The earliest delete horizon among tombstones kept: nothing to do before it.
    next_horizon_ms: int = NO_HORIZON


def _batches(segment: LogSegment) -> Iterator[memoryview]:
    for _, view in segment.iter_raw(0):
        yield view


def build_offset_map(segments: list[LogSegment],
                     aborted: dict[int, list[tuple[int, int]]] | None = None) -> dict[bytes, int]:
    """key -> offset of its latest record; records of aborted transactions do not count
    (``aborted``: producer id -> (first offset, ABORT marker offset) of each)."""
    latest: dict[bytes, int] = {}
    for segment in segments:
        for view in _batches(segment):
            info = parse_info(view, 0, 0)
            if info.is_control or info.record_count == 0:
                continue
            if info.is_transactional and aborted and any(
                    first <= info.base_offset <= last
                    for first, last in aborted.get(info.producer_id, ())):
                continue
            cols = RecordBatch.from_buffer(view).columns()
            for key, offset in zip(cols.keys, cols.offsets, strict=True):
                if key is not None:
                    latest[bytes(key)] = offset
    return latest


def _rewrite_batch(
    view: memoryview,
    latest: dict[bytes, int],
    producer_last_offsets: dict[int, int],
    now_ms: int,
    delete_retention_ms: int,
    stats: CleanerStats,
) -> bytes | memoryview | None:
    """The batch to write in place of ``view`` (itself if unchanged), or None to drop it."""
    info = parse_info(view, 0, 0)
    if info.is_control or info.is_transactional:
        return view
    batch = RecordBatch.from_buffer(view)
    horizon = batch.delete_horizon_ms
    cols = batch.columns()
    keep: list[int] = []
    has_tombstone = False
    for i, (key, value, offset) in enumerate(
        zip(cols.keys, cols.values, cols.offsets, strict=True)
    ):
        if key is None or latest.get(bytes(key)) != offset:
            continue
        if value is None:
            if horizon is not None and now_ms >= horizon:
                continue  # the tombstone has been visible for delete.retention.ms
            has_tombstone = True
        keep.append(i)
    stats.records_removed += len(cols) - len(keep)
    new_horizon = horizon
    if has_tombstone and horizon is None:
        new_horizon = now_ms + delete_retention_ms
    if has_tombstone and new_horizon is not None:
        stats.next_horizon_ms = min(stats.next_horizon_ms, new_horizon)
    if len(keep) == len(cols) and new_horizon == horizon:
        return view
    if not keep and producer_last_offsets.get(info.producer_id) != info.last_offset:
        return None
    return _encode(batch, cols, keep, new_horizon)


def _encode(batch: RecordBatch, cols: RecordColumns, keep: list[int], horizon: int | None) -> bytes:
    log_append = bool(batch.attributes & _LOG_APPEND_TIME_BIT)
    base_ts = horizon if horizon is not None else batch.base_timestamp
    attributes = batch.attributes & ~_DELETE_HORIZON_BIT
    if horizon is not None:
        attributes |= _DELETE_HORIZON_BIT
    if keep:
        timestamps = [cols.timestamps[i] for i in keep]
        section = encode_records(
            [cols.values[i] for i in keep],
            [cols.keys[i] for i in keep],
            [cols.headers[i] for i in keep],
            [0] * len(keep) if log_append else [t - base_ts for t in timestamps],
            [cols.offsets[i] - batch.base_offset for i in keep],
        )
        codec = batch.attributes & _COMPRESSION_MASK
        if codec:
            section = compress(codec, section)
        last_delta = cols.offsets[keep[-1]] - batch.base_offset
        max_ts = batch.max_timestamp if log_append else max(timestamps)
    else:
        # An emptied batch kept only for its producer id, epoch and sequence range.
        section = b""
        last_delta = batch.last_offset_delta
        max_ts = batch.max_timestamp
    return assemble_batch(
        section,
        count=len(keep),
        last_offset_delta=last_delta,
        base_offset=batch.base_offset,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        attributes=attributes,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        partition_leader_epoch=batch.partition_leader_epoch,
    )


def _write_synced(path: Path, parts: list[bytes | memoryview]) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for part in parts:
            view = memoryview(part)
            while view:
                view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def clean_segments(
    directory: Path,
    segments: list[LogSegment],
    *,
    now_ms: int,
    delete_retention_ms: int,
    producer_last_offsets: dict[int, int],
    aborted: dict[int, list[tuple[int, int]]] | None = None,
) -> tuple[list[LogSegment], CleanerStats]:
    """Compact ``segments`` (all inactive); return their replacements, in order."""
    stats = CleanerStats()
    latest = build_offset_map(segments, aborted)
    out: list[LogSegment] = []
    for segment in segments:
        parts: list[bytes | memoryview] = []
        changed = False
        for view in _batches(segment):
            new = _rewrite_batch(view, latest, producer_last_offsets, now_ms,
                                 delete_retention_ms, stats)
            if new is not view:
                changed = True
            if new is not None:
                parts.append(new)
        if not changed:
            out.append(segment)
            continue
        base = segment.base_offset
        cleaned = segment_path(directory, base, LOG_SUFFIX + CLEANED_SUFFIX)
        swap = segment_path(directory, base, LOG_SUFFIX + SWAP_SUFFIX)
        _write_synced(cleaned, parts)
        os.replace(cleaned, swap)
        # Old indexes go before the swap, so no stale index can outlive its log file.
        segment.offset_index.delete()
        segment.time_index.delete()
        segment.close()
        # An emptied segment stays, as an empty file: its base offset still marks
        # where its offset range starts.
        os.replace(swap, segment.log_path)
        fresh = LogSegment(directory, base, segment.index_interval, now_ms)
        fresh.recover()
        fresh.seal()
        out.append(fresh)
        stats.segments_rewritten += 1
    return out, stats
