"""Kafka's primitive wire types: a zero-copy ``Reader`` and a chunked ``Writer``.

Theory of operation
-------------------
The ``Reader`` walks a ``memoryview`` with an integer cursor. Fixed-width ints
go through precompiled ``struct.Struct`` objects; ``unpack_from`` raises
``struct.error`` past the end of the view, which each method turns into
``RemoteProtocolError`` inside a ``try`` (zero cost on CPython 3.11 when
nothing is raised). That exception is the reader's "sticky error": generated
decoders read field after field without checking anything, and the first
failure unwinds the whole decode. Lengths are checked against what remains
before any slice is taken or any list allocated, so a hostile length field
never causes a large allocation (the same rule as Kafka's generated Java:
an array may not claim more elements than there are bytes left).

``bytes_view`` and ``records`` return ``memoryview`` slices of the input: the
record payload of a Fetch or Produce is never copied by the codec.

The ``Writer`` appends small fields to a ``bytearray``. A large payload (a
record set) is not copied into it: the current buffer is sealed into a list of
chunks and the payload object itself is appended, so a transport can
``writelines()`` the chunks. ``getvalue()`` joins them for callers that want
one ``bytes``.

Varints: Kafka's record format and flexible versions use unsigned LEB128
varints (``uvarint``) and zigzag-encoded signed ones (``varint``/``varlong``).
An int32 varint may take at most 5 bytes and an int64 one at most 10.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence

from kaflite.protocol._exceptions import LocalProtocolError, RemoteProtocolError

__all__ = [
    "ZERO_UUID",
    "Reader",
    "Writer",
    "decode_uvarint",
    "encode_uvarint",
    "encode_varint",
    "size_of_varint",
]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_F64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

# Payloads at least this large are kept as separate chunks instead of copied.
_CHUNK_THRESHOLD = 1024

# Precomputed single-byte encodings: most varints in practice are < 128.
_SMALL_UVARINT = [bytes((i,)) for i in range(128)]


def encode_uvarint(value: int) -> bytes:
    """Unsigned LEB128 encoding of a non-negative int (up to 64 bits)."""
    if 0 <= value < 128:
        return _SMALL_UVARINT[value]
    if value < 0 or value >= 1 << 64:
        raise LocalProtocolError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_varint(value: int) -> bytes:
    """Zigzag varint (int32 or int64 range)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise LocalProtocolError(f"varlong out of range: {value}")
    return encode_uvarint((value << 1) ^ (value >> 63))


def size_of_varint(value: int) -> int:
    """Bytes taken by the zigzag varint encoding of ``value``."""
    z = (value << 1) ^ (value >> 63)
    n = 1
    while z >= 0x80:
        z >>= 7
        n += 1
    return n


