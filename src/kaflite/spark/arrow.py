"""Kafka record batches → ``pyarrow.RecordBatch`` in Spark's Kafka schema (``schema``).

Theory of operation
-------------------
The executors spend their time here, so the common case never makes a Python
object per record. Producers write batches whose records look alike, and the
codec's ``kaflite.protocol.records.shape`` finds such runs of strided records
(record ``r`` starts ``r * S`` bytes after the first, every field at the same
place) with C-level column checks. The codec's bulk decoder turns runs into
Python lists; this module turns them into Arrow arrays:

1. A batch is split into runs (``_runs``); it splits into a few, because varints
   grow a byte at offset delta 64 and 8192.
2. When ``build()`` is called, the runs of one layout (from many batches: a
   Java producer's 16 KiB batches hold about 140 records of 100 bytes) are
   converted together: their bytes become one ``fixed_size_binary(S)`` Arrow
   array, ``pyarrow.compute.binary_slice`` cuts the keys and values out of it,
   the timestamp deltas are un-zigzagged with Arrow kernels and the offsets
   are a range; each run then takes its slice back, in order.

Batch CRCs are checked by the caller (``_fetch``), so the layout checks only
have to tell record shapes apart. A batch that does not split into a few long
runs (varied value sizes, headers) goes through ``RecordBatch.columns()`` and
is converted from its lists; that path is general and several times slower.
Both give the same arrays (tests compare them on many shapes of batch).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from itertools import accumulate
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc

from kaflite.protocol import ProtocolError
from kaflite.protocol.records import RecordBatch
from kaflite.protocol.records.shape import RecordShape
from kaflite.spark.schema import HEADER_TYPE, HEADERS_TYPE, TIMESTAMP, arrow_schema

__all__ = ["MIN_ROWS", "ColumnBuilder", "overlaps"]

Buffer = bytes | bytearray


# -- strided runs ---------------------------------------------------------------------
_MIN_BATCH = 16     # smaller batches are not worth the vector set-up
MIN_ROWS = 4096     # pieces smaller than this are joined before they are handed out


class _Run(RecordShape):
    """``count`` records from byte ``start`` and record index ``index``, all alike
    (``count`` is 0 when the record at ``start`` cannot begin a run)."""

    __slots__ = ("count", "index", "start")

    def __init__(self, buf: Buffer, p: int, index: int, end: int) -> None:
        super().__init__(buf, p)
        self.start, self.index, self.count = p, index, 0
        if self.size:
            self.count = self.run_length(buf, p, (end - p) // self.size, index)


def _in_place(raw: memoryview) -> tuple[Buffer, int, int]:
    """``raw`` as (the bytes object it views, start, end), or a copy if it views none.

    Strided slices of ``bytes`` and ``bytearray`` run in a tight C loop; those of a
    ``memoryview`` take several times as long. A Fetch response's records view
    the frame's ``bytearray``, so the checks slice that in place.
    """
    base = raw.obj
    if isinstance(base, bytes | bytearray) and raw.c_contiguous and raw.itemsize == 1:
        start = pa.py_buffer(raw).address - pa.py_buffer(base).address
        if 0 <= start <= len(base) - len(raw):
            return base, start, start + len(raw)
    return bytes(raw), 0, len(raw)


def _runs(buf: Buffer, count: int, start: int, end: int) -> list[_Run] | None:
    """Split the records in ``buf[start:end]`` into strided runs; None when not into few.

    Bytes past ``end`` may belong to the next batch: a run never reaches them.
    """
    if count < _MIN_BATCH:
        return None
    runs: list[_Run] = []
    budget = 2 + count // 16
    p, i = start, 0
    try:
        while i < count:
            run = _Run(buf, p, i, end)
            if run.count < 1 or len(runs) >= budget:
                return None
            run.count = min(run.count, count - i)
            runs.append(run)
            i += run.count
            p += run.count * run.size
    except (IndexError, ProtocolError):
        return None
    return runs if p == end else None


# Arrow scalars made once: a plain Python int argument to a compute function is
# converted on every call, and pyarrow's conversion tries to import pandas each
# time (a file system search when pandas is not installed).
_I64 = pa.int64()
_ONE = pa.scalar(1, _I64)
_LOW7 = pa.scalar(0x7F, _I64)
_SHIFTS = [pa.scalar(7 * j, _I64) for j in range(4)]
_THOUSAND = pa.scalar(1000, _I64)


_IOTA: list[pa.Array] = [pa.array([], pa.int64())]
_STEPS: dict[int, pa.Buffer] = {}


def _iota(n: int) -> pa.Array:
    """0, 1, ..., n-1 as int64 (a slice of a cached array: no per-value work)."""
    if len(_IOTA[0]) < n:
        size = max(n, 2 * len(_IOTA[0]), 1 << 16)
        _IOTA[0] = pa.Array.from_buffers(_I64, size, [None, pa.py_buffer(array("q", range(size)))])
    return _IOTA[0].slice(0, n)


def _steps(length: int, n: int) -> pa.Buffer:
    """int32 offsets 0, L, 2L, ..., nL: the offsets of n values of length L."""
    cached = _STEPS.get(length)
    if cached is None or cached.size < 4 * (n + 1):
        size = max(n + 1, 1 << 16)
        cached = pa.py_buffer(array("i", range(0, size * length, length)) if length
                              else array("i", [0]) * size)
        _STEPS[length] = cached
    return cached.slice(0, 4 * (n + 1))


def _fixed_to_binary(values: pa.Array, length: int) -> pa.Array:
    """A fixed_size_binary(L) array (offset 0, no nulls) as binary, sharing its bytes."""
    n = len(values)
    return pa.Array.from_buffers(pa.binary(), n, [None, _steps(length, n), values.buffers()[1]])


# zigzag-decoded values of one-byte varints, for pc.take
_UNZIGZAG8 = pa.array([(z >> 1) ^ -(z & 1) if z < 0x80 else 0 for z in range(256)], _I64)


def _zigzag_column(cols: list[Buffer], base: int) -> pa.Array:
    """``base`` + the zigzag varints of one width given as byte columns (low byte first)."""
    if len(cols) == 1:
        u8 = pa.Array.from_buffers(pa.uint8(), len(cols[0]), [None, pa.py_buffer(cols[0])])
        return pc.add(pc.take(_UNZIGZAG8, u8), pa.scalar(base, _I64))
    z: Any = None
    for j, col in enumerate(cols):
        b = pa.Array.from_buffers(pa.uint8(), len(col), [None, pa.py_buffer(col)]).cast(_I64)
        if j < len(cols) - 1:
            b = pc.bit_wise_and(b, _LOW7)
        if j:
            b = pc.shift_left(b, _SHIFTS[j])
        z = b if z is None else pc.add(z, b)
    delta = pc.bit_wise_xor(pc.shift_right(z, _ONE), pc.negate(pc.bit_wise_and(z, _ONE)))
    return pc.add(delta, pa.scalar(base, _I64))


# -- list-based helpers -----------------------------------------------------------------------
def _binary(views: list[memoryview | None]) -> pa.Array:
    """A binary array from views without a Python bytes object per value."""
    n = len(views)
    nulls = views.count(None)
    present = [v for v in views if v is not None] if nulls else cast("list[memoryview]", views)
    data = b"".join(present)
    offsets = array("i", [0])
    if nulls:
        offsets.extend(accumulate(0 if v is None else len(v) for v in views))
        validity = pa.array([v is not None for v in views], pa.bool_()).buffers()[1]
    else:
        offsets.extend(accumulate(map(len, present)))
        validity = None
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets),
                                                  pa.py_buffer(data)], null_count=nulls)


def _headers(rows: list[Any]) -> pa.Array:
    """Header tuples per record → ``array<struct<key, value>>``, null when none."""
    offsets = array("i", [0])
    keys: list[str] = []
    values: list[memoryview | None] = []
    mask = []
    for h in rows:
        if h:
            for k, v in h:
                keys.append(k)
                values.append(v)
        mask.append(not h)
        offsets.append(len(keys))
    struct = pa.StructArray.from_arrays([pa.array(keys, pa.string()), _binary(values)],
                                        fields=list(HEADER_TYPE))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), struct, type=HEADERS_TYPE,
                                    mask=pa.array(mask, pa.bool_()))


def _constant_int32(value: int, n: int) -> pa.Array:
    return pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(array("i", [value]) * n)])


_PIECE_FIELDS = [pa.field("key", pa.binary()), pa.field("value", pa.binary()),
                 pa.field("offset", pa.int64()), pa.field("millis", pa.int64())]
_PIECE = pa.schema(_PIECE_FIELDS)
_PIECE_WITH_HEADERS = pa.schema([*_PIECE_FIELDS, pa.field("headers", HEADERS_TYPE)])


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    if hasattr(pa, "concat_batches"):  # pyarrow 19+
        return pa.concat_batches(batches)
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]  # pragma: no cover


class _Piece:
    """Consecutive records of one Kafka batch: key, value, offset, millis[, headers]."""

    __slots__ = ("batch",)

    def __init__(self, batch: pa.RecordBatch | None = None) -> None:
        self.batch = batch


class _Strided(_Piece):
    """``count`` records of a run, waiting to be converted with the others of its layout."""

    __slots__ = ("count", "first_offset", "layout", "source", "start", "ts_base")

    def __init__(self, run: _Run, source: Buffer, start: int, count: int, first_offset: int,
                 ts_base: int, log_append_time: bool) -> None:
        super().__init__()
        self.layout = (run.size, run.key_at, run.key_len, run.value_at, run.value_len,
                       run.ts_at, run.ts_width, log_append_time)
        self.source, self.start, self.count = source, start, count
        self.first_offset, self.ts_base = first_offset, ts_base

    @property
    def region(self) -> memoryview:
        """The run's records: ``count`` records of ``size`` bytes, without a copy."""
        return memoryview(self.source)[self.start:self.start + self.count * self.layout[0]]


