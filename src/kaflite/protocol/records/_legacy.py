"""Legacy message sets: magic 0 and magic 1 (Kafka before 0.11).

A message set is a sequence of entries::

    offset int64 | messageSize int32 | crc uint32 | magic int8 | attributes int8
    | [timestamp int64: magic 1 only] | key bytes (int32 length, -1 = null)
    | value bytes (same)

The CRC is CRC-32 (IEEE, ``zlib.crc32``) over magic..end. Attributes bits 0-2
are the codec (zstd is not allowed before magic 2) and bit 3 the timestamp
type (magic 1).

A compressed entry is a *wrapper*: its value is a compressed message set of
uncompressed inner messages. For magic 1 the inner offsets are relative
(0..n-1) and the wrapper carries the absolute offset of the *last* inner
message, so inner ``i`` sits at ``wrapper.offset - last_relative + relative_i``
(KIP-31). For magic 0 the inner offsets are absolute. With LogAppendTime on a
magic-1 wrapper, every inner message takes the wrapper's timestamp.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Sequence

from kaflite.protocol._exceptions import LocalProtocolError, RemoteProtocolError
from kaflite.protocol.records._compression import (
    DEFAULT_DECOMPRESSION_LIMIT,
    Compression,
    compress,
    decompress,
)
from kaflite.protocol.records._decode import Record

__all__ = ["LegacyMessage", "encode_message_set", "iter_legacy_messages", "iter_legacy_records"]

BytesLike = bytes | bytearray | memoryview

_ENTRY = struct.Struct(">qi")  # offset, messageSize
_V0 = struct.Struct(">Ibb")  # crc, magic, attributes
_V1 = struct.Struct(">Ibbq")  # crc, magic, attributes, timestamp
_I32 = struct.Struct(">i")
_ENTRY_OVERHEAD = 12
_MIN_SIZE = {0: 14, 1: 22}
_CODEC_MASK = 0x07
_LOG_APPEND_TIME = 0x08


class LegacyMessage:
    """One top-level entry of a legacy message set (possibly a wrapper)."""

    __slots__ = ("attributes", "crc", "key", "magic", "offset", "timestamp", "value")

    def __init__(
        self,
        offset: int,
        magic: int,
        attributes: int,
        timestamp: int,
        key: memoryview | None,
        value: memoryview | None,
        crc: int,
    ) -> None:
        self.offset = offset
        self.magic = magic
        self.attributes = attributes
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.crc = crc

    @property
    def compression(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def is_log_append_time(self) -> bool:
        return self.magic == 1 and bool(self.attributes & _LOG_APPEND_TIME)

    def records(
        self, *, limit: int = DEFAULT_DECOMPRESSION_LIMIT, verify_crc: bool = True
    ) -> list[Record]:
        """The record(s) this entry stands for, with absolute offsets."""
        if not self.compression:
            return [Record(self.offset, self.timestamp, self.key, self.value)]
        if self.value is None:
            raise RemoteProtocolError("compressed legacy message has a null value")
        inner_buf = decompress(
            self.compression, self.value, limit=limit, legacy_lz4=self.magic == 0
        )
        inner = list(_iter_entries(inner_buf, allow_partial=False, verify_crc=verify_crc))
        if not inner:
            raise RemoteProtocolError("compressed legacy message holds no messages")
        out = []
        shift = 0
        if self.magic == 1:
            # As in Kafka's reader: a producer's wrapper (offset not yet
            # assigned by a broker) would give a negative base; then the
            # inner offsets are taken as they are.
            shift = max(self.offset - inner[-1].offset, 0)
        for msg in inner:
            if msg.compression:
                raise RemoteProtocolError("nested compression in a legacy message set")
            if msg.magic != self.magic:
                raise RemoteProtocolError(
                    f"inner magic {msg.magic} inside a magic {self.magic} wrapper"
                )
            ts = self.timestamp if self.is_log_append_time else msg.timestamp
            out.append(Record(msg.offset + shift, ts, msg.key, msg.value))
        return out

    def __repr__(self) -> str:
        return f"LegacyMessage(offset={self.offset}, magic={self.magic}, attributes={self.attributes:#x})"


def _nullable_bytes(view: memoryview, pos: int, end: int) -> tuple[memoryview | None, int]:
    if pos + 4 > end:
        raise RemoteProtocolError("truncated legacy message key/value length")
    (n,) = _I32.unpack_from(view, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or pos + n > end:
        raise RemoteProtocolError(f"legacy message key/value length {n} is invalid")
    return view[pos : pos + n], pos + n


def _iter_entries(
    view: memoryview, *, allow_partial: bool, verify_crc: bool
) -> Iterator[LegacyMessage]:
    pos = 0
    size = len(view)
    while pos < size:
        if size - pos < _ENTRY_OVERHEAD:
            if allow_partial:
                return
            raise RemoteProtocolError("truncated legacy message set entry")
        offset, msg_size = _ENTRY.unpack_from(view, pos)
        body = pos + _ENTRY_OVERHEAD
        end = body + msg_size
        if msg_size < _MIN_SIZE[0]:
            raise RemoteProtocolError(f"legacy message size {msg_size} is too small")
        if end > size:
            if allow_partial:
                return
            raise RemoteProtocolError(f"legacy message of {msg_size} bytes runs past the end")
        magic = view[body + 4]
        if magic == 0:
            crc, _, attributes = _V0.unpack_from(view, body)
            timestamp = -1
            p = body + 6
        elif magic == 1:
            if msg_size < _MIN_SIZE[1]:
                raise RemoteProtocolError(f"magic 1 message size {msg_size} is too small")
            crc, _, attributes, timestamp = _V1.unpack_from(view, body)
            p = body + 14
        else:
            raise RemoteProtocolError(f"unexpected magic {magic} in a legacy message set")
        if verify_crc and zlib.crc32(view[body + 4 : end]) != crc:
            raise RemoteProtocolError(f"legacy message CRC mismatch at offset {offset}")
        key, p = _nullable_bytes(view, p, end)
        value, p = _nullable_bytes(view, p, end)
        if p != end:
            raise RemoteProtocolError(f"legacy message has {end - p} trailing bytes")
        if attributes & _CODEC_MASK > Compression.LZ4:
            raise RemoteProtocolError(
                f"codec {attributes & _CODEC_MASK} not allowed in magic {magic}"
            )
        yield LegacyMessage(offset, magic, attributes, timestamp, key, value, crc)
        pos = end


def iter_legacy_messages(
    data: BytesLike, *, allow_partial: bool = True, verify_crc: bool = True
) -> Iterator[LegacyMessage]:
    """The top-level entries of a magic 0/1 message set (wrappers not opened)."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    return _iter_entries(
        view.cast("B") if view.format != "B" else view,
        allow_partial=allow_partial,
        verify_crc=verify_crc,
    )


