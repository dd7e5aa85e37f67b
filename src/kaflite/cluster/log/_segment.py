"""One log segment: a ``.log`` file of record batches and its two indexes.

Theory of operation
-------------------
A segment is named by its base offset and holds batches whose offsets are at
least that base and whose relative offsets fit an int32 (the index format).
Batches are stored byte for byte as the leader stamped them, so a read is a
single ``os.pread`` of a byte range and the bytes go to the consumer unchanged.

Finding where an offset lives (Kafka's ``LogSegment.translateOffset``): the
offset index names a batch start at or before it, then batch headers are
walked forward. Headers are read through a 64 KiB window, so the walk of at
most ``index.interval.bytes`` costs one or two ``pread`` calls.

Recovery (``recover``) reads the whole file in large chunks, checks every
batch's framing and CRC-32C, checks that offsets only move forward, rebuilds
both indexes, and cuts the file at the first batch that fails: a torn write
or a flipped byte ends the segment there, as in Kafka's ``LogSegment.recover``.
Note that baseOffset and partitionLeaderEpoch lie outside the CRC, so the
offset checks are the only guard on those two fields.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from kaflite.cluster.log._files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_path
from kaflite.cluster.log._index import OffsetIndex, TimeIndex
from kaflite.cluster.log._types import LogError
from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.records import HEADER_SIZE, RecordBatch, crc32c

__all__ = ["BatchInfo", "LogSegment", "check_batch"]

# The v2 batch header (Kafka's DefaultRecordBatch), parsed with one struct call.
_HEADER = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = 12  # baseOffset + batchLength
_LENGTH = struct.Struct(">i")
_ATTRIBUTES_AT = 21
_MIN_BATCH_LENGTH = HEADER_SIZE - _LOG_OVERHEAD
_INT32_MAX = (1 << 31) - 1
_WINDOW = 64 * 1024
_CHUNK = 8 * 1024 * 1024
_LOG_APPEND_TIME_BIT = 0x08
_CONTROL_BIT = 0x20
_TRANSACTIONAL_BIT = 0x10


class BatchInfo(NamedTuple):
    """A batch header and where it lies in its segment."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    attributes: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)


def parse_info(buf: bytes | bytearray | memoryview, at: int, position: int) -> BatchInfo:
    (base, length, epoch, _magic, _crc, attrs, last_delta, _base_ts, max_ts, pid, pepoch, seq,
     count) = _HEADER.unpack_from(buf, at)
    return BatchInfo(position, _LOG_OVERHEAD + length, base, base + last_delta, epoch, attrs,
                     max_ts, pid, pepoch, seq, count)


def check_batch(view: memoryview, at: int) -> int:
    """Size of the intact v2 batch at ``at`` in ``view``, or 0 if it is torn or corrupt.

    Framing and CRC only: a compacted batch may hold fewer records than its
    offset range, so Kafka's client-side count checks do not apply to data
    already in a log.
    """
    left = len(view) - at
    if left < HEADER_SIZE or view[at + 16] != 2:
        return 0
    (length,) = struct.unpack_from(">i", view, at + 8)
    size: int = _LOG_OVERHEAD + length
    if length < _MIN_BATCH_LENGTH or size > left:
        return 0
    (crc,) = struct.unpack_from(">I", view, at + 17)
    if crc32c(view[at + _ATTRIBUTES_AT : at + size]) != crc:
        return 0
    return size


