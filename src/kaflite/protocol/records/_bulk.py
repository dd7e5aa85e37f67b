"""The bulk decoder for records of varied shapes: one Python step per record.

Theory of operation
-------------------
Records whose keys and values vary in length do not line up in columns, so the
strided path of ``_stride.py`` cannot cut them out, and ``_decode.decode_columns``
costs about a microsecond a record in Python. This decoder splits the work:

1. *The chain.* A record starts where the one before it ends, and its first
   field says how long it is, so finding the records is inherently sequential.
   A Python loop does only that: per record one or two byte reads and an
   addition (about 70 ns). Lengths of one and two bytes are read there (records
   up to 8191 bytes); a longer one is caught in step 3.
2. *The fields, vectorised.* With every record's start and end known, numpy
   reads each varint field of all records at once: the first byte of every
   record's field in one gather, the longer varints (few) in further rounds
   over just those records. Positions advance field by field: attributes,
   timestamp delta, offset delta, key length, key, value length, value, header
   count.
3. *The checks*, vectorised too, are those of ``decode_columns``: a length of at
   least 6 that ends inside the section, varints of at most nine bytes, key and
   value lengths of -1 or more, and each record ending exactly where its length
   says. Anything else (or any doubt, such as a varint that would overflow) makes
   ``decode_bulk`` return None, and the caller decodes the records with
   ``decode_columns``, which gives the same answer or raises the same error.
4. *The columns.* Offsets are a ``range`` when the deltas count up from 0,
   timestamps a repeated value when the deltas are all 0; keys and values are
   slices of the section (``memoryview`` views, or ``bytes`` when the section is
   ``bytes``), cut by one list comprehension each. Records with headers are
   decoded one by one with ``decode_columns`` and put in their places.

Where numba is installed (``kaflite[jit]``), steps 1-3 are one compiled loop
instead (``_jit.py``), with the same checks; step 4 is the same.

numpy is imported on first use, so that importing kaflite does not pay for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from kaflite.protocol._exceptions import RemoteProtocolError
from kaflite.protocol.records import _jit as jit
from kaflite.protocol.records._decode import NO_HEADERS, Headers, RecordColumns, decode_columns

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Ints = NDArray[np.int64]
    Bytes = NDArray[np.uint8]

__all__ = ["BULK_MIN", "decode_bulk"]

# Fewer records than this are cheaper in decode_columns (numpy's fixed cost per call).
BULK_MIN = 64
_MAX_WIDTH = 9   # 63 bits: every varint the fast path accepts fits an int64
_INT64 = (-(1 << 63), (1 << 63) - 1)
# step of a record whose length is a two-byte varint, less the second byte's part
_STEP2 = [((b & 0x7F) >> 1) + 2 for b in range(256)]
_EMPTY = memoryview(b"")


def _chain(buf: memoryview, count: int, start: int) -> list[int]:
    """Where each of ``count`` records from ``start`` ends, reading one- and two-byte
    lengths only (their sign and a third byte are checked by the caller)."""
    ends = [0] * count
    step2 = _STEP2
    p = start
    for i in range(count):
        b = buf[p]
        if b < 0x80:
            p += (b >> 1) + 1
        else:
            p += (buf[p + 1] << 6) + step2[b]
        ends[i] = p
    return ends


def _varints(a: Bytes, pos: Ints) -> tuple[Ints, Ints] | None:
    """The zigzag varints at ``pos`` (one per record) and their widths; None when one
    is longer than ``_MAX_WIDTH`` bytes. Reading past ``a`` raises ``IndexError``;
    reading into the next record is caught by the caller's end check (every field
    lies before its record's end, so each varint does too)."""
    import numpy as np

    first = a[pos]
    long = first >= 0x80
    if not long.any():
        z = first.astype(np.int64)
        return (z >> 1) ^ -(z & 1), np.ones(len(pos), np.int64)
    second = a[pos + long]     # (a record's first byte again where it has one)
    if not (second[long] >= 0x80).any():
        # one or two bytes each: the common case (values of 64..8191 bytes)
        z = (first & 0x7F).astype(np.int64) | (second.astype(np.int64) << 7) * long
        return (z >> 1) ^ -(z & 1), long + np.int64(1)
    z = (first & 0x7F).astype(np.int64)
    width = np.ones(len(pos), np.int64)
    more = np.flatnonzero(long)
    shift = 7
    while len(more):
        if shift >= 7 * _MAX_WIDTH:
            return None
        byte = a[pos[more] + width[more]]
        z[more] |= (byte & 0x7F).astype(np.int64) << shift
        width[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    return (z >> 1) ^ -(z & 1), width


def _shifted(base: int, deltas: Ints) -> list[int] | None:
    """``base + delta`` for each delta as Python ints, when all fit an int64."""
    if base + int(deltas.min()) < _INT64[0] or base + int(deltas.max()) > _INT64[1]:
        return None
    out: list[int] = (deltas + base).tolist()
    return out


class _Located(NamedTuple):
    """Where each record's fields are, and its deltas (one array entry a record)."""

    starts: Ints
    ends: Ints
    ts: Ints            # timestamp deltas
    offs: Ints          # offset deltas
    klen: Ints
    key_from: Ints
    key_to: Ints
    vlen: Ints
    value_from: Ints
    value_to: Ints
    plain: NDArray[np.bool_]   # no headers


def _locate(buf: memoryview, count: int, start: int) -> _Located | None:
    """Steps 1-3 in numpy (or numba's loop, ``_jit``, where it is installed)."""
    import numpy as np

    k = jit.kernels()
    if k is not None:
        t = jit.locate(k, buf, count, start)
        if t is None:
            return None
        key_from, value_from = t[jit.KEY_FROM], t[jit.VALUE_FROM]
        klen, vlen = t[jit.KEY_LEN], t[jit.VALUE_LEN]
        return _Located(t[jit.START], t[jit.END], t[jit.TS_DELTA], t[jit.OFFSET_DELTA],
                        klen, key_from, key_from + np.maximum(klen, 0), vlen, value_from,
                        value_from + np.maximum(vlen, 0), t[jit.HEADERS] == 0)
    size = len(buf)
    try:
        chained = _chain(buf, count, start)
    except IndexError:
        return None
    a: Bytes = np.frombuffer(buf, np.uint8)
    ends: Ints = np.array(chained, np.int64)
    starts = np.empty(count, np.int64)
    starts[0] = start
    starts[1:] = ends[:-1]
    if int(ends[-1]) > size:
        return None
    lead = a[starts]
    two = lead >= 0x80
    # lengths of zigzag sign 0 (>= 0), of one or two bytes: else decode_columns decides
    if (lead & 1).any() or (a[starts[two] + 1] >= 0x80).any():
        return None
    body = starts + 1 + two
    if ((ends - body) < 6).any():
        return None
    try:
        ts = _varints(a, body + 1)
        if ts is None:
            return None
        offs = _varints(a, body + 1 + ts[1])
        if offs is None:
            return None
        key_at = body + 1 + ts[1] + offs[1]
        klen = _varints(a, key_at)
        if klen is None or (klen[0] < -1).any():
            return None
        key_from = key_at + klen[1]
        key_to = key_from + np.maximum(klen[0], 0)
        vlen = _varints(a, key_to)
        if vlen is None or (vlen[0] < -1).any():
            return None
        value_from = key_to + vlen[1]
        value_to = value_from + np.maximum(vlen[0], 0)
        # every field read so far ends before value_to: inside the record if it is
        if (value_to >= ends).any():
            return None
    except IndexError:   # a varint ran past the section (so did its record)
        return None
    plain = a[value_to] == 0           # no headers: the record ends after the count
    if ((value_to + 1 != ends) & plain).any():
        return None
    return _Located(starts, ends, ts[0], offs[0], klen[0], key_from, key_to, vlen[0],
                    value_from, value_to, plain)


def decode_bulk(
    buf: memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
    start: int = 0,
    fields: bool = True,
) -> tuple[RecordColumns, int] | None:
    """``decode_columns``'s answer for ``count`` records from ``buf[start:]``, or None
    when this path cannot give it (then ``decode_columns`` must, or raise).

    Keys and values are slices of ``buf``: views of a ``memoryview``, ``bytes`` of
    ``bytes`` (passed, as ``_stride`` does, under the ``memoryview`` type).
    ``fields=False`` leaves them out as ``_stride`` does (an empty placeholder, or
    None where the record has none).
    """
    import numpy as np

    if not count:
        return None
    at = _locate(buf, count, start)
    if at is None:
        return None
    with_headers = None if at.plain.all() else np.flatnonzero(~at.plain)
    offsets: list[int] | range
    if at.offs[0] == 0 and (np.diff(at.offs) == 1).all():
        offsets = range(base_offset, base_offset + count)
    else:
        shifted = _shifted(base_offset, at.offs)
        if shifted is None:
            return None
        offsets = shifted
    timestamps: list[int]
    if log_append_time is not None:
        timestamps = [log_append_time] * count
    elif not at.ts.any():
        timestamps = [base_timestamp] * count
    else:
        shifted = _shifted(base_timestamp, at.ts)
        if shifted is None:
            return None
        timestamps = shifted
    keys = _fields(buf, at.key_from, at.key_to, at.klen, fields)
    values = _fields(buf, at.value_from, at.value_to, at.vlen, fields)
    headers: list[Headers] = [NO_HEADERS] * count
    offset_list = list(offsets)
    if with_headers is not None:
        for i in with_headers.tolist():
            first, end = int(at.starts[i]), int(at.ends[i])
            try:
                one, stop = decode_columns(buf, 1, base_offset, base_timestamp, log_append_time,
                                           first)
            except RemoteProtocolError:
                return None   # (decode_columns raises it again for the caller)
            if stop != end:
                return None
            offset_list[i] = one.offsets[0]
            timestamps[i] = one.timestamps[0]
            keys[i] = one.keys[0] if fields else _placeholder(one.keys[0])
            values[i] = one.values[0] if fields else _placeholder(one.values[0])
            headers[i] = one.headers[0]
    return RecordColumns(offset_list, timestamps, keys, values, headers), int(at.ends[-1])


def _placeholder(field: memoryview | None) -> memoryview | None:
    return None if field is None else _EMPTY


def _fields(buf: memoryview, first: Ints, last: Ints, lengths: Ints,
            cut: bool) -> list[memoryview | None]:
    """The slices ``buf[first:last]``, None where the length is -1 (or placeholders
    when not ``cut``)."""
    import numpy as np

    nulls = np.flatnonzero(lengths < 0)
    out: list[memoryview | None]
    if not cut:
        out = [_EMPTY] * len(lengths)
    elif len(nulls) == len(lengths):
        return [None] * len(lengths)
    else:
        # (iterating the arrays' memoryviews makes each int as it is used: lists of
        # them, from tolist, cost more in allocations than they save)
        out = [buf[x:y] for x, y in zip(first.data, last.data, strict=True)]
    for i in nulls.tolist():
        out[i] = None
    return out
