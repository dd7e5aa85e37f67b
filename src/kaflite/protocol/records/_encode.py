"""Bulk encoding of v2 record batches.

Theory of operation
-------------------
A record is a handful of varints around its key and value. Encoding one
record at a time costs a dozen Python-level operations per record; instead the
encoder works column by column, and each column is produced by a C-level
builtin:

* the offset deltas ``0..n-1`` are a slice of a precomputed table of varint
  encodings (``_wire.VARINT``);
* value lengths come from ``map(len, values)`` and their encodings from
  ``map(VARINT.__getitem__, lengths)``;
* each record's length is a sum of columns, again with ``map``;
* the columns are interleaved into one list by extended-slice assignment
  (``parts[0::4] = heads``; no tuple per record, unlike ``zip``) and
  concatenated by a single ``b"".join``, so every value is copied once.

Fields that are the same for every record (attributes, a zero timestamp
delta, a null key, no headers) are single constant pieces; the common case
"values only" folds attributes, timestamp delta, offset delta and the null key
into one cached piece per offset delta.

The 61-byte header is packed with one ``struct`` call once the records (and
their compression) are known, and the CRC-32C runs over the header tail and
then the records, incrementally.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from itertools import repeat
from operator import add, sub
from typing import cast

from kaflite.protocol._exceptions import LocalProtocolError
from kaflite.protocol.records._compression import Compression, compress
from kaflite.protocol.records._jit import encode_keyed, kernels
from kaflite.protocol.records._wire import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    NULL_VARINT,
    TABLE_SIZE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    VARINT,
    VARINT_SIZE_PLUS,
    ZERO_VARINT,
    crc32c,
    encode_zigzag,
    varint,
    varints,
)

__all__ = ["HeaderInput", "assemble_batch", "encode_batch", "encode_batch_buffer",
           "encode_records", "record_pieces"]

BytesLike = bytes | bytearray | memoryview
HeaderInput = Sequence[tuple[str | bytes, BytesLike | None]]

# _PREFIX[i] = attributes 0, timestamp delta 0, offset delta i, null key.
_PREFIX: list[bytes] = []
# _PREFIX_SIZE[i] = len(_PREFIX[i]) + 1: the prefix plus the empty header count.
_PREFIX_SIZE: list[int] = []


def _default_prefixes(n: int) -> tuple[list[bytes], list[int]]:
    if not _PREFIX:
        _PREFIX.extend(b"\x00\x00" + VARINT[i] + NULL_VARINT for i in range(TABLE_SIZE))
        _PREFIX_SIZE.extend(len(p) + 1 for p in _PREFIX)
    if n <= TABLE_SIZE:
        return _PREFIX[:n], _PREFIX_SIZE[:n]
    more = [b"\x00\x00" + encode_zigzag(i) + NULL_VARINT for i in range(TABLE_SIZE, n)]
    return _PREFIX + more, _PREFIX_SIZE + [len(p) + 1 for p in more]


def _encode_headers(headers: HeaderInput | None) -> bytes:
    if not headers:
        return ZERO_VARINT
    parts = [varint(len(headers))]
    for key, value in headers:
        raw = key.encode("utf-8", "surrogateescape") if isinstance(key, str) else bytes(key)
        parts.append(varint(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(NULL_VARINT)
        else:
            parts.append(varint(len(value)))
            parts.append(bytes(value))
    return b"".join(parts)


def _value_columns(
    values: Sequence[BytesLike | None],
) -> tuple[list[int], list[bytes], Sequence[BytesLike]]:
    """Lengths (for sizing), encoded length fields and payload pieces of values."""
    try:
        lengths = list(map(len, cast("Sequence[BytesLike]", values)))
    except TypeError:
        payloads: list[BytesLike] = []
        sized: list[int] = []
        encoded: list[bytes] = []
        for v in values:
            if v is None:
                payloads.append(b"")
                sized.append(1)
                encoded.append(NULL_VARINT)
            elif isinstance(v, bytes | bytearray | memoryview):
                payloads.append(v)
                sized.append(len(varint(len(v))) + len(v))
                encoded.append(varint(len(v)))
            else:
                raise LocalProtocolError(
                    f"record value must be bytes or None, not {type(v).__name__}"
                ) from None
        return sized, encoded, payloads
    return _sizes_plus(lengths), varints(lengths), cast("Sequence[BytesLike]", values)


def _sizes_plus(lengths: list[int]) -> list[int]:
    if lengths and max(lengths) < TABLE_SIZE:
        return list(map(VARINT_SIZE_PLUS.__getitem__, lengths))
    return [len(varint(n)) + n for n in lengths]


def encode_records(
    values: Sequence[BytesLike | None],
    keys: Sequence[BytesLike | None] | None = None,
    headers: Sequence[HeaderInput | None] | None = None,
    timestamp_deltas: Sequence[int] | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> bytes:
    """The uncompressed records section for the given columns."""
    return encode_join(record_pieces(values, keys, headers, timestamp_deltas, offset_deltas))


def record_pieces(
    values: Sequence[BytesLike | None],
    keys: Sequence[BytesLike | None] | None = None,
    headers: Sequence[HeaderInput | None] | None = None,
    timestamp_deltas: Sequence[int] | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> list[BytesLike]:
    """The records section as the pieces whose concatenation it is (the values among
    them as they were given: nothing is copied yet). ``join`` finds a piece of the
    wrong type (a ``TypeError``)."""
    try:
        return _record_pieces(values, keys, headers, timestamp_deltas, offset_deltas)
    except (TypeError, AttributeError) as exc:
        # e.g. a str where bytes belong: len() finds it column-wise.
        raise LocalProtocolError(f"record field of the wrong type: {exc}") from None


def _record_pieces(
    values: Sequence[BytesLike | None],
    keys: Sequence[BytesLike | None] | None = None,
    headers: Sequence[HeaderInput | None] | None = None,
    timestamp_deltas: Sequence[int] | None = None,
    offset_deltas: Sequence[int] | None = None,
) -> list[BytesLike]:
    n = len(values)
    if not n:
        return []
    for name, column in (
        ("keys", keys),
        ("headers", headers),
        ("timestamps", timestamp_deltas),
        ("offsets", offset_deltas),
    ):
        if column is not None and len(column) != n:
            raise LocalProtocolError(f"{name} has {len(column)} entries for {n} values")
    if keys is None and headers is None and offset_deltas is None:
        try:
            present = cast("Sequence[BytesLike]", values)
            lengths = list(map(len, present))
        except TypeError:  # a None value (tombstone): take the general path
            pass
        else:
            if max(lengths) < _HEAD_LIMIT and n <= _OD_WIDTHS[-1][1]:
                if timestamp_deltas is None:
                    return _values_only_parts(present, lengths)
                if min(timestamp_deltas) >= 0 and max(timestamp_deltas) < 64:
                    return _values_ts_parts(present, lengths, timestamp_deltas)
    if keys is not None and headers is None and offset_deltas is None \
            and n <= _OD_WIDTHS[-1][1]:
        keyed = _keyed_parts(values, keys, timestamp_deltas)
        if keyed is not None:
            return keyed
    value_sizes, value_lengths, payloads = _value_columns(values)

    # General case: one column per field; a constant field is one repeated piece.
    if offset_deltas is None:
        od: Sequence[bytes] = VARINT[:n] if n <= TABLE_SIZE else varints(range(n))
    else:
        od = varints(offset_deltas)
    sizes = list(map(add, value_sizes, map(len, od)))
    if timestamp_deltas is None:
        ts: Sequence[bytes] = [b"\x00\x00"] * n  # attributes, delta 0
        sizes = list(map(add, sizes, repeat(2, n)))
    else:
        ts = [b"\x00" + b for b in varints(timestamp_deltas)]
        sizes = list(map(add, sizes, map(len, ts)))
    if keys is None:
        kp: Sequence[bytes] = [NULL_VARINT] * n
        sizes = list(map(add, sizes, repeat(1, n)))
    else:
        kp = [NULL_VARINT if k is None else varint(len(k)) + bytes(k) for k in keys]
        sizes = list(map(add, sizes, map(len, kp)))
    if headers is None:
        hp: Sequence[bytes] = [ZERO_VARINT] * n
        sizes = list(map(add, sizes, repeat(1, n)))
    else:
        hp = list(map(_encode_headers, headers))
        sizes = list(map(add, sizes, map(len, hp)))
    # Interleave by extended-slice assignment (C speed, no per-record tuples).
    parts: list[BytesLike] = [b""] * (7 * n)
    parts[0::7] = varints(sizes)
    parts[1::7] = ts
    parts[2::7] = od
    parts[3::7] = kp
    parts[4::7] = value_lengths
    parts[5::7] = payloads
    parts[6::7] = hp
    return parts


# Values-only records (null key, no headers, timestamp delta 0, consecutive
# offsets) of length v whose offset delta takes w bytes have a body of
# 4 + w + len(varint(v)) + v bytes. _HEADS[w][v] is the previous record's
# empty header count followed by this record's length varint, so a record
# is four pieces: head, prefix (attributes..null key), value length, value.
_HEAD_LIMIT = 4096
# Fewer keyed records than this are cheaper in Python than in numba's loop (_jit).
_JIT_MIN = 32
_HEADS: dict[int, list[bytes]] = {}
# offset delta ranges with a varint width of 1, 2 and 3 bytes
_OD_WIDTHS = ((0, 64, 1), (64, 8192, 2), (8192, 1 << 20, 3))


def _heads(width: int) -> list[bytes]:
    table = _HEADS.get(width)
    if table is None:
        table = [ZERO_VARINT + varint(4 + width + VARINT_SIZE_PLUS[v]) for v in range(_HEAD_LIMIT)]
        _HEADS[width] = table
    return table


def _record_heads(lengths: list[int], n: int) -> list[bytes]:
    """``_HEADS`` pieces of n values-only records, by value length and offset-delta
    width; the first record's has no header count before it."""
    heads: list[bytes] = []
    for lo, hi, width in _OD_WIDTHS:
        if lo >= n:
            break
        heads += map(_heads(width).__getitem__, lengths[lo:hi])
    heads[0] = heads[0][1:]
    return heads


