"""Record compression codecs: gzip, snappy, lz4 and zstd, through ``cramjam``.

Theory of operation
-------------------
Kafka compresses the *records section* of a v2 batch, or the inner message set
of a legacy wrapper message. The codec id lives in the low three bits of the
attributes: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd.

Decompression is bounded. A peer can send a few kilobytes that expand to
gigabytes (a "decompression bomb"), so every decoder writes into a buffer of a
size we chose, never into one sized by the payload:

* raw snappy states its decompressed length up front: we check it before
  allocating anything;
* xerial-framed snappy is a sequence of raw snappy blocks; each is checked the
  same way and the running total is held under the limit;
* gzip, lz4 (frame format) and zstd decompress with ``cramjam``'s
  ``decompress_into`` into a buffer that starts small and grows by a factor of
  four while the library reports that the output did not fit, up to
  ``limit + 1`` bytes. Output that fills that final buffer is a bomb.

Snappy comes in two shapes. librdkafka and most non-JVM clients write a raw
snappy block; the Java client writes snappy-java's "xerial" framing: the magic
``\\x82SNAPPY\\x00``, two big-endian int32s (version, minimum compatible
version), then ``[int32 length][raw snappy block]`` repeated. Decoding detects
the magic; encoding writes xerial framing (as Java does), which every client
reads.

LZ4 uses the LZ4 frame format. Kafka before 0.10 computed the frame
descriptor's header checksum (HC) over the magic number as well as the
descriptor, which violates the LZ4 spec (KIP-57). Messages of magic 0 keep that
broken checksum; magic 1 and later use the correct one. We write our own small
frame (independent 64 KiB blocks, no checksums), the layout Java's
``KafkaLZ4BlockOutputStream`` writes, so that the descriptor checksum can be
computed either way; on decoding a magic-0 frame we repair the HC byte before
handing the frame to the library.

Every failure surfaces as ``RemoteProtocolError``; a ``cramjam`` error never
escapes.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import cast

import cramjam

from kaflite.protocol._exceptions import LocalProtocolError, RemoteProtocolError

__all__ = [
    "DEFAULT_DECOMPRESSION_LIMIT",
    "MAX_CODEC",
    "Compression",
    "compress",
    "decompress",
    "xxh32",
]

# The largest decompressed records section accepted by default. Kafka's own
# limits are per batch (message.max.bytes, 1 MiB by default), but a
# well-compressed batch may expand far beyond its wire size; 64 MiB leaves room
# for that while keeping a hostile payload from exhausting memory.
DEFAULT_DECOMPRESSION_LIMIT = 64 * 1024 * 1024

_INITIAL_OUTPUT = 64 * 1024


class Compression(enum.IntEnum):
    """Kafka's compression codec ids (attributes bits 0-2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


MAX_CODEC = max(Compression)  # codec ids above this (5-7) are unknown

BytesLike = bytes | bytearray | memoryview

# -- xxHash32 (for the LZ4 frame descriptor checksum) -------------------------

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: BytesLike, seed: int = 0) -> int:
    """xxHash32 of ``data``; only ever used on a few header bytes."""
    buf = bytes(data)
    n = len(buf)
    p = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while p + 16 <= n:
            for lane in range(4):
                word = int.from_bytes(buf[p : p + 4], "little")
                v[lane] = (_rotl((v[lane] + word * _P2) & _M32, 13) * _P1) & _M32
                p += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while p + 4 <= n:
        h = (h + int.from_bytes(buf[p : p + 4], "little") * _P3) & _M32
        h = (_rotl(h, 17) * _P4) & _M32
        p += 4
    while p < n:
        h = (h + buf[p] * _P5) & _M32
        h = (_rotl(h, 11) * _P1) & _M32
        p += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# -- LZ4 frames ----------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
# FLG: version 01, block independence; BD: 64 KiB maximum block size.
_LZ4_FLG = 0x60
_LZ4_BD = 0x40
_LZ4_BLOCK = 64 * 1024
_U32LE = struct.Struct("<I")