def iter_legacy_records(
    data: BytesLike,
    *,
    allow_partial: bool = True,
    verify_crc: bool = True,
    limit: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> Iterator[Record]:
    """Every record of a magic 0/1 message set, wrappers decompressed."""
    for message in iter_legacy_messages(data, allow_partial=allow_partial, verify_crc=verify_crc):
        yield from message.records(limit=limit, verify_crc=verify_crc)


def _encode_message(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: BytesLike | None,
    value: BytesLike | None,
) -> bytes:
    parts = [bytes((magic, attributes & 0xFF))]
    if magic == 1:
        parts.append(struct.pack(">q", timestamp))
    for field in (key, value):
        if field is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(_I32.pack(len(field)))
            parts.append(bytes(field))
    body = b"".join(parts)
    return _ENTRY.pack(offset, 4 + len(body)) + struct.pack(">I", zlib.crc32(body)) + body


def encode_message_set(
    values: Sequence[BytesLike | None],
    keys: Sequence[BytesLike | None] | None = None,
    timestamps: Sequence[int] | None = None,
    *,
    magic: int = 1,
    compression: int = Compression.NONE,
    base_offset: int = 0,
    log_append_time: bool = False,
) -> bytes:
    """Encode a magic 0 or 1 message set; compressed sets become one wrapper."""
    if magic not in (0, 1):
        raise LocalProtocolError(f"legacy message sets are magic 0 or 1, not {magic}")
    if not 0 <= compression <= Compression.LZ4:
        raise LocalProtocolError(f"codec {compression} is not allowed with magic {magic}")
    n = len(values)
    if (keys is not None and len(keys) != n) or (timestamps is not None and len(timestamps) != n):
        raise LocalProtocolError("keys/timestamps must match values in length")
    ts = list(timestamps) if timestamps is not None and magic == 1 else [-1] * n
    ks = keys if keys is not None else [None] * n
    ts_attr = _LOG_APPEND_TIME if log_append_time and magic == 1 else 0
    try:
        if not compression:
            return b"".join(
                _encode_message(base_offset + i, magic, ts_attr, ts[i], ks[i], values[i])
                for i in range(n)
            )
        if not n:
            return b""
        first = 0 if magic == 1 else base_offset
        inner = b"".join(
            _encode_message(first + i, magic, 0, ts[i], ks[i], values[i]) for i in range(n)
        )
        wrapped = compress(compression, inner, legacy_lz4=magic == 0)
        return _encode_message(
            base_offset + n - 1, magic, compression | ts_attr, max(ts), None, wrapped
        )
    except struct.error as exc:
        raise LocalProtocolError(f"legacy message field out of range: {exc}") from None
