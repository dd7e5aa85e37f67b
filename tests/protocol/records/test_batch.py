"""v2 record batches: encode/decode round trips, header fields, lazy and bulk paths."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import LocalProtocolError, RemoteProtocolError
from kaflite.protocol.records import (
    Compression,
    RecordBatch,
    RecordBatchBuilder,
    encode_batch,
    iter_batches,
)

CODECS = list(Compression)

keys_st = st.one_of(st.none(), st.binary(max_size=40))
values_st = st.one_of(st.none(), st.binary(max_size=300))
header_st = st.lists(
    st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)


def _b(view: memoryview | None) -> bytes | None:
    return None if view is None else bytes(view)


def _headers(h: tuple[tuple[str, memoryview | None], ...]) -> list[tuple[str, bytes | None]]:
    return [(k, _b(v)) for k, v in h]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(
        st.tuples(keys_st, values_st, header_st, st.integers(-(2**40), 2**40)), max_size=40
    ),
    codec=st.sampled_from(CODECS),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(0, 2**50),
    transactional=st.booleans(),
    pid=st.integers(-1, 2**63 - 1),
)
def test_encode_batch_round_trip(
    records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
    codec: Compression,
    base_offset: int,
    base_timestamp: int,
    transactional: bool,
    pid: int,
) -> None:
    values = [r[1] for r in records]
    keys = [r[0] for r in records]
    headers = [r[2] for r in records]
    timestamps = [base_timestamp + r[3] for r in records]
    data = encode_batch(
        values,
        keys=keys,
        headers=headers,
        timestamps=timestamps,
        base_offset=base_offset,
        compression=codec,
        producer_id=pid,
        producer_epoch=7,
        base_sequence=11,
        transactional=transactional,
        partition_leader_epoch=3,
    )
    batch = RecordBatch.from_buffer(data)
    assert batch.crc_ok()
    assert batch.size_in_bytes == len(data)
    assert batch.compression == codec
    assert batch.is_transactional is transactional
    assert not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, 7, 11)
    assert batch.partition_leader_epoch == 3
    assert batch.record_count == len(records)
    if records:
        assert batch.max_timestamp == max(timestamps)
        assert batch.last_offset == base_offset + len(records) - 1
    cols = batch.columns()
    assert cols.offsets == [base_offset + i for i in range(len(records))]
    assert cols.timestamps == timestamps
    assert [_b(k) for k in cols.keys] == keys
    assert [_b(v) for v in cols.values] == values
    assert [_headers(h) for h in cols.headers] == [[(k, v) for k, v in h] for h in headers]
    lazy = list(batch)
    assert [r.offset for r in lazy] == cols.offsets
    assert [_b(r.value) for r in lazy] == values
    one_by_one = list(batch.iter_one_by_one())
    assert [(r.offset, r.timestamp, _b(r.key), _b(r.value)) for r in one_by_one] == [
        (r.offset, r.timestamp, _b(r.key), _b(r.value)) for r in lazy
    ]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.binary(max_size=200), min_size=1, max_size=300),
    codec=st.sampled_from(CODECS),
)
def test_values_only_fast_path(values: list[bytes], codec: Compression) -> None:
    data = encode_batch(values, base_timestamp=1_700_000_000_000, compression=codec)
    cols = RecordBatch.from_buffer(data).columns()
    assert [bytes(v) for v in cols.values] == values  # type: ignore[arg-type]
    assert cols.keys == [None] * len(values)
    assert cols.timestamps == [1_700_000_000_000] * len(values)


def test_large_batch_crosses_varint_widths() -> None:
    # offset deltas 63/64 and 8191/8192 change the varint width; >16384 leaves the table
    values = [bytes([i % 251]) * (i % 300) for i in range(20_000)]
    data = encode_batch(values, keys=[None] * 20_000, base_offset=5)
    cols = RecordBatch.from_buffer(data).columns()
    assert cols.offsets[-1] == 5 + 19_999
    assert [bytes(v) for v in cols.values] == values  # type: ignore[arg-type]


def test_values_returned_as_views_of_the_buffer() -> None:
    data = bytearray(encode_batch([b"hello", b"world"]))
    cols = RecordBatch.from_buffer(data).columns()
    assert isinstance(cols.values[0], memoryview)
    assert cols.values[0].obj is data
    data[-6] = ord("W")  # the second value's first byte (a header count follows)
    assert bytes(cols.values[1]) == b"World"  # type: ignore[arg-type]


def test_builder_matches_encode_batch() -> None:
    b = RecordBatchBuilder(
        base_offset=100,
        compression=Compression.NONE,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
    )
    for i in range(50):
        b.append(
            b"v%d" % i,
            key=b"k%d" % i if i % 2 else None,
            timestamp=1000 + i,
            headers=[("a", b"b")] if i % 3 == 0 else None,
        )
    built = b.build()
    assert b.size_in_bytes == len(built)
    expected = encode_batch(
        [b"v%d" % i for i in range(50)],
        keys=[b"k%d" % i if i % 2 else None for i in range(50)],
        headers=[[("a", b"b")] if i % 3 == 0 else None for i in range(50)],
        timestamps=[1000 + i for i in range(50)],
        base_offset=100,
        producer_id=9,
        producer_epoch=1,
        base_sequence=0,
    )
    assert built == expected


def test_builder_sparse_offset_deltas_and_size() -> None:
    b = RecordBatchBuilder(base_timestamp=10)
    for delta in (0, 5, 1_000_000, 2**31 - 1):
        b.append(b"x", offset_delta=delta)
    data = b.build()
    assert b.size_in_bytes == len(data)
    batch = RecordBatch.from_buffer(data)
    assert batch.last_offset_delta == 2**31 - 1
    assert batch.columns().offsets == [0, 5, 1_000_000, 2**31 - 1]
    with pytest.raises(LocalProtocolError):
        b.append(b"y", offset_delta=3)


def test_log_append_time_batch_reports_max_timestamp() -> None:
    data = encode_batch([b"a", b"b"], timestamps=[5, 9], log_append_time=True)
    batch = RecordBatch.from_buffer(data)
    assert batch.timestamp_type == 1
    assert batch.columns().timestamps == [9, 9]
    assert [r.timestamp for r in batch] == [9, 9]


def test_delete_horizon_flag() -> None:
    data = bytearray(encode_batch([b"a"], base_timestamp=1234))
    struct.pack_into(">h", data, 21, 0x40)
    batch = RecordBatch.from_buffer(data)
    assert batch.delete_horizon_ms == 1234
    assert RecordBatch.from_buffer(encode_batch([b"a"], base_timestamp=1)).delete_horizon_ms is None


def test_iter_batches_stops_at_partial_tail() -> None:
    one = encode_batch([b"a"], base_offset=0)
    two = encode_batch([b"b", b"c"], base_offset=1)
    data = one + two
    assert [b.base_offset for b in iter_batches(data + two[:30])] == [0, 1]
    assert [b.base_offset for b in iter_batches(data + two[:-1])] == [0, 1]
    with pytest.raises(RemoteProtocolError):
        list(iter_batches(data + two[:-1], allow_partial=False))


def test_record_length_mismatch_is_detected() -> None:
    data = bytearray(encode_batch([b"abc"]))
    data[61] += 2  # the record length varint (zigzag): claim one more byte
    with pytest.raises(RemoteProtocolError):
        RecordBatch.from_buffer(data).columns()


def test_trailing_bytes_after_records() -> None:
    data = bytearray(encode_batch([b"abc", b"def"]))
    struct.pack_into(">i", data, 57, 1)  # record count 1 while 2 are present
    with pytest.raises(RemoteProtocolError, match="left after"):
        RecordBatch.from_buffer(data).columns()


def test_huge_record_count_fails_before_allocating() -> None:
    data = bytearray(encode_batch([b"abc"]))
    struct.pack_into(">i", data, 57, 2**31 - 1)
    with pytest.raises(RemoteProtocolError, match="cannot fit"):
        RecordBatch.from_buffer(data).columns()


def test_wrong_magic_rejected() -> None:
    data = bytearray(encode_batch([b"abc"]))
    data[16] = 3
    with pytest.raises(RemoteProtocolError, match="magic"):
        RecordBatch.from_buffer(data)


def test_encode_rejects_bad_input() -> None:
    with pytest.raises(LocalProtocolError):
        encode_batch([b"a"], producer_id=2**63)
    with pytest.raises(LocalProtocolError):
        encode_batch([b"a", b"b"], keys=[None])
    with pytest.raises(LocalProtocolError):
        encode_batch([b"a"], compression=9)
    with pytest.raises(LocalProtocolError):
        encode_batch(["text"])  # type: ignore[list-item]
