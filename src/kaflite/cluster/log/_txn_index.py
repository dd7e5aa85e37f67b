"""The aborted-transaction index (Kafka's ``TransactionIndex``, KIP-98).

Theory of operation
-------------------
A read_committed consumer reads up to the last stable offset and must drop
the records of aborted transactions. It cannot tell them apart by itself: an
aborted batch looks like a committed one until the ABORT marker that follows
it. So with every Fetch the leader sends the aborted transactions overlapping
the returned range, as (producer id, first offset) pairs; the consumer skips a
producer's transactional batches from that first offset up to the producer's
ABORT marker.

The leader finds them here. Each time an ABORT marker closes a non-empty
transaction (one whose first offset the producer state knew), the log records:

    producerId | firstOffset (of the transaction) | lastOffset (the marker's offset)
    | lastStableOffset (the partition's, right after the marker)

``lastStableOffset`` is the first offset of the oldest transaction still open
once this one is closed, or the marker's offset + 1 when none is. A query for
``[fetch_offset, upper_bound)`` returns the entries with ``lastOffset >=
fetch_offset`` and ``firstOffset < upper_bound``; once an entry's
``lastStableOffset`` reaches ``upper_bound`` no later entry can overlap the
range (every later transaction starting below the bound would have been open,
and so would have held that stable offset down), and the scan stops.

On disk, as in Kafka, each segment has a ``<base offset>.txnindex`` file
holding the entries whose marker lies in that segment, 34 bytes each:

    version int16 (=0) | producerId int64 | firstOffset int64 | lastOffset int64
    | lastStableOffset int64

All entries are also kept in memory, sorted by ``lastOffset`` (markers are
appended in offset order). Appends go to the end of the active segment's file
without an fsync; ``flush`` syncs them with the log. The files follow the log:
truncation drops entries at or past the new end (rewriting the files that
lose entries), segment deletion (retention, DeleteRecords) drops the files of
the deleted segments, a full reset drops everything. A torn or lost tail is
harmless: after an unclean shutdown the producer state is rebuilt by replaying
the log from its last snapshot, and the entries of that stretch are
recomputed from the markers it holds.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

from kaflite.cluster.log._files import base_offset_of, fsync_dir, segment_path
from kaflite.cluster.log._producer_state import CompletedTxn, ProducerStateManager

__all__ = ["TXNINDEX_SUFFIX", "AbortedTxn", "TransactionIndex"]

log = logging.getLogger("kaflite.cluster.log")

TXNINDEX_SUFFIX = ".txnindex"
_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")  # 34 bytes


class AbortedTxn(NamedTuple):
    """One aborted transaction of one producer (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the offset of the ABORT marker
    last_stable_offset: int


def _parse(data: bytes) -> list[AbortedTxn]:
    """The entries of one file; reading stops at a torn tail or an unknown version."""
    out = []
    for at in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
        version, *fields = _ENTRY.unpack_from(data, at)
        if version != _VERSION:
            break
        out.append(AbortedTxn(*fields))
    return out


def _encode(entries: list[AbortedTxn]) -> bytes:
    return b"".join(_ENTRY.pack(_VERSION, *e) for e in entries)


class TransactionIndex:
    """The aborted transactions of one partition log; see the module docstring."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []  # parallel to _entries, for bisection
        self._files: dict[int, list[AbortedTxn]] = {}  # segment base -> entries on disk
        self._dirty: set[int] = set()

    # -- state ---------------------------------------------------------------------------
    @property
    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest marker first."""
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def _path(self, base: int) -> Path:
        return segment_path(self.directory, base, TXNINDEX_SUFFIX)

    # -- loading -------------------------------------------------------------------------
    def load(self, segment_bases: list[int], log_end_offset: int) -> None:
        """Read every ``.txnindex`` file, keeping the entries the segments still hold.

        Entries are regrouped by the segment that holds their marker, so a file
        left by a segment that is gone is folded in or deleted.
        """
        found: dict[int, list[AbortedTxn]] = {}
        for name in os.listdir(self.directory):
            if not name.endswith(TXNINDEX_SUFFIX):
                continue
            base = base_offset_of(name)
            if base is None:
                continue
            try:
                found[base] = _parse((self.directory / name).read_bytes())
            except OSError:
                found[base] = []
        self._files = found
        merged = sorted({e for entries in found.values() for e in entries},
                        key=lambda e: (e.last_offset, e.producer_id))
        first = segment_bases[0] if segment_bases else 0
        self._set([e for e in merged if first <= e.last_offset < log_end_offset])
        self._sync_files(segment_bases)

    def _set(self, entries: list[AbortedTxn]) -> None:
        self._entries = entries
        self._last_offsets = [e.last_offset for e in entries]

    def _sync_files(self, segment_bases: list[int]) -> None:
        """Make the files hold exactly the in-memory entries, grouped by segment."""
        wanted: dict[int, list[AbortedTxn]] = {}
        for e in self._entries:
            i = bisect_right(segment_bases, e.last_offset) - 1
            base = segment_bases[i] if i >= 0 else 0
            wanted.setdefault(base, []).append(e)
        changed = False
        for base in list(self._files):
            if base not in wanted:
                self._path(base).unlink(missing_ok=True)
                del self._files[base]
                self._dirty.discard(base)
                changed = True
        for base, entries in wanted.items():
            if self._files.get(base) != entries:
                self._rewrite(base, entries)
                changed = True
        if changed:
            fsync_dir(self.directory)

    def _rewrite(self, base: int, entries: list[AbortedTxn]) -> None:
        path = self._path(base)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, _encode(entries))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self._files[base] = list(entries)
        self._dirty.discard(base)

    # -- updates -------------------------------------------------------------------------
    def append(self, entry: AbortedTxn, segment_base: int) -> None:
        """Record an aborted transaction whose marker was written to ``segment_base``."""
        if self._last_offsets and entry.last_offset <= self._last_offsets[-1]:
            # Already recorded (markers come in offset order): nothing to add.
            log.warning("%s: aborted transaction %s is not after the last one recorded",
                        self.directory, entry)
            return
        fd = os.open(self._path(segment_base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, _ENTRY.pack(_VERSION, *entry))
        finally:
            os.close(fd)
        self._files.setdefault(segment_base, []).append(entry)
        self._dirty.add(segment_base)
        self._entries.append(entry)
        self._last_offsets.append(entry.last_offset)

    def on_completed(
        self, completed: CompletedTxn | None, producers: ProducerStateManager, segment_base: int
    ) -> None:
        """A marker closed ``completed`` (None: it closed nothing); record it if aborted.

        Called right after the producer state applied the marker, so the stable
        offset stored is the one the partition has once this transaction is closed.
        """
        if completed is None or not completed.aborted:
            return
        lso = producers.stable_offset_after(completed)
        self.append(
            AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset, lso),
            segment_base,
        )

    def truncate_to(self, offset: int, segment_bases: list[int]) -> None:
        """Drop the entries whose marker is at or after ``offset`` (Kafka's ``truncateTo``)."""
        keep = bisect_left(self._last_offsets, offset)
        if keep == len(self._entries):
            return
        self._set(self._entries[:keep])
        self._sync_files(segment_bases)

    def drop_before(self, segment_bases: list[int]) -> None:
        """The segments below ``segment_bases[0]`` were deleted: so are their entries."""
        first = segment_bases[0]
        drop = bisect_left(self._last_offsets, first)
        if drop == 0 and all(base >= first for base in self._files):
            return
        self._set(self._entries[drop:])
        self._sync_files(segment_bases)

    def clear(self) -> None:
        """The log was reset: delete every entry and file."""
        for base in list(self._files):
            self._path(base).unlink(missing_ok=True)
        self._files.clear()
        self._dirty.clear()
        self._set([])

    def flush(self) -> None:
        """fsync the files appended to since the last flush."""
        for base in sorted(self._dirty):
            with contextlib.suppress(FileNotFoundError):
                fd = os.open(self._path(base), os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self._dirty.clear()

    # -- queries --------------------------------------------------------------------------
    def ranges_before(self, end: int) -> dict[int, list[tuple[int, int]]]:
        """Producer id -> (first offset, ABORT marker offset) of its aborted transactions
        that start before ``end`` (what the cleaner leaves out of its key map)."""
        out: dict[int, list[tuple[int, int]]] = {}
        for t in self._entries:
            if t.first_offset < end:
                out.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
        return out

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``.

        Kafka's ``collectAbortedTxns``: ``lastOffset >= fetch_offset`` and
        ``firstOffset < upper_bound_offset``, scanning from the first marker at
        or after ``fetch_offset`` until an entry's last stable offset reaches the
        bound.
        """
        out = []
        entries = self._entries
        for i in range(bisect_left(self._last_offsets, fetch_offset), len(entries)):
            e = entries[i]
            if e.first_offset < upper_bound_offset:
                out.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                break
        return out