class LogSegment:
    """A ``.log`` file plus its in-memory offset and time indexes."""

    def __init__(self, directory: Path, base_offset: int, index_interval: int, now_ms: int) -> None:
        self.base_offset = base_offset
        self.log_path = segment_path(directory, base_offset, LOG_SUFFIX)
        self.offset_index = OffsetIndex(segment_path(directory, base_offset, INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(segment_path(directory, base_offset, TIMEINDEX_SUFFIX), base_offset)
        self.index_interval = index_interval
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        # Kafka's rollingBasedTimestamp: the first batch's max timestamp, for segment.ms.
        self.first_batch_timestamp: int | None = None
        self.created_ms = now_ms
        self._bytes_since_index = 0
        self._fd = -1

    # -- file handle --------------------------------------------------------------------
    @property
    def fd(self) -> int:
        if self._fd < 0:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def seal(self) -> None:
        """The segment stops being active: record its max timestamp, write its indexes.

        Kafka's ``onBecomeInactiveSegment`` appends the largest timestamp seen to
        the time index, so the last time-index entry of an inactive segment is its
        max timestamp; loading relies on that.
        """
        if self.size:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.write()
        self.time_index.write()

    # -- append -------------------------------------------------------------------------
    def append(self, data: bytes | bytearray | memoryview, last_offset: int, max_timestamp: int) -> None:
        """Write batches already stamped with offsets; index them as Kafka's ``LogSegment.append``."""
        position = self.size
        view = memoryview(data)
        fd = self.fd
        while view:
            view = view[os.write(fd, view) :]
        size = len(data)
        if size > _LOG_OVERHEAD and _LOG_OVERHEAD + _LENGTH.unpack_from(data, 8)[0] < size:
            # Several batches (a replica fetch, a producer's in one request): Kafka
            # indexes batch by batch, so an index entry can fall inside the append.
            self._index_each(data, position)
        else:
            if position == 0:
                self.first_batch_timestamp = max_timestamp
            self._index(position, size, last_offset, max_timestamp)
        self.size = position + size
        self.next_offset = last_offset + 1

    def _index(self, position: int, size: int, last_offset: int, max_timestamp: int) -> None:
        """One batch's part in the indexes, as Kafka's ``LogSegment.append`` does it."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.index_interval:
            self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def _index_each(self, data: bytes | bytearray | memoryview, position: int) -> None:
        at = 0
        while at < len(data):
            info = parse_info(data, at, position + at)
            if info.position == 0:
                self.first_batch_timestamp = info.max_timestamp
            self._index(info.position, info.size, info.last_offset, info.max_timestamp)
            at += info.size

    @property
    def largest_timestamp(self) -> int:
        """Kafka's ``LogSegment.largestTimestamp``: the max record timestamp, or the
        file's modification time when no record carries a timestamp."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return -1

    def fits_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # -- reading ------------------------------------------------------------------------
    def pread(self, length: int, position: int) -> bytes:
        data = os.pread(self.fd, length, position)
        if len(data) != length:
            raise LogError(f"{self.log_path}: short read of {length} bytes at {position}")
        return data

    def iter_infos(self, start: int, end: int | None = None) -> Iterator[BatchInfo]:
        """Batch headers from ``start`` (a batch boundary) up to ``end``."""
        end = self.size if end is None else end
        pos = start
        buf = b""
        buf_at = start
        while pos < end:
            rel = pos - buf_at
            if rel + HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, _WINDOW, pos)
                buf_at, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    return
            info = parse_info(buf, rel, pos)
            if info.size < HEADER_SIZE:
                return
            yield info
            pos += info.size

    def iter_raw(self, start: int, end: int | None = None) -> Iterator[tuple[int, memoryview]]:
        """Whole batches (position, bytes) from ``start``; stops before a torn one."""
        end = self.size if end is None else end
        pos = start
        while pos < end:
            chunk = os.pread(self.fd, min(_CHUNK, end - pos), pos)
            view = memoryview(chunk)
            at = 0
            while len(view) - at >= _LOG_OVERHEAD:
                (length,) = struct.unpack_from(">i", view, at + 8)
                size = _LOG_OVERHEAD + length
                if length < _MIN_BATCH_LENGTH:
                    return
                if size > len(view) - at:
                    break
                yield pos + at, view[at : at + size]
                at += size
            if at == 0:
                # One batch larger than the chunk: read it whole, or stop if it is torn.
                if len(view) < _LOG_OVERHEAD:
                    return
                (length,) = struct.unpack_from(">i", view, 8)
                size = _LOG_OVERHEAD + length
                if pos + size > end:
                    return
                yield pos, memoryview(os.pread(self.fd, size, pos))
                at = size
            pos += at

    def find_batch(self, offset: int, start: int = 0) -> BatchInfo | None:
        """The first batch whose last offset is >= ``offset`` (``translateOffset``)."""
        begin = max(self.offset_index.lookup(offset), start)
        for info in self.iter_infos(begin):
            if info.last_offset >= offset:
                return info
        return None

    def last_boundary(self, start: int, limit: int) -> tuple[int, int]:
        """The largest batch end <= ``limit`` (walking from ``start`` at the latest),
        and the base offset of the batch that starts there (the next one to fetch)."""
        pos = max(self.offset_index.floor_position(limit), start)
        following = self.next_offset
        for info in self.iter_infos(pos):
            if info.position + info.size > limit:
                following = info.base_offset
                break
            pos = info.position + info.size
        return pos, following

    def read(
        self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool
    ) -> tuple[bytes, int, int] | None:
        """Whole batches from the one holding ``offset``; None if the segment has none.

        Returns (bytes, base offset of the first batch, offset to fetch next). A
        batch is visible only if its last offset is below ``max_offset``.
        """
        first = self.find_batch(offset)
        if first is None:
            return None
        if first.last_offset >= max_offset:
            return b"", -1, offset
        if max_offset >= self.next_offset:
            max_position, following = self.size, self.next_offset
        else:
            fence = self.find_batch(max_offset, first.position)
            if fence is None:
                max_position, following = self.size, self.next_offset
            else:
                max_position, following = fence.position, fence.base_offset
        limit = first.position + max(max_bytes, 0)
        if limit < max_position:
            max_position, following = self.last_boundary(first.position, limit)
            if max_position == first.position:
                if not min_one_batch:
                    return b"", -1, offset
                max_position, following = first.position + first.size, first.last_offset + 1
        data = self.pread(max_position - first.position, first.position)
        return data, first.base_offset, following

    # -- timestamps ---------------------------------------------------------------------------
    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """First record at or after ``start_offset`` with a timestamp >= ``timestamp``.

        Kafka's ``LogSegment.findOffsetByTimestamp``: the time index gives a
        starting offset, the offset index a position, then batches whose max
        timestamp reaches the target are decoded record by record.
        """
        hint = max(self.time_index.lookup(timestamp), start_offset)
        for _, view in self.iter_raw(self.offset_index.lookup(hint)):
            info = parse_info(view, 0, 0)
            if info.last_offset < start_offset or info.max_timestamp < timestamp:
                continue
            cols = _decode(view).columns()
            for off, ts in zip(cols.offsets, cols.timestamps, strict=True):
                if ts >= timestamp and off >= start_offset:
                    return off, ts
        return None

    def find_max_timestamp_record(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the segment's max timestamp (KIP-734)."""
        if not self.size:
            return None
        start = self.offset_index.lookup(self.offset_of_max_timestamp)
        for _, view in self.iter_raw(start):
            info = parse_info(view, 0, 0)
            if info.max_timestamp != self.max_timestamp:
                continue
            if info.attributes & _LOG_APPEND_TIME_BIT:
                return info.base_offset, info.max_timestamp
            cols = _decode(view).columns()
            for off, ts in zip(cols.offsets, cols.timestamps, strict=True):
                if ts == self.max_timestamp:
                    return off, ts
            return info.base_offset, info.max_timestamp
        return None

    # -- loading and recovery -------------------------------------------------------------------
    def load(self) -> bool:
        """Open an inactive segment from its files; False if its indexes need a rebuild."""
        self.size = os.fstat(self.fd).st_size
        if not self.offset_index.load(self.size) or not self.time_index.load():
            return False
        last = self.time_index.last_entry
        if self.size and last is None:
            return False  # a sealed segment always ends its time index with its max
        if last is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last
        # Kafka's readNextOffset: walk from the last index entry to the end.
        start = self.offset_index.positions[-1] if len(self.offset_index) else 0
        next_offset = self.base_offset
        for info in self.iter_infos(start):
            next_offset = info.last_offset + 1
        self.next_offset = next_offset
        return True

    def recover(self, on_batch: Callable[[BatchInfo, memoryview], None] | None = None) -> int:
        """Validate every batch, rebuild the indexes, cut the file at the first bad batch.

        Returns the number of bytes cut off.
        """
        file_size = os.fstat(self.fd).st_size
        self.offset_index.clear()
        self.time_index.clear()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = None
        valid = 0
        last_indexed = 0
        expected = self.base_offset
        for pos, view in self.iter_raw(0, file_size):
            if pos != valid or not check_batch(view, 0):
                break
            info = parse_info(view, 0, pos)
            if info.base_offset < expected or not self.fits_offset(info.last_offset):
                break
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp = info.max_timestamp
                self.offset_of_max_timestamp = info.last_offset
            if valid - last_indexed > self.index_interval:
                self.offset_index.append(info.last_offset, valid)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                last_indexed = valid
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = info.max_timestamp
            if on_batch is not None:
                on_batch(info, view)
            expected = info.last_offset + 1
            valid += info.size
        if valid < file_size:
            os.ftruncate(self.fd, valid)
        self.size = valid
        self.next_offset = expected
        self._bytes_since_index = valid - last_indexed
        return file_size - valid

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset``; returns bytes removed.

        A batch that straddles ``offset`` goes as a whole (Kafka's ``truncateTo``).
        """
        info = self.find_batch(offset)
        if info is None:
            return 0
        removed = self.size - info.position
        os.ftruncate(self.fd, info.position)
        # Rebuild the indexes and timestamps from what is left: truncation is rare
        # (a follower diverged), so a header walk is cheap enough.
        self.rebuild_from_headers()
        return removed

    def rebuild_from_headers(self) -> None:
        """Rebuild indexes and counters by walking headers (no CRC check)."""
        self.size = os.fstat(self.fd).st_size
        self.offset_index.clear()
        self.time_index.clear()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.first_batch_timestamp = None
        self.next_offset = self.base_offset
        last_indexed = 0
        for info in self.iter_infos(0):
            if info.max_timestamp > self.max_timestamp:
                self.max_timestamp = info.max_timestamp
                self.offset_of_max_timestamp = info.last_offset
            if info.position - last_indexed > self.index_interval:
                self.offset_index.append(info.last_offset, info.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                last_indexed = info.position
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = info.max_timestamp
            self.next_offset = info.last_offset + 1
        self._bytes_since_index = self.size - last_indexed

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, next_offset={self.next_offset}, "
            f"size={self.size})"
        )


def _decode(view: memoryview) -> RecordBatch:
    try:
        return RecordBatch.from_buffer(view)
    except RemoteProtocolError as exc:
        raise LogError(f"undecodable batch in the log: {exc}") from exc
