"""Loading a partition directory at startup (Kafka's ``LogLoader``).

Theory of operation
-------------------
1. Leftovers of interrupted work are settled first: ``.tmp`` files (a
   checkpoint or snapshot being replaced) and ``.cleaned`` files (a compaction
   that had not finished writing) are deleted; a ``.log.swap`` file (a
   compaction that had finished writing) replaces its ``.log`` and that
   segment's indexes are rebuilt. Index files without a ``.log`` are deleted.
2. Segments are opened in base-offset order. A segment wholly below the
   recovery point (the offset up to which everything was fsynced, from
   ``recovery-point-offset-checkpoint``) is trusted: its indexes are loaded and
   sanity-checked, and rebuilt only if they fail. Every other segment, and the
   active (last) one always, is recovered: every batch is read and checked
   (framing, CRC-32C, offsets moving forward), the indexes are rebuilt, and the
   file is cut at the first bad batch. After a cut in that unflushed part,
   every later segment is deleted: its data followed a hole.
3. Leader epochs seen in recovered batches are added to the epoch cache, as
   Kafka's ``LogSegment.recover`` does; the cache is then cut back to the log
   end by the caller, and the producer state is rebuilt from its snapshot.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from kaflite.cluster.log._deferred_sync import pending_text
from kaflite.cluster.log._epoch import LeaderEpochCache
from kaflite.cluster.log._files import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIMEINDEX_SUFFIX,
    base_offset_of,
    segment_path,
)
from kaflite.cluster.log._segment import BatchInfo, LogSegment

__all__ = ["load_segments"]

log = logging.getLogger("kaflite.cluster.log")


def _settle_leftovers(directory: Path) -> list[str]:
    """Settle what interrupted work left (the module's step 1); returns the
    directory's names after it. One listing when nothing was left over, the usual case
    for each of a broker's thousands of partitions at a start."""
    names = sorted(os.listdir(directory))
    changed = False
    for name in names:
        path = directory / name
        if name.endswith(".tmp") or name.endswith(CLEANED_SUFFIX):
            if name.endswith(".tmp") and pending_text(directory / name[:-4]) is not None:
                continue     # the deferred writer's, being written now: not a leftover
            path.unlink(missing_ok=True)
            changed = True
        elif name.endswith(SWAP_SUFFIX):
            base = base_offset_of(name)
            if base is not None and name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                # The cleaned segment was complete (it is fsynced before the rename):
                # finish the swap, and drop indexes that described the old file.
                segment_path(directory, base, INDEX_SUFFIX).unlink(missing_ok=True)
                segment_path(directory, base, TIMEINDEX_SUFFIX).unlink(missing_ok=True)
                os.replace(path, segment_path(directory, base, LOG_SUFFIX))
            else:
                path.unlink(missing_ok=True)
            changed = True
    if changed:
        names = sorted(os.listdir(directory))
    bases = {base_offset_of(n) for n in names if n.endswith(LOG_SUFFIX)}
    orphans = [n for n in names if (n.endswith(INDEX_SUFFIX) or n.endswith(TIMEINDEX_SUFFIX))
               and (base := base_offset_of(n)) is not None and base not in bases]
    for name in orphans:
        (directory / name).unlink(missing_ok=True)
    return [n for n in names if n not in orphans] if orphans else names


def load_segments(
    directory: Path,
    *,
    index_interval: int,
    recovery_point: int,
    epochs: LeaderEpochCache,
    now_ms: int,
) -> list[LogSegment]:
    """Open (and where needed recover) every segment of ``directory``."""
    bases = sorted(
        base
        for name in _settle_leftovers(directory)
        if name.endswith(LOG_SUFFIX) and (base := base_offset_of(name)) is not None
    )
    segments = [LogSegment(directory, base, index_interval, now_ms) for base in bases]

    def on_batch(info: BatchInfo, _view: memoryview) -> None:
        if info.leader_epoch >= 0 and info.leader_epoch > epochs.latest_epoch:
            epochs.assign(info.leader_epoch, info.base_offset)

    kept: list[LogSegment] = []
    for i, segment in enumerate(segments):
        last = i == len(segments) - 1
        upper = segments[i + 1].base_offset if not last else None
        unflushed = last or upper is None or upper > recovery_point
        if not unflushed and segment.load():
            kept.append(segment)
            continue
        cut = segment.recover(on_batch)
        if cut:
            log.warning(
                "%s: cut %d invalid bytes at position %d during recovery",
                segment.log_path, cut, segment.size,
            )
        if not last:
            segment.seal()
        kept.append(segment)
        if cut and unflushed and not last:
            for later in segments[i + 1 :]:
                log.warning("%s: deleted, it followed a corrupt segment", later.log_path)
                later.delete()
            break
    return kept
