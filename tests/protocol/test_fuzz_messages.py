"""Fuzz: any bytes fed to any decoder yield a message or a ProtocolError, nothing else.

Inputs are random bytes and mutations (bit flips, truncations, splices, huge
length fields) of valid encodings. A decoder must never raise another exception,
never loop without consuming input, and never allocate in proportion to a
length field it has not checked against the bytes it has.
"""

from __future__ import annotations

import contextlib
import random
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol import FrameDecoder, ProtocolError, decode_request, decode_response
from kaflite.protocol.messages import REGISTRY
from kaflite.protocol.messages._runtime import Struct
from tests.protocol.strategies import structs

TARGETS = []
for info in REGISTRY.values():
    for cls in (info.request, info.response):
        TARGETS.append(pytest.param(cls, cls.MAX_VERSION, id=f"{cls.__name__}-v{cls.MAX_VERSION}"))
        if cls.MIN_VERSION != cls.MAX_VERSION:
            TARGETS.append(pytest.param(cls, cls.MIN_VERSION, id=f"{cls.__name__}-v{cls.MIN_VERSION}"))


def mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    op = rng.randrange(5)
    if op == 0 and buf:  # flip bits
        for _ in range(rng.randint(1, 4)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    elif op == 1 and buf:  # truncate
        del buf[rng.randrange(len(buf)):]
    elif op == 2:  # plant a huge length (int16/int32/varint) somewhere
        pos = rng.randrange(len(buf) + 1)
        planted = rng.choice([b"\x7f\xff", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f", b"\x80" * 11])
        buf[pos:pos + len(planted)] = planted
    elif op == 3:  # splice random bytes
        pos = rng.randrange(len(buf) + 1)
        buf[pos:pos] = rng.randbytes(rng.randint(1, 8))
    elif buf:  # drop a byte
        del buf[rng.randrange(len(buf))]
    return bytes(buf)


def try_decode(cls: type[Struct], data: bytes, version: int) -> None:
    with contextlib.suppress(ProtocolError):
        cls.decode(data, version)


@pytest.mark.parametrize(("cls", "version"), TARGETS)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), seed=st.integers(0, 2**32 - 1), noise=st.binary(max_size=64))
def test_decoder_raises_only_protocol_errors(
    cls: type[Struct], version: int, data: st.DataObject, seed: int, noise: bytes
) -> None:
    rng = random.Random(seed)
    valid = data.draw(structs(cls, version)).encode(version)
    try_decode(cls, noise, version)
    for _ in range(8):
        try_decode(cls, mutate(valid, rng), version)


def test_hostile_lengths_do_not_allocate() -> None:
    # A Metadata response claiming 2^31-1 brokers, and a string of 32767 bytes,
    # in a 20-byte frame: both must be refused before any allocation.
    cls = REGISTRY[3].response
    frames = [
        struct.pack(">ii", 0, 0x7FFFFFFF) + b"\x00" * 12,
        struct.pack(">iiihi", 0, 1, 1, 0x7FFF, 1),
    ]
    tracemalloc.start()
    try:
        for frame in frames:
            with pytest.raises(ProtocolError):
                cls.decode(frame, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_varint_longer_than_allowed_is_refused() -> None:
    # A compact string length whose varint runs 6 bytes: over the 5 an int32 may use.
    from kaflite.protocol.primitives import Reader

    with pytest.raises(ProtocolError, match="longer than 5"):
        Reader(b"\x80\x80\x80\x80\x80\x01").compact_string()
    with pytest.raises(ProtocolError, match="longer than 10"):
        Reader(b"\x80" * 10 + b"\x01").varlong()


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_frame_level_decoders(data: bytes) -> None:
    """Whole frames with random headers: only ProtocolError may escape."""
    with contextlib.suppress(ProtocolError):
        decode_request(data)
    if len(data) >= 4:
        api_key, version = struct.unpack(">hh", data[:4])
        info = REGISTRY.get(api_key % 100)
        if info is not None:
            with contextlib.suppress(ProtocolError):
                decode_response(data[4:], info.api_key, version % (info.max_version + 1))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_frame_decoder_only_raises_protocol_error(data: bytes) -> None:
    decoder = FrameDecoder(max_frame_size=1 << 20)
    with contextlib.suppress(ProtocolError):
        decoder.feed(data)
