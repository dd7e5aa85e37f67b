"""The C record walker and the Python decoders agree on every batch.

The broker validates each Produce with ``_walk.c`` where it is built (as ``make``
builds it) and with the columnar decoders otherwise. Both must accept the same
batches with the same summary, and reject the same ones for the same reason:
here on valid batches of every shape and on batches whose records section is
mutated byte by byte (the frame and CRC repaired, so only the records are wrong).
"""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.records import (
    BatchErrorReason,
    InvalidRecordBatch,
    RecordBatch,
    RecordBatchBuilder,
    RecordSummary,
    _broker,
    validate_records,
)

BYTES = st.binary(max_size=40)
RECORD = st.tuples(
    st.none() | BYTES,                                   # key
    st.none() | BYTES,                                   # value
    st.lists(st.tuples(st.text(max_size=8), st.none() | BYTES), max_size=3),  # headers
    st.integers(-5, 10**6),                              # timestamp delta
)


def test_the_walker_is_built() -> None:
    """``make`` compiles it; without it the broker validates several times slower."""
    assert _broker._walk is not None


def _build(records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]],
           base_timestamp: int = 1_700_000_000_000) -> bytearray:
    b = RecordBatchBuilder(base_timestamp=base_timestamp)
    for key, value, headers, delta in records:
        b.append(value, key=key, headers=headers, timestamp=base_timestamp + delta)
    return bytearray(b.build())


def _repair(data: bytearray) -> bytearray:
    """Fix the batch length and CRC after the records section changed."""
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return data


def _outcome(data: bytearray, native: bool, keys: bool) -> RecordSummary | BatchErrorReason:
    batch = RecordBatch.from_buffer(data)
    try:
        return validate_records(batch, require_keys=keys, native=native)
    except InvalidRecordBatch as exc:
        return exc.reason


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, min_size=1, max_size=12), st.booleans())
def test_valid_batches_agree(records: list, keys: bool) -> None:  # type: ignore[type-arg]
    data = _build(records)
    native, python = _outcome(data, True, keys), _outcome(data, False, keys)
    assert native == python
    if isinstance(native, RecordSummary):
        base = 1_700_000_000_000
        assert native.count == len(records)
        assert native.newest == base + max(r[3] for r in records)
        assert native.oldest == base + min(r[3] for r in records)


# A run of same-shape records takes the Python side's strided path.
SAME_SHAPE = st.integers(8, 40).map(
    lambda n: [(b"k%03d" % i, b"v" * 20, [], i) for i in range(n)])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(RECORD, min_size=1, max_size=8) | SAME_SHAPE, st.data())
def test_mutated_records_agree(records: list, data: st.DataObject) -> None:  # type: ignore[type-arg]
    batch = _build(records)
    section = 61   # the records start after the 61-byte batch header
    edits = data.draw(st.lists(st.tuples(
        st.sampled_from(["flip", "insert", "delete"]),
        st.integers(section, len(batch) - 1), st.integers(0, 255)), min_size=1, max_size=3))
    for kind, at, byte in edits:
        at = min(at, len(batch) - 1)
        if kind == "flip":
            batch[at] = byte
        elif kind == "insert":
            batch[at:at] = bytes([byte])
        elif len(batch) > section + 1:
            del batch[at]
    _repair(batch)
    keys = data.draw(st.booleans())
    assert _outcome(batch, True, keys) == _outcome(batch, False, keys)


@pytest.mark.parametrize("native", [True, False])
def test_each_check_names_its_reason(native: bool) -> None:
    good = _build([(b"k", b"v", [("h", b"x")], 0), (None, b"w", [], 5)])
    assert _outcome(good, native, False) == RecordSummary(2, 1_700_000_000_005,
                                                          1_700_000_000_000)
    assert _outcome(good, native, True) is BatchErrorReason.MISSING_KEY
    # the second record's offset delta (after length, attributes, timestamp delta)
    gap = bytearray(good)
    second = 61 + 1 + good[61] // 2
    assert gap[second + 3] == 2   # zigzag(1)
    gap[second + 3] = 4           # zigzag(2)
    assert _outcome(_repair(gap), native, False) is BatchErrorReason.OFFSETS_NOT_SEQUENTIAL
    short = bytearray(good[:-1])
    assert _outcome(_repair(short), native, False) is BatchErrorReason.MALFORMED_RECORDS
    extra = bytearray(good) + b"\x00"
    assert _outcome(_repair(extra), native, False) is BatchErrorReason.MALFORMED_RECORDS