def decode_uvarint(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """Decode an unsigned varint at ``pos``; return ``(value, new_pos)``."""
    try:
        b = buf[pos]
    except IndexError:
        raise RemoteProtocolError("truncated varint") from None
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    end = pos + max_bytes
    pos += 1
    while True:
        if pos >= end:
            raise RemoteProtocolError(f"varint longer than {max_bytes} bytes")
        try:
            b = buf[pos]
        except IndexError:
            raise RemoteProtocolError("truncated varint") from None
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


class Reader:
    """A cursor over a ``memoryview`` that decodes Kafka primitives."""

    __slots__ = ("buf", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.buf = view
        self.pos = pos

    # -- bookkeeping ---------------------------------------------------------
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def _truncated(self, what: str) -> RemoteProtocolError:
        return RemoteProtocolError(f"truncated {what} at byte {self.pos} of {len(self.buf)}")

    def take(self, n: int) -> memoryview:
        """The next ``n`` bytes as a view (no copy)."""
        p = self.pos
        end = p + n
        if n < 0 or end > len(self.buf):
            raise RemoteProtocolError(f"length {n} at byte {p} runs past the end ({len(self.buf)})")
        self.pos = end
        return self.buf[p:end]

    def sub(self, n: int) -> Reader:
        """A reader over the next ``n`` bytes; this reader skips past them."""
        return Reader(self.take(n))

    # -- fixed width ---------------------------------------------------------
    def int8(self) -> int:
        p = self.pos
        try:
            v: int = _I8.unpack_from(self.buf, p)[0]
        except struct.error:
            raise self._truncated("int8") from None
        self.pos = p + 1
        return v

    def bool(self) -> bool:
        return self.int8() != 0

    def int16(self) -> int:
        p = self.pos
        try:
            v: int = _I16.unpack_from(self.buf, p)[0]
        except struct.error:
            raise self._truncated("int16") from None
        self.pos = p + 2
        return v

    def uint16(self) -> int:
        p = self.pos
        try:
            v: int = _U16.unpack_from(self.buf, p)[0]
        except struct.error:
            raise self._truncated("uint16") from None
        self.pos = p + 2
        return v

    def int32(self) -> int:
        p = self.pos
        try:
            v: int = _I32.unpack_from(self.buf, p)[0]
        except struct.error:
            raise self._truncated("int32") from None
        self.pos = p + 4
        return v

    def uint32(self) -> int:
        p = self.pos
        try:
            v: int = _U32.unpack_from(self.buf, p)[0]
        except struct.error:
            raise self._truncated("uint32") from None
        self.pos = p + 4
        return v

    def int64(self) -> int:
        p = self.pos
        try:
            v: int = _I64.unpack_from(self.buf, p)[0]
        except struct.error:
            raise self._truncated("int64") from None
        self.pos = p + 8
        return v

    def float64(self) -> float:
        p = self.pos
        try:
            v: float = _F64.unpack_from(self.buf, p)[0]
        except struct.error:
            raise self._truncated("float64") from None
        self.pos = p + 8
        return v

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16)))

    # -- varints ---------------------------------------------------------------
    def uvarint(self) -> int:
        """Unsigned varint of at most 5 bytes (an unsigned int32)."""
        value, self.pos = decode_uvarint(self.buf, self.pos, 5)
        if value > 0xFFFFFFFF:
            raise RemoteProtocolError("unsigned varint exceeds 32 bits")
        return value

    def varint(self) -> int:
        """Zigzag varint of at most 5 bytes (int32)."""
        z, self.pos = decode_uvarint(self.buf, self.pos, 5)
        if z > 0xFFFFFFFF:
            raise RemoteProtocolError("varint exceeds 32 bits")
        return (z >> 1) ^ -(z & 1)

    def varlong(self) -> int:
        """Zigzag varint of at most 10 bytes (int64)."""
        z, self.pos = decode_uvarint(self.buf, self.pos, 10)
        if z > 0xFFFFFFFFFFFFFFFF:
            raise RemoteProtocolError("varlong exceeds 64 bits")
        return (z >> 1) ^ -(z & 1)

    # -- strings -------------------------------------------------------------
    def _text(self, n: int) -> str:
        # surrogateescape: any byte sequence decodes, and re-encodes identically.
        return str(self.take(n), "utf-8", "surrogateescape")

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise RemoteProtocolError(f"non-nullable string has length {n}")
        return self._text(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise RemoteProtocolError(f"invalid string length {n}")
        return self._text(n)

    def compact_string(self) -> str:
        n = self.uvarint()
        if n == 0:
            raise RemoteProtocolError("non-nullable compact string is null")
        return self._text(n - 1)

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._text(n - 1)

    # -- bytes (views, never copies) -------------------------------------------
    def bytes_view(self) -> memoryview:
        n = self.int32()
        if n < 0:
            raise RemoteProtocolError(f"non-nullable bytes has length {n}")
        return self.take(n)

    def nullable_bytes_view(self) -> memoryview | None:
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise RemoteProtocolError(f"invalid bytes length {n}")
        return self.take(n)

    def compact_bytes_view(self) -> memoryview:
        n = self.uvarint()
        if n == 0:
            raise RemoteProtocolError("non-nullable compact bytes is null")
        return self.take(n - 1)

    def compact_nullable_bytes_view(self) -> memoryview | None:
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    # -- arrays ----------------------------------------------------------------
    def _checked_count(self, n: int) -> int:
        # Every element takes at least one byte, so more elements than bytes
        # left is malformed; this also stops a huge allocation up front.
        if n > len(self.buf) - self.pos:
            raise RemoteProtocolError(
                f"array of {n} elements cannot fit in {len(self.buf) - self.pos} bytes"
            )
        return n

    def array_len(self) -> int:
        """Length of a non-nullable classic array."""
        n = self.int32()
        if n < 0:
            raise RemoteProtocolError(f"non-nullable array has length {n}")
        return self._checked_count(n)

    def nullable_array_len(self) -> int:
        """Length of a nullable classic array; -1 means null."""
        n = self.int32()
        if n == -1:
            return -1
        if n < 0:
            raise RemoteProtocolError(f"invalid array length {n}")
        return self._checked_count(n)

    def compact_array_len(self) -> int:
        n = self.uvarint()
        if n == 0:
            raise RemoteProtocolError("non-nullable compact array is null")
        return self._checked_count(n - 1)

    def compact_nullable_array_len(self) -> int:
        """Length of a nullable compact array; -1 means null."""
        n = self.uvarint()
        return -1 if n == 0 else self._checked_count(n - 1)

    def int32_array(self, n: int) -> list[int]:
        """``n`` big-endian int32s, in one unpack."""
        return list(struct.unpack_from(f">{n}i", self.take(4 * n))) if n else []

    # -- tagged fields ---------------------------------------------------------
    def tagged_fields(self) -> list[tuple[int, memoryview]]:
        """A tagged-field section: ``[(tag, payload view), ...]`` in wire order."""
        count = self.uvarint()
        if count == 0:
            return []
        self._checked_count(count)
        fields = []
        last = -1
        for _ in range(count):
            tag = self.uvarint()
            if tag <= last:
                raise RemoteProtocolError(f"tagged fields out of order: {tag} after {last}")
            last = tag
            size = self.uvarint()
            fields.append((tag, self.take(size)))
        return fields


BytesLike = bytes | bytearray | memoryview


class Writer:
    """Encodes Kafka primitives into a growing buffer, keeping big payloads as chunks."""

    __slots__ = ("buf", "chunks", "size_before")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.chunks: list[BytesLike] = []
        self.size_before = 0  # bytes held in ``chunks``

    def __len__(self) -> int:
        return self.size_before + len(self.buf)

    def getvalue(self) -> bytes:
        if not self.chunks:
            return bytes(self.buf)
        return b"".join([*self.chunks, self.buf])

    def buffers(self) -> list[BytesLike]:
        """The encoded bytes as a list of chunks, suitable for ``writelines``."""
        if self.buf:
            return [*self.chunks, self.buf]
        return list(self.chunks)

    def raw(self, data: BytesLike) -> None:
        """Append bytes as they are; big ones are referenced, not copied."""
        if len(data) >= _CHUNK_THRESHOLD:
            if self.buf:
                self.chunks.append(self.buf)
                self.size_before += len(self.buf)
                self.buf = bytearray()
            self.chunks.append(data)
            self.size_before += len(data)
        else:
            self.buf += data

    # -- fixed width -----------------------------------------------------------
    def _pack(self, s: struct.Struct, v: int | float, what: str) -> None:
        try:
            self.buf += s.pack(v)
        except struct.error:
            raise LocalProtocolError(f"{what} out of range: {v!r}") from None

    def int8(self, v: int) -> None:
        self._pack(_I8, v, "int8")

    def bool(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def int16(self, v: int) -> None:
        self._pack(_I16, v, "int16")

    def uint16(self, v: int) -> None:
        self._pack(_U16, v, "uint16")

    def int32(self, v: int) -> None:
        self._pack(_I32, v, "int32")

    def uint32(self, v: int) -> None:
        self._pack(_U32, v, "uint32")

    def int64(self, v: int) -> None:
        self._pack(_I64, v, "int64")

    def float64(self, v: float) -> None:
        self._pack(_F64, v, "float64")

    def uuid(self, v: uuid.UUID) -> None:
        self.buf += v.bytes

    # -- varints ---------------------------------------------------------------
    def uvarint(self, v: int) -> None:
        if v > 0xFFFFFFFF:
            raise LocalProtocolError(f"unsigned varint out of range: {v}")
        self.buf += encode_uvarint(v)

    def varint(self, v: int) -> None:
        if not -(1 << 31) <= v < (1 << 31):
            raise LocalProtocolError(f"varint out of range: {v}")
        self.buf += encode_uvarint((v << 1) ^ (v >> 31))

    def varlong(self, v: int) -> None:
        self.buf += encode_varint(v)

    # -- strings ---------------------------------------------------------------
    @staticmethod
    def _utf8(v: str) -> bytes:
        return v.encode("utf-8", "surrogateescape")

    def string(self, v: str | None) -> None:
        if v is None:
            raise LocalProtocolError("non-nullable string is None")
        data = self._utf8(v)
        if len(data) > 0x7FFF:
            raise LocalProtocolError(f"string of {len(data)} bytes exceeds int16 length")
        self.buf += _I16.pack(len(data))
        self.buf += data

    def nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v)

    def compact_string(self, v: str | None) -> None:
        if v is None:
            raise LocalProtocolError("non-nullable compact string is None")
        data = self._utf8(v)
        self.buf += encode_uvarint(len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, v: str | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v)

    # -- bytes -----------------------------------------------------------------
    def bytes(self, v: BytesLike | None) -> None:
        if v is None:
            raise LocalProtocolError("non-nullable bytes is None")
        self.buf += _I32.pack(len(v))
        self.raw(v)

    def nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes(v)

    def compact_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            raise LocalProtocolError("non-nullable compact bytes is None")
        self.buf += encode_uvarint(len(v) + 1)
        self.raw(v)

    def compact_nullable_bytes(self, v: BytesLike | None) -> None:
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    # -- arrays ----------------------------------------------------------------
    def array_len(self, n: int) -> None:
        self.buf += _I32.pack(n)

    def compact_array_len(self, n: int) -> None:
        """Compact array length; pass -1 for a null array."""
        self.buf += encode_uvarint(n + 1)

    def int32_array(self, values: Sequence[int]) -> None:
        if values:
            try:
                self.buf += struct.pack(f">{len(values)}i", *values)
            except struct.error:
                raise LocalProtocolError(f"int32 out of range in {values!r}") from None

    # -- tagged fields ---------------------------------------------------------
    def tagged_fields(self, fields: Sequence[tuple[int, BytesLike]]) -> None:
        """A tagged-field section from ``(tag, payload)`` pairs sorted by tag."""
        self.buf += encode_uvarint(len(fields))
        for tag, payload in fields:
            self.buf += encode_uvarint(tag)
            self.buf += encode_uvarint(len(payload))
            self.raw(payload)
