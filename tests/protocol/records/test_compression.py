"""Codecs: round trips, snappy framing detection, legacy LZ4, bounded decompression."""

from __future__ import annotations

import contextlib
import os

import cramjam
import pytest

from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.records import Compression, compress, decompress
from kaflite.protocol.records._compression import xxh32

CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
PAYLOADS = [b"", b"x", b"kafka " * 5000, os.urandom(300_000)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "text", "random"])
def test_round_trip(codec: Compression, payload: bytes) -> None:
    packed = compress(codec, payload)
    if len(payload) > 1000 and payload[:6] == b"kafka ":
        assert len(packed) < len(payload) // 10
    assert bytes(decompress(codec, packed)) == payload


def test_none_is_identity_view() -> None:
    data = bytearray(b"abc")
    view = decompress(Compression.NONE, data)
    data[0] = ord("z")
    assert bytes(view) == b"zbc"  # a view, not a copy


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    # the LZ4 library's own frame: its descriptor checksum must match ours
    frame = bytes(cramjam.lz4.compress(b"payload" * 100))
    assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF


def test_snappy_writes_xerial_and_reads_both() -> None:
    data = b"snappy " * 20000
    packed = compress(Compression.SNAPPY, data)
    assert packed.startswith(b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01")
    assert bytes(decompress(Compression.SNAPPY, packed)) == data
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert bytes(decompress(Compression.SNAPPY, raw)) == data


def test_lz4_frame_is_readable_by_the_lz4_library() -> None:
    data = os.urandom(100) * 2000  # several 64 KiB blocks
    packed = compress(Compression.LZ4, data)
    assert bytes(cramjam.lz4.decompress(packed)) == data


def test_lz4_legacy_checksum() -> None:
    data = b"old kafka " * 100
    broken = compress(Compression.LZ4, data, legacy_lz4=True)
    good = compress(Compression.LZ4, data)
    assert broken[6] != good[6]  # the checksum byte differs, nothing else
    assert broken[:6] == good[:6] and broken[7:] == good[7:]
    assert broken[6] == (xxh32(broken[:6]) >> 8) & 0xFF  # covers the magic too
    assert bytes(decompress(Compression.LZ4, broken, legacy_lz4=True)) == data
    with pytest.raises(RemoteProtocolError):
        decompress(Compression.LZ4, broken)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_bomb_is_refused_without_big_allocation(codec: Compression) -> None:
    import tracemalloc

    bomb = compress(codec, bytes(50 * 1024 * 1024))
    assert len(bomb) < 3 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(RemoteProtocolError, match="limit"):
            decompress(codec, bomb, limit=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_limit_is_inclusive(codec: Compression) -> None:
    data = os.urandom(200_000)
    packed = compress(codec, data)
    assert bytes(decompress(codec, packed, limit=len(data))) == data
    with pytest.raises(RemoteProtocolError):
        decompress(codec, packed, limit=len(data) - 1)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
def test_garbage_raises_protocol_error(codec: Compression) -> None:
    for junk in (b"", b"\x00", os.urandom(64), b"\x82SNAPPY\x00" + os.urandom(30)):
        with contextlib.suppress(RemoteProtocolError):
            decompress(codec, junk)  # anything else propagates and fails


def test_truncated_xerial_block() -> None:
    packed = compress(Compression.SNAPPY, b"abc" * 1000)
    with pytest.raises(RemoteProtocolError):
        decompress(Compression.SNAPPY, packed[:-5])


def test_unknown_codec() -> None:
    with pytest.raises(RemoteProtocolError):
        decompress(7, b"abc")