def _values_only_parts(values: Sequence[BytesLike], lengths: list[int]) -> list[BytesLike]:
    n = len(values)
    heads = _record_heads(lengths, n)
    prefixes = _default_prefixes(n)[0]
    parts: list[BytesLike] = [b""] * (4 * n + 1)
    parts[0 : 4 * n : 4] = heads
    parts[1::4] = prefixes
    parts[2::4] = list(map(VARINT.__getitem__, lengths))
    parts[3::4] = values
    parts[4 * n] = ZERO_VARINT
    return parts


# _ATTR_TS[d] = attributes 0 and timestamp delta d, for the one-byte deltas 0..63.
_ATTR_TS: list[bytes] = [b"\x00" + VARINT[d] for d in range(64)]
# _OD_NULL_KEY[i] = offset delta i and a null key (built on first use).
_OD_NULL_KEY: list[bytes] = []


def _values_ts_parts(values: Sequence[BytesLike], lengths: list[int],
                     deltas: Sequence[int]) -> list[BytesLike]:
    """Values-only records whose timestamp deltas are 0..63 (one varint byte each).

    A producer stamps each record with the time it was produced, so a batch
    filled within 64 ms has small, varying deltas. Their varints are one byte,
    as a zero delta's is, so records have the lengths of the values-only case
    (the same head table) and only the attributes/timestamp piece varies: five
    pieces per record instead of four.
    """
    n = len(values)
    if len(_OD_NULL_KEY) < n:
        _OD_NULL_KEY.extend(encode_zigzag(i) + NULL_VARINT for i in range(len(_OD_NULL_KEY), n))
    heads = _record_heads(lengths, n)
    parts: list[BytesLike] = [b""] * (5 * n + 1)
    parts[0 : 5 * n : 5] = heads
    parts[1::5] = list(map(_ATTR_TS.__getitem__, deltas))
    parts[2::5] = _OD_NULL_KEY[:n]
    parts[3::5] = list(map(VARINT.__getitem__, lengths))
    parts[4::5] = values
    parts[5 * n] = ZERO_VARINT
    return parts


