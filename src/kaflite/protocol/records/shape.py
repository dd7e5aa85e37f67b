"""Runs of records that share one shape, found with C-level comparisons.

Producers mostly write batches whose records look alike: the same key and value
lengths, no headers, timestamp deltas of one width and offset deltas counting up
from 0. Such a run is a *strided* layout: record ``r`` starts ``r * S`` bytes
after the first, and every field sits at the same position within its record,
so the slice ``buf[start + f : end : S]`` gathers byte ``f`` of every record of
the run in C.

``RecordShape`` is parsed from a run's first record: its size ``S``, where its
fields are, and which byte positions are constant (the length varint, the
attributes, the key and value length varints, the header count) or vary (the
timestamp and offset deltas). ``run_length`` is the longest prefix of records
that match it: every constant column equals the first record's byte repeated,
the offset delta columns equal the encodings of consecutive deltas (from
per-width tables built once), and the timestamp delta columns keep the first
record's varint width (continuation bits, checked with a regex). A record that
matches decodes exactly as the first did, with its own deltas and its own key
and value bytes: its length varint says it ends where the next stride begins.

Two readers build on it: the codec's bulk decoder (``_stride``, into Python
lists) and the Spark source (``kaflite.spark.arrow``, into Arrow columns).
"""

from __future__ import annotations

import re

from kaflite.protocol._exceptions import RemoteProtocolError

__all__ = ["MAX_DELTA", "RecordShape", "common_prefix", "read_varint"]

MAX_DELTA = 1 << 20   # offset deltas covered by the column tables (3-byte varints)

CONTINUED = re.compile(rb"[\x80-\xff]*")
FINAL = re.compile(rb"[\x00-\x7f]*")

Buffer = bytes | bytearray | memoryview


# _OD_COLUMNS[w] = (first delta of width w, [column 0 bytes, column 1 bytes, ...]),
# built on first use.
_OD_COLUMNS: dict[int, tuple[int, list[bytes]]] = {}


def _od_columns(width: int) -> tuple[int, list[bytes]]:
    cached = _OD_COLUMNS.get(width)
    if cached is None:
        lo = 0 if width == 1 else 1 << (7 * (width - 1) - 1)
        hi = min(1 << (7 * width - 1), MAX_DELTA)
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


def common_prefix(a: Buffer, b: Buffer) -> int:
    """Length of the common prefix of two equally long byte strings."""
    if a == b:
        return len(a)
    x = int.from_bytes(a, "big") ^ int.from_bytes(b, "big")
    return len(a) - 1 - (x.bit_length() - 1) // 8


def read_varint(buf: Buffer, q: int) -> tuple[int, int]:
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


class RecordShape:
    """Where each field of a record sits, relative to the record's start.

    ``size`` is 0 when the record cannot start a run: it has headers, it does not
    end where its length says, or a delta varint is wider than 3 bytes.
    """

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

    def __init__(self, buf: Buffer, p: int) -> None:
        n, w = read_varint(buf, p)
        self.size = w + n
        self.constant = [*range(w), w]  # length varint, attributes
        q = w + 1
        self.ts_at = q
        self.ts_width = read_varint(buf, p + q)[1]
        q += self.ts_width
        self.od_at = q
        self.od_width = read_varint(buf, p + q)[1]
        q += self.od_width
        self.key_len, w = read_varint(buf, p + q)
        self.constant += range(q, q + w)
        q += w
        self.key_at = q
        q += max(self.key_len, 0)
        self.value_len, w = read_varint(buf, p + q)
        self.constant += range(q, q + w)
        q += w
        self.value_at = q
        q += max(self.value_len, 0)
        self.constant.append(q)  # header count: must be zero
        if buf[p + q] != 0 or q + 1 != self.size or self.od_width > 3 or self.ts_width > 3:
            self.size = 0  # not a candidate for a run

    def run_length(self, buf: Buffer, p: int, k: int, first_delta: int,
                   ref: int | None = None) -> int:
        """How many of the ``k`` records from ``p`` match this shape, the first with
        offset delta ``first_delta`` (deltas of one varint width only). ``ref``: where
        the record this shape was read from starts, when not at ``p`` (a run checked
        window by window)."""
        size = self.size
        lo, od_cols = _od_columns(self.od_width)
        start = first_delta - lo
        if start < 0:
            return 0
        k = min(k, len(od_cols[0]) - start)
        if k < 1:
            return 0
        at = p if ref is None else ref
        if not isinstance(buf, bytes | bytearray):
            # A strided slice of a view is copied element by element, of ``bytes`` or
            # ``bytearray`` in C: the stretch checked is copied once.
            origin = min(p, at)
            buf = bytes(buf[origin : p + k * size])
            p -= origin
            at -= origin
        k = min(k, (len(buf) - p) // size)   # every column then has k bytes
        stop = p + k * size
        # Each column is first compared whole (one memcmp): only a column that
        # differs pays for ``common_prefix``. Per call, the Python work per column
        # is what a short run costs (runs of 10 and 90 in keys key-0..key-999).
        for f in self.constant:
            column = buf[p + f : stop : size]
            expected = buf[at + f : at + f + 1] * k
            if column != expected:
                k = common_prefix(column, expected)
                if k < 1:
                    return 0
                stop = p + k * size
        od_at = p + self.od_at
        for j in range(self.od_width):
            column = buf[od_at + j : stop : size]
            expected = od_cols[j][start : start + k]
            if column != expected:
                k = common_prefix(column, expected)
                stop = p + k * size
        ts_at = p + self.ts_at
        last = self.ts_width - 1
        for j in range(self.ts_width):
            match = (FINAL if j == last else CONTINUED).match(buf[ts_at + j : stop : size])
            if match is None or match.end() < k:
                k = match.end() if match else 0
                stop = p + k * size
        return k