def _repeat_each(values: list[int], counts: list[int]) -> pa.Array:
    out = array("q")
    for v, c in zip(values, counts, strict=True):
        out.extend(array("q", [v]) * c)
    return pa.Array.from_buffers(_I64, len(out), [None, pa.py_buffer(out)])


def _bytes_column(records: pa.Array, n: int, at: int, length: int) -> pa.Array:
    if length < 0:
        return pa.nulls(n, pa.binary())
    if length == 0:
        return pa.Array.from_buffers(pa.binary(), n, [None, _steps(0, n), pa.py_buffer(b"")])
    cut = pc.call_function("binary_slice", [records], pc.SliceOptions(at, at + length))
    return _fixed_to_binary(cut, length)


def _convert(group: list[_Strided], include_headers: bool) -> None:
    """Convert runs of one layout in one go (their bytes joined), then hand out slices.

    Small producer batches (Java's default batch.size gives about 140 records of
    100 bytes) make short runs; doing the Arrow work per layout rather than per
    run keeps its fixed cost off every batch.
    """
    size, key_at, key_len, value_at, value_len, ts_at, ts_width, lat = group[0].layout
    counts = [m.count for m in group]
    n = sum(counts)
    if len(group) == 1:
        # Strided slices of bytes run in a tight C loop (a memoryview's take several
        # times as long), so the columns are cut from the batch's bytes in place.
        data: Any = group[0].region
        source, begin = group[0].source, group[0].start
    else:
        data = source = b"".join(m.region for m in group)
        begin = 0
    end = begin + n * size
    records = pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), n,
                                                   [None, pa.py_buffer(data)])
    keys = _bytes_column(records, n, key_at, key_len)
    values = _bytes_column(records, n, value_at, value_len)
    bases = _repeat_each([m.ts_base for m in group], counts)
    if lat:
        timestamps = bases
    else:
        cols = [source[begin + ts_at + j:end:size] for j in range(ts_width)]
        if ts_width == 1 and not cols[0].strip(b"\x00"):
            timestamps = bases
        else:
            timestamps = pc.add(_zigzag_column(cols, 0), bases)
    first = group[0].first_offset
    if all(m.first_offset == first + c for m, c in zip(group, accumulate([0, *counts]),
                                                        strict=False)):
        offsets = pc.add(_iota(n), pa.scalar(first, _I64))
    else:
        starts = [m.first_offset - c for m, c in zip(group, accumulate([0, *counts]),
                                                     strict=False)]
        offsets = pc.add(_iota(n), _repeat_each(starts, counts))
    columns = [keys, values, offsets, timestamps]
    if include_headers:
        columns.append(pa.nulls(n, HEADERS_TYPE))
    whole = pa.RecordBatch.from_arrays(columns, schema=_PIECE_WITH_HEADERS if include_headers
                                       else _PIECE)
    at = 0
    for m in group:
        m.batch = whole.slice(at, m.count)
        m.source = b""          # the arrays are copies: let the source buffer go
        at += m.count