def _keyed_parts(values: Sequence[BytesLike | None], keys: Sequence[BytesLike | None],
                 deltas: Sequence[int] | None) -> list[BytesLike] | None:
    """Records with a key and a value each (any lengths below ``_HEAD_LIMIT``), no
    headers, consecutive offsets and timestamp deltas of one varint byte: eight
    pieces per record, every column made by a C builtin. None: not this shape."""
    try:
        vlens = list(map(len, cast("Sequence[BytesLike]", values)))
        klens = list(map(len, cast("Sequence[BytesLike]", keys)))
    except TypeError:   # a null key or value
        return None
    n = len(values)
    stamped = deltas is not None
    if deltas is not None and not (min(deltas) >= 0 and max(deltas) < 64):
        return None
    if stamped and len(_OD_ONLY) < n:
        _OD_ONLY.extend(encode_zigzag(i) for i in range(len(_OD_ONLY), n))
    # body = attributes and timestamp delta (2) + offset delta + key + value + headers (1);
    # a length of _HEAD_LIMIT or more is an IndexError in the bounded table
    v0 = vlens[0]
    same = vlens.count(v0) == n   # values of one length (a producer's usual case)
    if not same and n >= _JIT_MIN:
        # values of many lengths: numba's loop where it is installed (_jit); one length
        # is faster here (a table lookup a record, each value copied once)
        jit = kernels()
        if jit is not None:
            return encode_keyed(jit, cast("Sequence[BytesLike]", values),
                                cast("Sequence[BytesLike]", keys), vlens, klens, deltas)
    if not _HEAD_ZERO:
        _HEAD_ZERO.extend(ZERO_VARINT + v for v in VARINT)
    # each record's length, after the previous record's empty header count
    heads: list[bytes] = []
    try:
        if same:
            # the head follows from the key's length alone: one lookup a record in a
            # table per (value length, offset-delta width), kept for later batches
            vconst = _SIZE_PLUS_BOUNDED[v0]
            for lo, hi, width in _OD_WIDTHS:
                if lo >= n:
                    break
                heads += map(_heads_by_key_length(vconst + 3 + width).__getitem__,
                             klens[lo:hi])
        else:
            ksizes = list(map(_SIZE_PLUS_BOUNDED.__getitem__, klens))
            vsizes = list(map(_SIZE_PLUS_BOUNDED.__getitem__, vlens))
            for lo, hi, width in _OD_WIDTHS:
                if lo >= n:
                    break
                heads += map(_HEAD_ZERO.__getitem__, map(
                    add, map(add, ksizes[lo:hi], vsizes[lo:hi]), repeat(3 + width)))
    except IndexError:
        return None
    heads[0] = heads[0][1:]
    table = VARINT.__getitem__
    k = 7 if stamped else 6
    parts: list[BytesLike] = [b""] * (k * n + 1)
    parts[0 : k * n : k] = heads
    if deltas is not None:
        parts[1::k] = list(map(_ATTR_TS.__getitem__, deltas))
        parts[2::k] = _OD_ONLY[:n]
    else:   # attributes, a zero timestamp delta and the offset delta in one piece
        parts[1::k] = _od_prefixes(n)
    parts[k - 4::k] = list(map(table, klens))
    parts[k - 3::k] = cast("Sequence[BytesLike]", keys)
    parts[k - 2::k] = [VARINT[v0]] * n if same else list(map(table, vlens))
    parts[k - 1::k] = cast("Sequence[BytesLike]", values)
    parts[k * n] = ZERO_VARINT
    return parts


