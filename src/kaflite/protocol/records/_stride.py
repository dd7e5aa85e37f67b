"""The bulk decoder's fast path: runs of records that share one shape.

Theory of operation
-------------------
Producers mostly write batches whose records look alike: the same key and
value lengths, no headers, timestamp deltas of one width and offset deltas
counting up from 0. Such a run of records is a *strided* layout: record ``r``
starts ``r * S`` bytes after the first, and every field sits at the same
position within its record. A ``memoryview`` slice with a step,
``buf[start + f : end : S]``, gathers field byte ``f`` of every record of the
run in C, so each field is checked or decoded for all records at once:

1. The first record is parsed the ordinary way; that gives the template: its
   size ``S`` and which byte positions are constant (length varint,
   attributes, key/value length varints, the header count) or vary (the
   timestamp delta, the offset delta).
2. Every constant column must equal the template's byte repeated; the offset
   delta columns must equal the encodings of consecutive deltas, which come
   from precomputed per-width tables; the timestamp delta columns must keep
   the template's varint width (continuation bits). The run is the longest
   prefix of records for which all of these hold, found with C-level
   comparisons (``int.from_bytes`` XOR for the first differing byte, a regex
   for continuation-bit runs).
3. If all fixed bytes of a record match the template, the record decodes
   exactly as the template did, with its own delta values and its own
   key/value bytes: the length varint says it ends where the next stride
   begins. So the run is decoded from the columns: offsets from a ``range``,
   timestamps from the delta columns through lookup tables, keys and values
   as ``memoryview`` slices built by ``map``.

Anything else (headers, a varint width that changes, a record that does not
match) falls back to ``_decode.decode_columns`` for a stretch of records, after
which the fast path is tried again. A short probe is made before a full-length
attempt, so batches of varied records pay little for the attempt.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from itertools import repeat
from operator import add
from typing import Any, cast

from kaflite.protocol._exceptions import RemoteProtocolError
from kaflite.protocol.records._decode import NO_HEADERS, RecordColumns, decode_columns

__all__ = ["decode_columns_fast"]

_PROBE = 32  # records checked before a full-length attempt
_MIN_RUN = 16  # a shorter run sends the next _FALLBACK records to the slow path
_FALLBACK = 64
_MAX_DELTA = 1 << 17  # offset deltas covered by the column tables

_CONTINUED = re.compile(rb"[\x80-\xff]*")
_FINAL = re.compile(rb"[\x00-\x7f]*")

# zigzag decode of z < 2**14 (one- and two-byte varints)
_UNZIGZAG = [(z >> 1) ^ -(z & 1) for z in range(1 << 14)]
_LOW7 = [b & 0x7F for b in range(256)]
_SHL7 = [b << 7 for b in range(256)]


# (first byte, field length, record size, records) -> Struct.unpack_from of that run
_UNPACKERS: dict[tuple[int, int, int, int], Callable[[memoryview], tuple[Any, ...]]] = {}


def _varint_bytes(v: int) -> bytes:
    z = v << 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# _OD_COLUMNS[w] = (first delta of width w, [column 0 bytes, column 1 bytes, ...]),
# built on first use.
_OD_COLUMNS: dict[int, tuple[int, list[bytes]]] = {}


def _od_columns(width: int) -> tuple[int, list[bytes]]:
    cached = _OD_COLUMNS.get(width)
    if cached is None:
        lo = 0 if width == 1 else 1 << (7 * (width - 1) - 1)
        hi = min(1 << (7 * width - 1), _MAX_DELTA)
        cached = (lo, [_od_column(j, width, lo, hi) for j in range(width)])
        _OD_COLUMNS[width] = cached
    return cached


def _od_column(j: int, width: int, lo: int, hi: int) -> bytes:
    """Byte ``j`` of the varint of every offset delta in ``[lo, hi)``, as one string.

    The zigzag of a delta ``d >= 0`` is ``2d``, so byte ``j`` holds bits
    ``7j - 1 ..`` of ``d``: byte 0 repeats with period 64 (``2d & 0x7f``), and
    byte ``j >= 1`` is ``(d >> (7j - 1)) & 0x7f``, constant over runs of
    ``2**(7j - 1)`` deltas. Built from those patterns with C-level repetition
    (a per-delta loop took 0.16 s for width 3, paid by the first large batch).
    """
    more = 0x80 if j < width - 1 else 0
    if j == 0:
        period = bytes(((2 * d) & 0x7F) | more for d in range(64))
        return (period * (hi // 64 + 1))[lo:hi]
    run = 1 << (7 * j - 1)
    return b"".join(bytes(((v & 0x7F) | more,)) * run for v in range(hi // run + 1))[lo:hi]


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the common prefix of two equally long byte strings."""
    if a == b:
        return len(a)
    x = int.from_bytes(a, "big") ^ int.from_bytes(b, "big")
    return len(a) - 1 - (x.bit_length() - 1) // 8