def _lz4_descriptor_end(frame: BytesLike) -> int:
    """Index of the HC byte of an LZ4 frame descriptor."""
    if len(frame) < 7 or bytes(frame[:4]) != _LZ4_MAGIC:
        raise RemoteProtocolError("lz4: missing frame magic")
    flg = frame[4]
    end = 6
    if flg & 0x08:  # content size present
        end += 8
    if flg & 0x01:  # dictionary id present
        end += 4
    if len(frame) <= end:
        raise RemoteProtocolError("lz4: truncated frame descriptor")
    return end


def _lz4_compress(data: BytesLike, broken_checksum: bool) -> bytes:
    # Java's KafkaLZ4BlockOutputStream layout: independent 64 KiB blocks, no
    # content size and no checksums. A block that does not shrink is stored
    # raw with the high bit of its size set.
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    hashed = _LZ4_MAGIC + descriptor if broken_checksum else descriptor
    out = [_LZ4_MAGIC, descriptor, bytes(((xxh32(hashed) >> 8) & 0xFF,))]
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    for start in range(0, len(view), _LZ4_BLOCK):
        chunk = view[start : start + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(bytes(chunk), store_size=False))
        if len(block) >= len(chunk):
            out.append(_U32LE.pack(len(chunk) | 0x80000000))
            out.append(bytes(chunk))
        else:
            out.append(_U32LE.pack(len(block)))
            out.append(block)
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


def _lz4_repair_legacy(frame: BytesLike) -> BytesLike:
    """Rewrite a pre-KIP-57 frame's header checksum to the spec's value."""
    hc = _lz4_descriptor_end(frame)
    fixed = bytearray(frame)
    fixed[hc] = (xxh32(fixed[4:hc]) >> 8) & 0xFF
    return fixed


# -- snappy --------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_I32 = struct.Struct(">i")


def _snappy_compress(data: BytesLike) -> bytes:
    out = [_XERIAL_HEADER]
    view = memoryview(data).cast("B")
    for start in range(0, max(len(view), 1), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(bytes(view[start : start + _XERIAL_BLOCK])))
        out.append(_I32.pack(len(block)))
        out.append(block)
    return b"".join(out)


def _raw_snappy_into(block: BytesLike, out: bytearray, pos: int, limit: int) -> int:
    try:
        size = int(cramjam.snappy.decompress_raw_len(bytes(block)))
    except Exception as exc:
        raise RemoteProtocolError(f"snappy: corrupt block ({exc})") from None
    if size > limit - pos:
        raise RemoteProtocolError(f"snappy: decompressed size exceeds the limit of {limit} bytes")
    if not size:
        return pos
    target = memoryview(out)[pos : pos + size]
    try:
        written = int(cramjam.snappy.decompress_raw_into(bytes(block), target))
    except Exception as exc:
        raise RemoteProtocolError(f"snappy: corrupt block ({exc})") from None
    finally:
        target.release()
    if written != size:
        raise RemoteProtocolError("snappy: block shorter than its stated length")
    return pos + size


def _snappy_decompress(data: BytesLike, limit: int) -> memoryview:
    view = memoryview(data).cast("B")
    if len(view) >= 16 and bytes(view[:8]) == _XERIAL_MAGIC:
        # First pass: validate the framing and add up the declared sizes, so
        # the output is allocated once and never exceeds the limit.
        blocks: list[memoryview] = []
        total = 0
        pos = 16
        while pos < len(view):
            if pos + 4 > len(view):
                raise RemoteProtocolError("snappy: truncated xerial block length")
            (n,) = _I32.unpack_from(view, pos)
            pos += 4
            if n < 0 or pos + n > len(view):
                raise RemoteProtocolError(f"snappy: xerial block length {n} runs past the end")
            block = view[pos : pos + n]
            pos += n
            try:
                total += int(cramjam.snappy.decompress_raw_len(bytes(block)))
            except Exception as exc:
                raise RemoteProtocolError(f"snappy: corrupt block ({exc})") from None
            if total > limit:
                raise RemoteProtocolError(
                    f"snappy: decompressed size exceeds the limit of {limit} bytes"
                )
            blocks.append(block)
        out = bytearray(total)
        written = 0
        for block in blocks:
            written = _raw_snappy_into(block, out, written, total)
        return memoryview(out)[:written]
    try:
        size = int(cramjam.snappy.decompress_raw_len(bytes(view)))
    except Exception as exc:
        raise RemoteProtocolError(f"snappy: corrupt data ({exc})") from None
    if size > limit:
        raise RemoteProtocolError(f"snappy: decompressed size exceeds the limit of {limit} bytes")
    out = bytearray(size)
    written = _raw_snappy_into(view, out, 0, size)
    return memoryview(out)[:written]