def _od_prefixes(n: int) -> list[bytes]:
    """Attributes 0, timestamp delta 0 and offset delta i, for i < n."""
    if len(_OD_PREFIX) < n:
        _OD_PREFIX.extend(b"\x00\x00" + encode_zigzag(i) for i in range(len(_OD_PREFIX), n))
    return _OD_PREFIX[:n]


# _HEAD_ZERO[v] = an empty header count, then the varint of v (for v < TABLE_SIZE).
_HEAD_ZERO: list[bytes] = []
_SIZE_PLUS_BOUNDED = VARINT_SIZE_PLUS[:_HEAD_LIMIT]
# rest of the body (value, its length, attributes, deltas, header count) -> the heads of
# records by key length (below _HEAD_LIMIT: a longer key is an IndexError)
_HEADS_BY_KEY: dict[int, list[bytes]] = {}


def _heads_by_key_length(rest: int) -> list[bytes]:
    table = _HEADS_BY_KEY.get(rest)
    if table is None:
        if len(_HEADS_BY_KEY) >= 64:
            _HEADS_BY_KEY.clear()
        table = _HEADS_BY_KEY[rest] = list(map(
            _HEAD_ZERO.__getitem__, map(add, _SIZE_PLUS_BOUNDED, repeat(rest))))
    return table