def overlaps(batch: RecordBatch, lo: int, hi: int) -> bool:
    """Whether ``batch`` holds offsets in ``[lo, hi)``."""
    return batch.next_offset > lo and batch.base_offset < hi


class ColumnBuilder:
    """Collects the records of one partition into Spark's columns.

    ``add(batch, lo, hi)`` takes the records of a Kafka batch whose offsets lie
    in ``[lo, hi)``; ``build()`` returns them as one ``pyarrow.RecordBatch``
    and starts over.
    """

    def __init__(self, topic: str, partition: int, include_headers: bool = False) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = arrow_schema(include_headers)
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self._pieces: list[_Piece] = []
        self._types = array("i")

    def __len__(self) -> int:
        return self.rows

    def add(self, batch: RecordBatch, lo: int, hi: int) -> int:
        """Add the records of ``batch`` with ``lo <= offset < hi``; returns how many.

        The records are read in place, in the buffer the batch came in (the
        Fetch response's frame): call ``settle()`` before that buffer is reused.
        """
        if batch.is_control or not overlaps(batch, lo, hi):
            return 0
        runs = None
        if batch.record_count >= _MIN_BATCH:
            data, start, end = _in_place(batch.records_buffer())
            runs = _runs(data, batch.record_count, start, end)
        if runs is None:
            n = self._add_columns(batch, lo, hi)
        else:
            n = self._add_runs(batch, data, runs, lo, hi)
        self._types.extend(array("i", [batch.timestamp_type]) * n)
        self.rows += n
        return n

    def _add_runs(self, batch: RecordBatch, data: Buffer, runs: list[_Run],
                  lo: int, hi: int) -> int:
        base = batch.base_offset
        first, last = max(lo - base, 0), min(hi - base, batch.record_count)
        lat = batch.is_log_append_time
        ts_base = batch.max_timestamp if lat else batch.base_timestamp
        for run in runs:
            a, b = max(run.index, first), min(run.index + run.count, last)
            if a >= b:
                continue
            start = run.start + (a - run.index) * run.size
            self._pieces.append(_Strided(run, data, start, b - a, base + a, ts_base, lat))
        return max(last - first, 0)

    def _add_columns(self, batch: RecordBatch, lo: int, hi: int) -> int:
        cols = batch.columns()
        offsets = cols.offsets
        a, b = bisect_left(offsets, lo), bisect_left(offsets, hi)
        if a >= b:
            return 0
        columns = [
            _binary(cols.keys[a:b]), _binary(cols.values[a:b]),
            pa.Array.from_buffers(_I64, b - a, [None, pa.py_buffer(array("q", offsets[a:b]))]),
            pa.Array.from_buffers(_I64, b - a, [None, pa.py_buffer(
                array("q", cols.timestamps[a:b]))])]
        if self.include_headers:
            columns.append(_headers(cols.headers[a:b]))
        self._pieces.append(_Piece(pa.RecordBatch.from_arrays(
            columns, schema=_PIECE_WITH_HEADERS if self.include_headers else _PIECE)))
        return b - a

    def settle(self) -> None:
        """Convert the runs added so far, so that nothing refers to their buffers any more."""
        groups: dict[tuple[int | bool, ...], list[_Strided]] = {}
        for piece in self._pieces:
            if isinstance(piece, _Strided) and piece.batch is None:
                groups.setdefault(piece.layout, []).append(piece)
        for group in groups.values():
            if sum(m.count for m in group) >= MIN_ROWS * len(group):
                for m in group:          # big runs: no need to join their bytes first
                    _convert([m], self.include_headers)
            else:
                _convert(group, self.include_headers)

    def build_batches(self) -> list[pa.RecordBatch]:
        """The records added so far as Arrow batches in offset order; starts over.

        A big run becomes a batch of its own, sliced from its conversion without
        another copy; smaller pieces are joined until a batch has ``MIN_ROWS``.
        """
        if self.rows == 0:
            return []
        self.settle()
        out: list[pa.RecordBatch] = []
        small: list[pa.RecordBatch] = []   # pieces waiting to be joined, of ``rows`` rows
        rows = done = 0                    # done: records already in ``out``

        def emit(pieces: list[pa.RecordBatch], n: int) -> None:
            nonlocal done
            out.append(self._finish(_concat(pieces), done))
            done += n

        for piece in self._pieces:
            batch = piece.batch
            assert batch is not None
            if batch.num_rows >= MIN_ROWS:     # a big run: an Arrow batch of its own
                if small:
                    emit(small, rows)
                    small, rows = [], 0
                emit([batch], batch.num_rows)
                continue
            small.append(batch)
            rows += batch.num_rows
            if rows >= MIN_ROWS:
                emit(small, rows)
                small, rows = [], 0
        if small:
            emit(small, rows)
        self._reset()
        return out

    def _finish(self, piece: pa.RecordBatch, start: int) -> pa.RecordBatch:
        """Spark's columns for a piece whose first record is record ``start`` of the lot."""
        n = piece.num_rows
        topic = self.topic.encode()
        columns = [
            piece.column(0),
            piece.column(1),
            pa.Array.from_buffers(pa.string(), n, [None, _steps(len(topic), n),
                                                   pa.py_buffer(topic * n)]),
            _constant_int32(self.partition, n),
            piece.column(2),
            pc.multiply(piece.column(3), _THOUSAND).view(TIMESTAMP),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(
                self._types[start:start + n])]),
        ]
        if self.include_headers:
            columns.append(piece.column(4))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)

    def build(self) -> pa.RecordBatch | None:
        """The records added so far as one Arrow batch (None if there are none)."""
        batches = self.build_batches()
        return _concat(batches) if batches else None
