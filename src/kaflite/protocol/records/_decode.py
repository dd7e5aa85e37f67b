"""Decoding the records section of a v2 batch: one record at a time, or in bulk.

Theory of operation
-------------------
A v2 record is::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint | key | valueLength varint | value
    | headerCount varint | [keyLength varint | key | valueLength varint | value]*

The section handed to these functions is a ``memoryview`` that ends exactly
where the records end (the batch end, or the end of the decompressed buffer).
Reading past it raises ``IndexError``, which the entry points turn into
``RemoteProtocolError``; slicing past it would silently shorten the slice, so
every record checks that it ends exactly ``length`` bytes after its length
field and that this lies inside the section.

Keys and values are ``memoryview`` slices of the section: nothing is copied.

``decode_columns`` is the bulk path. Almost every varint in a record is a
single byte, so it is decoded inline with one comparison; only longer ones go
through ``_long_varint``. ``_stride.py`` adds a faster path for runs of
records that all have the same shape.
"""

from __future__ import annotations

from collections.abc import Iterator

from kaflite.protocol._exceptions import RemoteProtocolError

__all__ = ["Header", "Headers", "Record", "RecordColumns", "decode_columns", "iter_records"]

Header = tuple[str, memoryview | None]
Headers = tuple[Header, ...]
NO_HEADERS: Headers = ()


class Record:
    """One decoded record; ``key``/``value`` are views of the batch buffer."""

    __slots__ = ("attributes", "headers", "key", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: memoryview | None,
        value: memoryview | None,
        headers: Headers = NO_HEADERS,
        attributes: int = 0,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.attributes = attributes

    def __repr__(self) -> str:
        key = None if self.key is None else bytes(self.key)
        value = None if self.value is None else bytes(self.value)
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, key={key!r}, "
            f"value={value!r}, headers={self.headers!r})"
        )


class RecordColumns:
    """The records of a batch as parallel lists (the bulk decode result)."""

    __slots__ = ("headers", "keys", "offsets", "timestamps", "values")

    def __init__(
        self,
        offsets: list[int],
        timestamps: list[int],
        keys: list[memoryview | None],
        values: list[memoryview | None],
        headers: list[Headers],
    ) -> None:
        self.offsets = offsets
        self.timestamps = timestamps
        self.keys = keys
        self.values = values
        self.headers = headers

    def __len__(self) -> int:
        return len(self.offsets)

    def extend(self, other: RecordColumns) -> None:
        self.offsets += other.offsets
        self.timestamps += other.timestamps
        self.keys += other.keys
        self.values += other.values
        self.headers += other.headers

    def records(self) -> list[Record]:
        return list(
            map(Record, self.offsets, self.timestamps, self.keys, self.values, self.headers)
        )


def _long_varint(buf: memoryview, p: int) -> tuple[int, int]:
    """Zigzag-decode a varint of two or more bytes starting at ``p``."""
    z = buf[p] & 0x7F
    shift = 7
    p += 1
    while True:
        b = buf[p]
        p += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            return (z >> 1) ^ -(z & 1), p
        shift += 7
        if shift > 63:
            raise RemoteProtocolError("varint longer than 10 bytes")


def _read_headers(buf: memoryview, p: int, count: int, end: int) -> tuple[Headers, int]:
    if count < 0 or count > end - p:
        raise RemoteProtocolError(f"invalid record header count {count}")
    out: list[Header] = []
    for _ in range(count):
        b = buf[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            n, p = _long_varint(buf, p)
        if n < 0 or p + n > end:
            raise RemoteProtocolError(f"invalid record header key length {n}")
        key = str(buf[p : p + n], "utf-8", "surrogateescape")
        p += n
        b = buf[p]
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            p += 1
        else:
            n, p = _long_varint(buf, p)
        if n < 0:
            if n != -1:
                raise RemoteProtocolError(f"invalid record header value length {n}")
            out.append((key, None))
        else:
            if p + n > end:
                raise RemoteProtocolError(f"record header value length {n} runs past the record")
            out.append((key, buf[p : p + n]))
            p += n
    return tuple(out), p


def decode_columns(
    buf: memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
    start: int = 0,
) -> tuple[RecordColumns, int]:
    """Decode ``count`` records from ``buf[start:]``; return columns and end position.

    ``log_append_time``, when given, replaces every record's timestamp (a
    LogAppendTime batch carries the broker's time in maxTimestamp).
    """
    offsets: list[int] = []
    timestamps: list[int] = []
    keys: list[memoryview | None] = []
    values: list[memoryview | None] = []
    headers: list[Headers] = []
    add_offset = offsets.append
    add_timestamp = timestamps.append
    add_key = keys.append
    add_value = values.append
    add_headers = headers.append
    size = len(buf)
    p = start
    try:
        for _ in range(count):
            b = buf[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := buf[p + 1]) < 0x80:   # two bytes: records of 64..8191 bytes
                z = (b & 0x7F) | (c << 7)
                n = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                n, p = _long_varint(buf, p)
            end = p + n
            if n < 6 or end > size:
                raise RemoteProtocolError(f"record length {n} at byte {p} is invalid")
            # attributes (unused by Kafka) at p
            b = buf[p + 1]
            if b < 0x80:
                add_timestamp(base_timestamp + ((b >> 1) ^ -(b & 1)))
                p += 2
            else:
                n, p = _long_varint(buf, p + 1)
                add_timestamp(base_timestamp + n)
            b = buf[p]
            if b < 0x80:
                add_offset(base_offset + ((b >> 1) ^ -(b & 1)))
                p += 1
            else:
                n, p = _long_varint(buf, p)
                add_offset(base_offset + n)
            b = buf[p]
            if b == 1:
                add_key(None)
                p += 1
            else:
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    n, p = _long_varint(buf, p)
                if n >= 0:
                    add_key(buf[p : p + n])
                    p += n
                elif n == -1:   # a null key in more than one byte
                    add_key(None)
                else:
                    raise RemoteProtocolError(f"invalid record key length {n}")
            b = buf[p]
            if b < 0x80:
                n = (b >> 1) ^ -(b & 1)
                p += 1
            elif (c := buf[p + 1]) < 0x80:
                z = (b & 0x7F) | (c << 7)
                n = (z >> 1) ^ -(z & 1)
                p += 2
            else:
                n, p = _long_varint(buf, p)
            if n >= 0:
                add_value(buf[p : p + n])
                p += n
            elif n == -1:
                add_value(None)
            else:
                raise RemoteProtocolError(f"invalid record value length {n}")
            b = buf[p]
            if b == 0:
                add_headers(NO_HEADERS)
                p += 1
            else:
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    p += 1
                else:
                    n, p = _long_varint(buf, p)
                hdrs, p = _read_headers(buf, p, n, end)
                add_headers(hdrs)
            if p != end:
                raise RemoteProtocolError(f"record ends at byte {p} but its length says {end}")
    except IndexError:
        raise RemoteProtocolError("truncated record") from None
    if log_append_time is not None:
        timestamps = [log_append_time] * len(timestamps)
    return RecordColumns(offsets, timestamps, keys, values, headers), p


def iter_records(
    buf: memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> Iterator[Record]:
    """Yield ``count`` records one by one, decoding each only when asked for."""
    p = 0
    for _ in range(count):
        cols, p = decode_columns(buf, 1, base_offset, base_timestamp, log_append_time, p)
        yield Record(
            cols.offsets[0], cols.timestamps[0], cols.keys[0], cols.values[0], cols.headers[0]
        )
