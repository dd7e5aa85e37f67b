"""Keyed records of varied lengths take the column encoder (``_keyed_parts``), or
numba's loop (``_jit``) where it is installed: every test runs on both paths.

Its output must be byte for byte what the general encoder writes for the same
records (forced here by passing an all-empty headers column), and decode back
to the same keys, values, offsets and timestamps, whatever the lengths (one-
and two-byte varints, across the 4 KiB limit of the column path), the number
of records (offset-delta varints of one, two and three bytes) and the
timestamp deltas (the one-byte fast case and beyond).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kaflite.protocol.records import RecordBatch, encode_batch, encode_records

pytestmark = pytest.mark.usefixtures("codec_path")

BASE_TS = 1_700_000_000_000

lengths = st.one_of(st.integers(0, 70), st.integers(60, 9000))
records = st.lists(st.tuples(lengths, lengths), min_size=1, max_size=80)


def _check(keys: list[bytes], values: list[bytes], deltas: list[int] | None) -> None:
    n = len(values)
    section = encode_records(values, keys=keys, timestamp_deltas=deltas)
    general = encode_records(values, keys=keys, headers=[None] * n, timestamp_deltas=deltas)
    assert section == general
    stamps = [BASE_TS + d for d in deltas] if deltas is not None else None
    data = encode_batch(values, keys=keys, timestamps=stamps, base_timestamp=BASE_TS)
    cols = RecordBatch.from_buffer(data).columns()
    assert [bytes(k) for k in cols.keys if k is not None] == keys
    assert [bytes(v) for v in cols.values if v is not None] == values
    assert cols.offsets == list(range(n))
    assert cols.timestamps == (stamps if stamps is not None else [BASE_TS] * n)
    one_by_one = list(RecordBatch.from_buffer(data).iter_one_by_one())
    assert [bytes(r.value) for r in one_by_one if r.value is not None] == values


@settings(max_examples=150, deadline=None)
@given(records, st.booleans(), st.integers(0, 200))
def test_keyed_varied_round_trip(lens: list[tuple[int, int]], stamped: bool, spread: int
                                 ) -> None:
    keys = [bytes([i % 251]) * k for i, (k, _) in enumerate(lens)]
    values = [bytes([(i * 7) % 253]) * v for i, (_, v) in enumerate(lens)]
    deltas = [(i * 13) % (spread + 1) for i in range(len(lens))] if stamped else None
    _check(keys, values, deltas)


def test_offset_delta_widths() -> None:
    """Enough records for offset deltas of one, two and three varint bytes."""
    n = 9000
    keys = [b"key-%d" % (i % 997) for i in range(n)]
    values = [b"v" * (i % 150) for i in range(n)]
    _check(keys, values, None)
    _check(keys, values, [i % 64 for i in range(n)])


@settings(max_examples=60, deadline=None)
@given(st.lists(lengths, min_size=1, max_size=80), lengths, st.booleans())
def test_keyed_values_of_one_length(key_lens: list[int], value_len: int, stamped: bool
                                    ) -> None:
    """Values all of one length take their own branch (one size, one varint piece)."""
    keys = [bytes([i % 251]) * k for i, k in enumerate(key_lens)]
    values = [bytes([(i * 7) % 253]) * value_len for i in range(len(key_lens))]
    _check(keys, values, [i % 64 for i in range(len(keys))] if stamped else None)


def test_offset_delta_widths_one_value_length() -> None:
    n = 9000
    keys = [b"key-%d" % (i % 997) for i in range(n)]
    _check(keys, [b"v" * 100] * n, None)