def _read_varint(buf: memoryview, q: int) -> tuple[int, int]:
    """(zigzag-decoded value, width) of the varint at ``q``."""
    z = 0
    shift = 0
    w = 0
    while True:
        b = buf[q + w]
        z |= (b & 0x7F) << shift
        w += 1
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), w
        shift += 7
        if w >= 10:
            raise RemoteProtocolError("varint longer than 10 bytes")


class _Template:
    """Where each field of a record sits, relative to the record's start."""

    __slots__ = (
        "constant",
        "key_at",
        "key_len",
        "od_at",
        "od_width",
        "size",
        "ts_at",
        "ts_width",
        "value_at",
        "value_len",
    )

    def __init__(self, buf: memoryview, p: int) -> None:
        n, w = _read_varint(buf, p)
        self.size = w + n
        self.constant = [*range(w), w]  # length varint, attributes
        q = w + 1
        self.ts_at = q
        self.ts_width = _read_varint(buf, p + q)[1]
        q += self.ts_width
        self.od_at = q
        self.od_width = _read_varint(buf, p + q)[1]
        q += self.od_width
        self.key_len, w = _read_varint(buf, p + q)
        self.constant += range(q, q + w)
        q += w
        self.key_at = q
        q += max(self.key_len, 0)
        self.value_len, w = _read_varint(buf, p + q)
        self.constant += range(q, q + w)
        q += w
        self.value_at = q
        q += max(self.value_len, 0)
        self.constant.append(q)  # header count: must be zero
        if buf[p + q] != 0 or q + 1 != self.size or self.od_width > 3 or self.ts_width > 2:
            self.size = 0  # not a candidate for the fast path

    def run_length(self, buf: memoryview, p: int, k: int, first_delta: int) -> int:
        """How many of the ``k`` records from ``p`` match this template."""
        size = self.size
        stop = p + k * size
        record0 = bytes(buf[p : p + size])
        for f in self.constant:
            column = bytes(buf[p + f : stop : size])
            k = min(k, _common_prefix(column, record0[f : f + 1] * len(column)))
            if k < 1:
                return 0
            stop = p + k * size
        lo, od_cols = _od_columns(self.od_width)
        start = first_delta - lo
        if start < 0 or start + k > len(od_cols[0]):
            return 0
        for j in range(self.od_width):
            column = bytes(buf[p + self.od_at + j : stop : size])
            k = min(k, _common_prefix(column, od_cols[j][start : start + len(column)]))
            stop = p + k * size
        for j in range(self.ts_width):
            column = bytes(buf[p + self.ts_at + j : stop : size])
            pattern = _FINAL if j == self.ts_width - 1 else _CONTINUED
            match = pattern.match(column)
            k = min(k, match.end() if match else 0)
            stop = p + k * size
        return k

    def decode(
        self, buf: memoryview, p: int, k: int, base_timestamp: int, copy: bool = False,
        fields: bool = True,
    ) -> tuple[list[int], list[memoryview | None], list[memoryview | None]]:
        """Timestamps, keys and values of ``k`` matching records from ``p``.

        ``fields=False`` (validation): keys and values are not cut out; each is
        ``None`` where the record has none and an empty placeholder otherwise.
        """
        size = self.size
        stop = p + k * size
        ts0 = bytes(buf[p + self.ts_at : stop : size])
        if self.ts_width == 1:
            if ts0 == bytes(len(ts0)):
                timestamps = [base_timestamp] * k
            else:
                timestamps = list(
                    map(add, repeat(base_timestamp, k), map(_UNZIGZAG.__getitem__, ts0))
                )
        else:
            ts1 = bytes(buf[p + self.ts_at + 1 : stop : size])
            z = map(add, map(_LOW7.__getitem__, ts0), map(_SHL7.__getitem__, ts1))
            timestamps = list(map(add, repeat(base_timestamp, k), map(_UNZIGZAG.__getitem__, z)))
        if not fields:
            return timestamps, _placeholders(self.key_len, k), _placeholders(self.value_len, k)
        keys = self._slices(buf, p + self.key_at, stop, self.key_len, k, copy)
        values = self._slices(buf, p + self.value_at, stop, self.value_len, k, copy)
        return timestamps, keys, values

    def _slices(
        self, buf: memoryview, first: int, stop: int, length: int, k: int, copy: bool
    ) -> list[memoryview | None]:
        if length < 0:
            return [None] * k
        size = self.size
        if copy:
            # Copies wanted (``RecordBatch.columns(copy=True)``): one struct format
            # "skip, take ``length``" repeated ``k`` times cuts every field out in C,
            # about 4x faster than slicing in a loop. Runs of one shape repeat from
            # batch to batch, so the compiled formats are kept.
            shape = (first, length, size, k)
            unpack = _UNPACKERS.get(shape)
            if unpack is None:
                if len(_UNPACKERS) >= 64:
                    _UNPACKERS.clear()
                fmt = f"{first}x" + f"{length}s{size - length}x" * (k - 1) + f"{length}s"
                unpack = _UNPACKERS[shape] = struct.Struct(fmt).unpack_from
            return list(unpack(buf))
        # A comprehension beats map(slice, ...): BUILD_SLICE is cheaper than
        # calling the slice type, and the view is created by BINARY_SUBSCR.
        return [buf[a : a + length] for a in range(first, stop, size)]


