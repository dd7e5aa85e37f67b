"""The loops that ``_jit`` compiles with numba (imported only where numba is installed).

Each is plain Python that numba compiles to machine code (``nopython`` mode: no
Python object is touched inside). See ``_jit`` for what they serve.
"""

from __future__ import annotations

from typing import Any

import numba

from kaflite.protocol.primitives import size_of_varint
from kaflite.protocol.records._jit import (
    BAD,
    END,
    HEADERS,
    KEY_FROM,
    KEY_LEN,
    OFFSET_DELTA,
    START,
    TS_DELTA,
    VALUE_FROM,
    VALUE_LEN,
)

__all__ = ["build", "walk"]

_jit = numba.njit(cache=True, nogil=True, boundscheck=False)
_inline = numba.njit(cache=True, nogil=True, boundscheck=False, inline="always")

_MAX_SHIFT = 56   # nine bytes: every varint accepted fits 63 bits


@_inline
def _read(a: Any, p: int, limit: int) -> tuple[int, int]:
    """The zigzag varint at ``a[p]`` and the position after it; position BAD when it
    runs past ``limit`` or is longer than nine bytes."""
    z = 0
    shift = 0
    while True:
        if p >= limit or shift > _MAX_SHIFT:
            return 0, BAD
        b = a[p]
        p += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), p
        shift += 7


@_jit
def walk(a: Any, count: int, start: int, out: Any) -> int:
    """Decode ``count`` records from ``a[start:]`` into ``out`` (one row per field,
    one column per record: see ``_jit``); the end of the last record, or BAD.

    The checks are ``decode_columns``'s: a record length of at least 6 that ends
    inside the section, varints of at most nine bytes, key and value lengths of -1
    or more that end inside the record. A record whose headers are not one empty
    count is marked in HEADERS (the caller decodes it alone); any other record must
    end right after that count.
    """
    n = a.shape[0]
    p = start
    for i in range(count):
        at = p
        length, p = _read(a, p, n)
        if p == BAD or length < 6 or p + length > n:
            return BAD
        end = p + length
        ts, p = _read(a, p + 1, end)            # (after the attributes)
        if p == BAD:
            return BAD
        od, p = _read(a, p, end)
        if p == BAD:
            return BAD
        klen, p = _read(a, p, end)
        if p == BAD or klen < -1 or p + klen > end:
            return BAD
        out[KEY_FROM, i] = p
        if klen > 0:
            p += klen
        vlen, p = _read(a, p, end)
        if p == BAD or vlen < -1 or p + vlen >= end:
            return BAD
        out[VALUE_FROM, i] = p
        if vlen > 0:
            p += vlen
        out[START, i] = at
        out[END, i] = end
        out[KEY_LEN, i] = klen
        out[VALUE_LEN, i] = vlen
        out[OFFSET_DELTA, i] = od
        out[TS_DELTA, i] = ts
        out[HEADERS, i] = 0 if (a[p] == 0 and p + 1 == end) else 1
        p = end
    return p


@_jit
def _put(out: Any, p: int, v: int) -> int:
    z = (v << 1) ^ (v >> 63)
    while z >= 0x80:
        out[p] = (z & 0x7F) | 0x80
        p += 1
        z >>= 7
    out[p] = z
    return p + 1


# the codec's own function, compiled
_size = _jit(size_of_varint)


@_jit
def build(out: Any, p: int, keys: Any, klen: Any, values: Any, vlen: Any, deltas: Any) -> int:
    """Write record ``i`` for each i (offset delta i; timestamp delta ``deltas[i]``, or
    0 when ``deltas`` is empty; a key of ``klen[i]`` bytes taken in turn from
    ``keys``, a value of ``vlen[i]`` from ``values``; no headers) at ``out[p:]``; the
    end. ``out`` has room for them."""
    kp = 0
    vp = 0
    stamped = deltas.shape[0] > 0
    for i in range(klen.shape[0]):
        kl = klen[i]
        vl = vlen[i]
        ts = deltas[i] if stamped else 0
        p = _put(out, p, 1 + _size(ts) + _size(i) + _size(kl) + kl + _size(vl) + vl + 1)
        out[p] = 0                              # attributes
        p = _put(out, p + 1, ts)
        p = _put(out, p, i)
        p = _put(out, p, kl)
        out[p:p + kl] = keys[kp:kp + kl]
        p += kl
        kp += kl
        p = _put(out, p, vl)
        out[p:p + vl] = values[vp:vp + vl]
        p += vl
        vp += vl
        out[p] = 0                              # no headers
        p += 1
    return p
