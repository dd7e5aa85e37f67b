"""The strided fast path decodes exactly what the record-by-record decoder does."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.records import RecordBatch, encode_batch
from kaflite.protocol.records._decode import RecordColumns, decode_columns
from kaflite.protocol.records._stride import decode_columns_fast


def _both(data: bytes) -> tuple[RecordColumns, RecordColumns]:
    batch = RecordBatch.from_buffer(data)
    buf = batch.records_buffer()
    args = (buf, batch.record_count, batch.base_offset, batch.base_timestamp)
    slow, end_slow = decode_columns(*args)
    fast, end_fast = decode_columns_fast(*args)
    assert end_slow == end_fast == len(buf)
    return slow, fast


def _same(a: RecordColumns, b: RecordColumns) -> None:
    assert a.offsets == b.offsets
    assert a.timestamps == b.timestamps
    assert [None if k is None else bytes(k) for k in a.keys] == [
        None if k is None else bytes(k) for k in b.keys
    ]
    assert [None if v is None else bytes(v) for v in a.values] == [
        None if v is None else bytes(v) for v in b.values
    ]
    assert a.headers == b.headers


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(16, 3000),
    value_len=st.integers(0, 300),
    key_len=st.one_of(st.none(), st.integers(0, 20)),
    odd=st.sets(st.integers(0, 2999), max_size=5),
    ts_deltas=st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=4),
    null_values=st.booleans(),
)
def test_fast_path_matches_generic(
    n: int,
    value_len: int,
    key_len: int | None,
    odd: set[int],
    ts_deltas: list[int],
    null_values: bool,
) -> None:
    values: list[bytes | None] = [
        bytes([i % 256]) * (value_len + (1 if i in odd else 0)) for i in range(n)
    ]
    if null_values:
        values = [None if i not in odd else v for i, v in enumerate(values)]
    keys = None if key_len is None else [bytes([i % 7]) * key_len for i in range(n)]
    timestamps = [10**12 + ts_deltas[(i // 50) % len(ts_deltas)] for i in range(n)]
    slow, fast = _both(encode_batch(values, keys=keys, timestamps=timestamps))
    _same(slow, fast)


def test_fast_path_across_offset_delta_widths() -> None:
    # deltas 63/64 and 8191/8192 change the varint width of the offset delta
    values = [b"%09d" % i for i in range(20_000)]
    slow, fast = _both(encode_batch(values, base_offset=7, base_timestamp=5))
    _same(slow, fast)
    assert fast.offsets[-1] == 7 + 19_999


def test_fast_path_with_headers_in_the_middle() -> None:
    n = 500
    headers = [[("h", b"x")] if i == 250 else None for i in range(n)]
    slow, fast = _both(encode_batch([b"v" * 10] * n, headers=headers, base_timestamp=0))
    _same(slow, fast)


def test_fast_path_rejects_a_bad_record_like_the_generic_path() -> None:
    data = bytearray(encode_batch([b"abcdefgh"] * 200, base_timestamp=0))
    # corrupt the length varint of record 150: the generic path must take over and raise.
    # Records 0-63 take 15 bytes, later ones 16 (two-byte offset delta).
    pos = 61 + 64 * 15 + (150 - 64) * 16
    assert data[pos] == 2 * 15  # zigzag length of a 15-byte body
    data[pos] = 0x7E
    with pytest.raises(RemoteProtocolError):
        RecordBatch.from_buffer(data).columns()


@pytest.mark.parametrize("copy", [False, True])
@pytest.mark.parametrize("shift", [0, 437, 990])
def test_runs_of_keys_that_change_length(copy: bool, shift: int) -> None:
    """Keys key-0..key-999 make runs of 10, 90 and 900 records, wherever the batch
    starts in the cycle; a changed value right after the probe and after the first
    window must end a run there. Copies are cut by struct formats kept across
    runs and batches, which must fit every run's position."""
    n = 5000
    keys = [b"key-%d" % ((i + shift) % 1000) for i in range(n)]
    values = [b"v" * (101 if i in (1032, 1056 + 1024, 4000) else 100) for i in range(n)]
    for _ in range(2):   # (the second time with the formats of the first kept)
        batch = RecordBatch.from_buffer(encode_batch(values, keys=keys, base_timestamp=3))
        buf = batch.records_buffer()
        args = (buf, batch.record_count, batch.base_offset, batch.base_timestamp)
        slow, _ = decode_columns(*args)
        fast, end = decode_columns_fast(*args, copy=copy)
        assert end == len(buf)
        _same(slow, fast)
        if copy:
            assert all(type(v) is bytes for v in fast.values)


@pytest.mark.parametrize("odd", [32, 1024])
def test_a_run_ends_at_a_window_start(odd: int) -> None:
    """The record that starts a window (after the probe, after the first window) is
    compared with the run's first record, not taken as the pattern itself."""
    values = [b"v" * (140 if i == odd else 100) for i in range(3000)]
    slow, fast = _both(encode_batch(values, keys=[b"k"] * 3000, base_timestamp=0))
    _same(slow, fast)


def test_batches_with_other_base_timestamps() -> None:
    """One-byte timestamp deltas go through a table of the batch's timestamps, kept
    for the next run: a batch with another base timestamp must not use it."""
    for base in (1_700_000_000_000, 1_700_000_000_500, 5):
        stamps = [base + (i * 7) % 60 for i in range(400)]
        slow, fast = _both(encode_batch([b"v" * 30] * 400, timestamps=stamps))
        _same(slow, fast)
        assert fast.timestamps == stamps


@pytest.mark.parametrize("copy", [False, True])
def test_a_run_cut_by_the_offset_delta_widening_stays_strided(
        copy: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys key-37.. make key-100 the record at offset delta 63, the last whose delta
    is one byte: its run is that one record. It and every later run are decoded
    strided; the record-by-record decoder is not called (it took the next 64)."""
    import kaflite.protocol.records._stride as stride

    n = 3000
    keys = [b"key-%d" % ((i + 37) % 1000) for i in range(n)]
    batch = RecordBatch.from_buffer(encode_batch([b"v" * 100] * n, keys=keys,
                                                 base_timestamp=3))
    args = (batch.records_buffer(), batch.record_count, batch.base_offset,
            batch.base_timestamp)
    slow, _ = decode_columns(*args)
    calls: list[int] = []

    def counted(buf: memoryview, count: int, *rest: object) -> tuple[RecordColumns, int]:
        calls.append(count)
        return decode_columns(buf, count, *rest)   # type: ignore[arg-type]

    monkeypatch.setattr(stride, "decode_columns", counted)
    fast, _ = decode_columns_fast(*args, copy=copy)
    _same(slow, fast)
    assert calls == []
