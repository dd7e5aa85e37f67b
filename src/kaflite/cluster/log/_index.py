"""The sparse offset and time indexes of one segment.

File formats are Kafka's (``OffsetIndex`` and ``TimeIndex``), big-endian:

* ``.index``: 8-byte entries, ``relativeOffset int32 | position int32``. An entry
  says "the batch that ends at (or, for a multi-batch append, the append that
  ends at) ``base + relativeOffset`` starts at byte ``position``".
* ``.timeindex``: 12-byte entries, ``timestamp int64 | relativeOffset int32``,
  with strictly increasing timestamps: "up to this offset, the largest timestamp
  seen is this one".

Kafka writes an entry after every ``index.interval.bytes`` of appended data
(``LogSegment.append``), so finding an offset costs one binary search here and
a scan of at most that many bytes on disk.

Kafka memory-maps both files and lets the OS write them back. kaflite keeps the
entries in ``array`` objects (``bisect`` searches them in C) and writes each
file whole when the segment stops being active (a roll or a clean close). The
active segment's index files are therefore never trusted: recovery always
rescans the active segment and rebuilds its entries, which Kafka's recovery does
for every segment past the recovery point anyway. Nothing on the append path
touches an index file.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path

__all__ = ["OffsetIndex", "TimeIndex"]

_OFFSET_ENTRY = 8
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE = sys.byteorder == "little"


def _write_file(path: Path, data: bytes) -> None:
    # Written once per segment (at roll, close or compaction); no fsync here, the
    # flush path syncs it, and recovery rebuilds an index that fails its checks.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


class OffsetIndex:
    """Offset -> file position, sparse."""

    __slots__ = ("base_offset", "path", "positions", "relative_offsets")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.relative_offsets = array("i")
        self.positions = array("i")

    def __len__(self) -> int:
        return len(self.positions)

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self.relative_offsets and rel <= self.relative_offsets[-1]:
            return  # Kafka's OffsetIndex refuses non-increasing entries too
        self.relative_offsets.append(rel)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the largest entry whose offset is <= ``offset`` (0 if none)."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset) - 1
        return self.positions[i] if i >= 0 else 0

    def floor_position(self, position: int) -> int:
        """The largest indexed batch start that is <= ``position`` (0 if none)."""
        i = bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= ``offset`` (Kafka's ``truncateTo``)."""
        i = bisect_right(self.relative_offsets, offset - self.base_offset - 1)
        del self.relative_offsets[i:]
        del self.positions[i:]

    def clear(self) -> None:
        del self.relative_offsets[:]
        del self.positions[:]

    # -- files -----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        n = len(self.positions)
        entries = array("i", bytes(8 * n))
        entries[0::2] = self.relative_offsets
        entries[1::2] = self.positions
        if _LITTLE:
            entries.byteswap()
        return entries.tobytes()

    def write(self) -> None:
        _write_file(self.path, self.to_bytes())

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) if it is missing or fails Kafka's sanity checks."""
        self.clear()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % _OFFSET_ENTRY:
            return False
        entries = array("i")
        entries.frombytes(data)
        if _LITTLE:
            entries.byteswap()
        rel = entries[0::2]
        pos = entries[1::2]
        # Entries strictly increase in both offset and position, and point inside the log.
        if any(a >= b for a, b in pairwise(rel)):
            return False
        if any(a >= b for a, b in pairwise(pos)):
            return False
        if rel and (rel[0] < 0 or pos[0] < 0 or pos[-1] >= log_size):
            return False
        self.relative_offsets = rel
        self.positions = pos
        return True

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)


class TimeIndex:
    """Largest timestamp so far -> offset, sparse."""

    __slots__ = ("base_offset", "path", "relative_offsets", "timestamps")

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps = array("q")
        self.relative_offsets = array("i")

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def last_entry(self) -> tuple[int, int] | None:
        if not self.timestamps:
            return None
        return self.timestamps[-1], self.base_offset + self.relative_offsets[-1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry if ``timestamp`` is larger than the last one (Kafka's ``maybeAppend``)."""
        if self.timestamps and timestamp <= self.timestamps[-1]:
            return
        rel = offset - self.base_offset
        if self.relative_offsets and rel < self.relative_offsets[-1]:
            return
        self.timestamps.append(timestamp)
        self.relative_offsets.append(rel)

    def lookup(self, timestamp: int) -> int:
        """Offset of the largest entry whose timestamp is <= ``timestamp`` (base if none)."""
        i = bisect_right(self.timestamps, timestamp) - 1
        return self.base_offset + self.relative_offsets[i] if i >= 0 else self.base_offset

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        rel = offset - self.base_offset
        keep = len(self.relative_offsets)
        while keep and self.relative_offsets[keep - 1] >= rel:
            keep -= 1
        del self.timestamps[keep:]
        del self.relative_offsets[keep:]

    def clear(self) -> None:
        del self.timestamps[:]
        del self.relative_offsets[:]

    # -- files -----------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        out = bytearray(_TIME_ENTRY.size * len(self.timestamps))
        pack = _TIME_ENTRY.pack_into
        for i, (ts, rel) in enumerate(zip(self.timestamps, self.relative_offsets, strict=True)):
            pack(out, i * _TIME_ENTRY.size, ts, rel)
        return bytes(out)

    def write(self) -> None:
        _write_file(self.path, self.to_bytes())

    def load(self) -> bool:
        self.clear()
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % _TIME_ENTRY.size:
            return False
        ts = array("q")
        rel = array("i")
        for t, r in _TIME_ENTRY.iter_unpack(data):
            if (ts and t <= ts[-1]) or r < 0 or (rel and r < rel[-1]):
                self.clear()
                return False
            ts.append(t)
            rel.append(r)
        self.timestamps = ts
        self.relative_offsets = rel
        return True

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