_EMPTY = memoryview(b"")


def _placeholders(length: int, k: int) -> list[memoryview | None]:
    return [None] * k if length < 0 else [_EMPTY] * k


def decode_columns_fast(
    buf: memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
    copy: bool = False,
    fields: bool = True,
) -> tuple[RecordColumns, int]:
    """Like ``decode_columns``, using strided column decoding where records line up.

    ``copy``: keys, values and header values are ``bytes`` rather than views. The
    strided runs cut them out of ``buf`` directly; other records are sliced from
    one ``bytes`` copy of ``buf``, made when the first of them is met (the decoders
    only index and slice, which ``bytes`` does as ``memoryview`` does).

    ``fields=False`` is for validation: every record is checked as fully, but the
    keys and values of strided runs are not cut out (see ``_Template.decode``).
    """
    whole: memoryview | None = None
    # Strided columns and the general decoder both read ``bytes`` faster than a
    # ``memoryview``. Copies cut out of one ``bytes`` copy of the section, made up
    # front for small records, else at the first record that does not line up.
    # Validation (which keeps nothing) always reads from a copy: one memcpy costs
    # less than the strided views it saves (82 against 97 us per MiB of 1 KiB records).
    lazy_copy = copy or not fields
    if not fields or (copy and (isinstance(buf, bytes) or len(buf) < 512 * count)):
        # Small records: one copy up front is cheaper, because the strided column
        # checks slice ``bytes`` faster than a ``memoryview`` (which copies a strided
        # view element by element). Large ones are cut out of the view directly.
        buf = whole = cast(memoryview, bytes(buf))
    if count < _MIN_RUN:
        if lazy_copy and whole is None:
            whole = cast(memoryview, bytes(buf))
        return decode_columns(cast(memoryview, whole) if lazy_copy else buf, count,
                              base_offset, base_timestamp, log_append_time)
    out = RecordColumns([], [], [], [], [])
    size = len(buf)
    p = 0
    i = 0
    while i < count:
        left = count - i
        k = 0
        try:
            template = _Template(buf, p)
        except IndexError:
            template = None
        if template is not None and template.size and left >= _MIN_RUN:
            k_max = min(left, (size - p) // template.size)
            k = template.run_length(buf, p, min(k_max, _PROBE), i)
            if k == min(k_max, _PROBE) and k_max > k:
                k = template.run_length(buf, p, k_max, i)
        if k >= _MIN_RUN and template is not None:
            timestamps, keys, values = template.decode(
                buf, p, k, base_timestamp, copy, fields)
            out.offsets += range(base_offset + i, base_offset + i + k)
            out.timestamps += timestamps
            out.keys += keys
            out.values += values
            out.headers += [NO_HEADERS] * k
            p += k * template.size
            i += k
        else:
            n = min(left, _FALLBACK)
            if lazy_copy and whole is None:
                whole = cast(memoryview, bytes(buf))
            cols, p = decode_columns(whole if whole is not None else buf, n, base_offset,
                                     base_timestamp, None, p)
            out.extend(cols)
            i += n
    if log_append_time is not None:
        out.timestamps = [log_append_time] * count
    return out, p
