"""The leader epoch cache: which leader epoch started at which offset (KIP-101, KIP-279).

Each entry ``(epoch, start_offset)`` says "leader epoch ``epoch`` wrote its first
record at ``start_offset``". A follower that comes back asks the leader, with
OffsetForLeaderEpoch, where its own last epoch ended, and truncates there
instead of at its high watermark, so it never keeps records the new leader
does not have. The semantics follow Kafka's ``LeaderEpochFileCache``:

* ``assign`` appends an entry only when the epoch is new or its start offset
  moves back, first removing any entry that would break monotonicity (an
  epoch >= the new one, or a start offset >= the new one);
* ``end_offset_for`` answers with the largest epoch <= the requested one and
  the start offset of the next epoch (or the log end offset for the latest);
* truncating the log from the end drops entries starting at or after the new
  end; advancing the log start offset drops entries before it, moving the
  last of them up to the new start.

Every change is written to ``leader-epoch-checkpoint`` (Kafka's text format) by
the background thread of ``_deferred_sync``, which readers of the file see
through; ``persist_now`` puts it in place before the log moves its recovery
point. Changes happen on leader elections, truncation and DeleteRecords, never
per produced batch.
"""

from __future__ import annotations

from bisect import bisect_right
from pathlib import Path

from kaflite.cluster.log._deferred_sync import write_now
from kaflite.cluster.log._files import (
    LEADER_EPOCH_CHECKPOINT,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "LeaderEpochCache"]

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Sorted (epoch, start offset) entries backed by ``leader-epoch-checkpoint``."""

    def __init__(self, directory: Path, *, persist: bool = True) -> None:
        self.directory = directory
        self.persist = persist
        self._epochs: list[int] = []
        self._starts: list[int] = []
        try:
            stored = read_epoch_checkpoint(directory)
        except ValueError:
            stored = []  # unreadable: recovery re-learns epochs from the batches it scans
        for epoch, start in stored:
            if epoch >= 0 and start >= 0:
                self._assign(epoch, start)

    # -- reading ------------------------------------------------------------------------
    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in force at ``offset`` (-1 if it precedes every entry)."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as ``LeaderEpochFileCache.endOffsetFor``."""
        if requested == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == self._epochs[-1]:
            # The current epoch is still being written: it ends at the log end.
            return requested, log_end_offset
        higher = bisect_right(self._epochs, requested)
        if higher == len(self._epochs):
            # Larger than every known epoch (cannot happen when the latest is the largest).
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than anything cached: those records are gone; Kafka answers with the
            # requested epoch and the start of the first epoch it knows.
            return requested, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # -- changes --------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed."""
        if not self._assign(epoch, start_offset):
            return False
        self._write()
        return True

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        # Drop entries that would no longer be monotonic in epoch and start offset.
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (the log was truncated there)."""
        keep = len(self._starts)
        while keep and self._starts[keep - 1] >= end_offset:
            keep -= 1
        if keep != len(self._starts):
            del self._epochs[keep:]
            del self._starts[keep:]
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to ``start_offset``: drop older entries, keep the epoch in force."""
        i = bisect_right(self._starts, start_offset)
        if i == 0:
            return
        if self._starts[i - 1] == start_offset and i == 1:
            return
        epoch = self._epochs[i - 1]
        del self._epochs[:i]
        del self._starts[:i]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        self._write()

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self._write()

    def persist_now(self) -> None:
        """The checkpoint's queued write, in place now (before a recovery point moves)."""
        if self.persist:
            write_now(self.directory / LEADER_EPOCH_CHECKPOINT)

    def _write(self) -> None:
        if self.persist:
            write_epoch_checkpoint(self.directory, self.entries)