# -- streaming codecs with a growing, bounded output ----------------------------

_OVERFLOW_HINTS = ("failed to write whole buffer", "smaller than required", "too small")


def _bounded(func: Callable[[bytes, bytearray], object], name: str, data: BytesLike,
             limit: int) -> memoryview:
    """Decompress with ``func(src, out)`` into buffers of growing size <= limit + 1."""
    src = bytes(data)
    size = min(limit + 1, max(_INITIAL_OUTPUT, 4 * len(src)))
    while True:
        out = bytearray(size)
        try:
            written = int(cast(int, func(src, out)))
        except Exception as exc:
            text = str(exc)
            if size <= limit and any(h in text for h in _OVERFLOW_HINTS):
                size = min(limit + 1, size * 4)
                continue
            if size > limit and any(h in text for h in _OVERFLOW_HINTS):
                raise RemoteProtocolError(
                    f"{name}: decompressed size exceeds the limit of {limit} bytes"
                ) from None
            raise RemoteProtocolError(f"{name}: corrupt data ({text})") from None
        if written >= size and size <= limit:
            # Filled exactly: there may be more output. Try a bigger buffer.
            size = min(limit + 1, size * 4)
            continue
        if written > limit:
            raise RemoteProtocolError(
                f"{name}: decompressed size exceeds the limit of {limit} bytes"
            )
        return memoryview(out)[:written]


# -- public API ------------------------------------------------------------------


def compress(codec: int, data: BytesLike, *, legacy_lz4: bool = False) -> bytes:
    """Compress ``data`` with Kafka codec id ``codec``.

    ``legacy_lz4`` writes the broken LZ4 header checksum of magic-0 messages.
    """
    try:
        kind = Compression(codec)
    except ValueError:
        raise LocalProtocolError(f"unknown compression codec {codec}") from None
    if kind is Compression.NONE:
        return bytes(data)
    if kind is Compression.GZIP:
        return bytes(cramjam.gzip.compress(bytes(data)))
    if kind is Compression.SNAPPY:
        return _snappy_compress(data)
    if kind is Compression.LZ4:
        return _lz4_compress(data, broken_checksum=legacy_lz4)
    return bytes(cramjam.zstd.compress(bytes(data), level=3))


def decompress(
    codec: int,
    data: BytesLike,
    *,
    limit: int = DEFAULT_DECOMPRESSION_LIMIT,
    legacy_lz4: bool = False,
) -> memoryview:
    """Decompress ``data``; the result never exceeds ``limit`` bytes.

    ``legacy_lz4`` accepts magic-0 LZ4 frames whose header checksum covers the
    frame magic (pre-KIP-57 Kafka).
    """
    if codec == Compression.NONE:
        return memoryview(data).cast("B")
    if codec == Compression.GZIP:
        return _bounded(cramjam.gzip.decompress_into, "gzip", data, limit)
    if codec == Compression.SNAPPY:
        return _snappy_decompress(data, limit)
    if codec == Compression.LZ4:
        if legacy_lz4:
            data = _lz4_repair_legacy(data)
        return _bounded(cramjam.lz4.decompress_into, "lz4", data, limit)
    if codec == Compression.ZSTD:
        return _bounded(cramjam.zstd.decompress_into, "zstd", data, limit)
    raise RemoteProtocolError(f"unknown compression codec {codec}")