_OD_PREFIX: list[bytes] = []
# _OD_ONLY[i] = the varint of offset delta i (built on first use).
_OD_ONLY: list[bytes] = []


_HEADER_ROOM = bytes(HEADER_SIZE)   # where encode_batch_buffer packs the header
_CRC = struct.Struct(">I")


def assemble_batch(
    records: BytesLike,
    *,
    count: int,
    last_offset_delta: int,
    base_offset: int = 0,
    base_timestamp: int = NO_TIMESTAMP,
    max_timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """Prefix an encoded (possibly compressed) records section with its header."""
    header = bytearray(HEADER_SIZE)
    _pack_header(header, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(records),
                 partition_leader_epoch, attributes, last_offset_delta, base_timestamp,
                 max_timestamp, producer_id, producer_epoch, base_sequence, count)
    crc = crc32c(records, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    _CRC.pack_into(header, CRC_OFFSET, crc)
    return b"".join((header, records))


def _pack_header(buf: bytearray, base_offset: int, length: int, partition_leader_epoch: int,
                 attributes: int, last_offset_delta: int, base_timestamp: int,
                 max_timestamp: int, producer_id: int, producer_epoch: int,
                 base_sequence: int, count: int) -> None:
    """A batch header (magic 2, CRC 0 until the caller computes it) into ``buf``'s first
    ``HEADER_SIZE`` bytes."""
    try:
        HEADER.pack_into(buf, 0, base_offset, length, partition_leader_epoch, 2, 0, attributes,
                         last_offset_delta, base_timestamp, max_timestamp, producer_id,
                         producer_epoch, base_sequence, count)
    except struct.error as exc:
        raise LocalProtocolError(f"record batch header field out of range: {exc}") from None


def encode_batch(
    values: Sequence[BytesLike | None],
    keys: Sequence[BytesLike | None] | None = None,
    headers: Sequence[HeaderInput | None] | None = None,
    timestamps: Sequence[int] | None = None,
    base_offset: int = 0,
    compression: int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    partition_leader_epoch: int = -1,
    base_timestamp: int | None = None,
    *,
    control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """Encode one v2 batch whose records have offsets ``base_offset + i``.

    ``timestamps`` are absolute milliseconds per record. Without them every
    record gets ``base_timestamp`` (default -1, NO_TIMESTAMP: the protocol
    layer has no clock; producers pass the time in).
    """
    n, section, fields = _batch_parts(values, keys, headers, timestamps, compression,
                                      transactional, base_timestamp, control, log_append_time)
    records = section[0] if len(section) == 1 else encode_join(section)
    return assemble_batch(records, count=n, last_offset_delta=max(n - 1, 0),
                          base_offset=base_offset, base_timestamp=fields[0],
                          max_timestamp=fields[1], attributes=fields[2],
                          producer_id=producer_id, producer_epoch=producer_epoch,
                          base_sequence=base_sequence,
                          partition_leader_epoch=partition_leader_epoch)


def encode_batch_buffer(
    values: Sequence[BytesLike | None],
    keys: Sequence[BytesLike | None] | None = None,
    headers: Sequence[HeaderInput | None] | None = None,
    timestamps: Sequence[int] | None = None,
    compression: int = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    base_timestamp: int | None = None,
) -> bytearray:
    """``encode_batch`` (base offset 0) in one new buffer, each payload byte copied once.

    ``encode_batch`` joins the records into a section and then the header and
    the section into the batch: two copies of every value, and two fresh
    buffers of the batch's size. Here the header's room leads the one ``join``,
    and the header and its CRC are packed into the buffer afterwards. (What a
    producer sends; the buffer is not to be changed once handed over.)
    """
    n, section, fields = _batch_parts(values, keys, headers, timestamps, compression,
                                      transactional, base_timestamp, False, False)
    section.insert(0, _HEADER_ROOM)
    try:
        buf = bytearray().join(section)
    except TypeError as exc:
        raise LocalProtocolError(f"record field of the wrong type: {exc}") from None
    _pack_header(buf, 0, len(buf) - LOG_OVERHEAD, -1, fields[2], max(n - 1, 0), fields[0],
                 fields[1], producer_id, producer_epoch, base_sequence, n)
    with memoryview(buf) as view:
        _CRC.pack_into(buf, CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:]))
    return buf


def encode_join(pieces: list[BytesLike]) -> bytes:
    try:
        return b"".join(pieces)
    except TypeError as exc:
        raise LocalProtocolError(f"record field of the wrong type: {exc}") from None


def _batch_parts(
    values: Sequence[BytesLike | None],
    keys: Sequence[BytesLike | None] | None,
    headers: Sequence[HeaderInput | None] | None,
    timestamps: Sequence[int] | None,
    compression: int,
    transactional: bool,
    base_timestamp: int | None,
    control: bool,
    log_append_time: bool,
) -> tuple[int, list[BytesLike], tuple[int, int, int]]:
    """(record count, the records section's pieces (compressed: one), (base timestamp,
    max timestamp, attributes)) of a batch."""
    n = len(values)
    if timestamps is None:
        base_ts = NO_TIMESTAMP if base_timestamp is None else base_timestamp
        deltas = None
        max_ts = base_ts
    else:
        if len(timestamps) != n:
            raise LocalProtocolError(f"{len(timestamps)} timestamps for {n} values")
        if base_timestamp is not None:
            base_ts = base_timestamp
        else:
            base_ts = timestamps[0] if n else NO_TIMESTAMP
        deltas = list(map(sub, timestamps, repeat(base_ts, n)))
        max_ts = max(timestamps) if n else base_ts
        if not any(deltas):
            deltas = None
    if not 0 <= compression <= 4:
        raise LocalProtocolError(f"unknown compression codec {compression}")
    section = record_pieces(values, keys, headers, deltas)
    if compression:
        section = [compress(compression, encode_join(section))]
    attributes = compression & COMPRESSION_MASK
    if transactional:
        attributes |= TRANSACTIONAL_BIT
    if control:
        attributes |= CONTROL_BIT
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_BIT
    return n, section, (base_ts, max_ts, attributes)
