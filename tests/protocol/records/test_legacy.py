"""Legacy message sets (magic 0/1): round trips, wrappers, CRC, malformed input."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import LocalProtocolError, RemoteProtocolError
from kaflite.protocol.records import (
    Compression,
    encode_batch,
    encode_message_set,
    iter_legacy_messages,
    iter_legacy_records,
    iter_record_set_records,
)


@settings(max_examples=80, deadline=None)
@given(
    msgs=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=30)),
            st.one_of(st.none(), st.binary(max_size=80)),
        ),
        min_size=1,
        max_size=20,
    ),
    magic=st.sampled_from([0, 1]),
    codec=st.sampled_from([0, 1, 2, 3]),
    base=st.integers(0, 2**40),
)
def test_round_trip(
    msgs: list[tuple[bytes | None, bytes | None]], magic: int, codec: int, base: int
) -> None:
    ts = [1_600_000_000_000 + i for i in range(len(msgs))]
    data = encode_message_set(
        [m[1] for m in msgs],
        keys=[m[0] for m in msgs],
        timestamps=ts,
        magic=magic,
        compression=codec,
        base_offset=base,
    )
    records = list(iter_legacy_records(data))
    assert [r.offset for r in records] == [base + i for i in range(len(msgs))]
    assert [None if r.key is None else bytes(r.key) for r in records] == [m[0] for m in msgs]
    assert [None if r.value is None else bytes(r.value) for r in records] == [m[1] for m in msgs]
    assert [r.timestamp for r in records] == (ts if magic else [-1] * len(msgs))


def test_wrapper_offset_is_last_inner_offset() -> None:
    data = encode_message_set(
        [b"a", b"b", b"c"], magic=1, compression=Compression.GZIP, base_offset=10
    )
    (wrapper,) = list(iter_legacy_messages(data))
    assert wrapper.offset == 12 and wrapper.compression == Compression.GZIP
    assert [r.offset for r in wrapper.records()] == [10, 11, 12]


def test_log_append_time_wrapper_overrides_inner_timestamps() -> None:
    data = bytearray(
        encode_message_set(
            [b"a", b"b"],
            timestamps=[1, 2],
            magic=1,
            compression=Compression.GZIP,
            log_append_time=True,
        )
    )
    assert [r.timestamp for r in iter_legacy_records(data)] == [2, 2]


def test_crc_mismatch() -> None:
    data = bytearray(encode_message_set([b"hello"], magic=1))
    data[-1] ^= 1
    with pytest.raises(RemoteProtocolError, match="CRC"):
        list(iter_legacy_records(data))
    assert [bytes(r.value) for r in iter_legacy_records(data, verify_crc=False)] == [b"helln"]  # type: ignore[arg-type]


def _message(magic: int, attributes: int, value: bytes, offset: int = 0) -> bytes:
    body = (
        bytes((magic, attributes))
        + (struct.pack(">q", 0) if magic else b"")
        + b"\xff\xff\xff\xff"
        + struct.pack(">i", len(value))
        + value
    )
    return struct.pack(">qi", offset, 4 + len(body)) + struct.pack(">I", zlib.crc32(body)) + body


def test_nested_compression_rejected() -> None:
    inner = encode_message_set([b"x"], magic=1, compression=Compression.GZIP)
    outer = _message(1, Compression.GZIP, bytes(__import__("cramjam").gzip.compress(inner)))
    with pytest.raises(RemoteProtocolError, match="nested"):
        list(iter_legacy_records(outer))


def test_zstd_not_allowed_before_magic_2() -> None:
    with pytest.raises(LocalProtocolError):
        encode_message_set([b"x"], magic=1, compression=Compression.ZSTD)
    with pytest.raises(RemoteProtocolError):
        list(iter_legacy_records(_message(1, 4, b"junk")))


def test_partial_tail_and_bad_sizes() -> None:
    data = encode_message_set([b"a", b"b"], magic=0)
    assert len(list(iter_legacy_records(data[:-3]))) == 1
    with pytest.raises(RemoteProtocolError):
        list(iter_legacy_records(data[:-3], allow_partial=False))
    bad = bytearray(data)
    struct.pack_into(">i", bad, 8, 3)
    with pytest.raises(RemoteProtocolError):
        list(iter_legacy_records(bad))


def test_mixed_record_set() -> None:
    data = encode_message_set([b"old"], magic=1, base_offset=0) + encode_batch(
        [b"new"], base_offset=1
    )
    got = [(r.offset, r.value) for r in iter_record_set_records(data)]
    assert [(o, None if v is None else bytes(v)) for o, v in got] == [(0, b"old"), (1, b"new")]
