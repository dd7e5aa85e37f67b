"""Fuzz: mutated batch bytes only ever raise RemoteProtocolError, and stay small in memory."""

from __future__ import annotations

import contextlib
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.records import (
    Compression,
    encode_batch,
    encode_message_set,
    iter_legacy_records,
    iter_record_set_records,
    validate_record_set,
    validate_records,
)

SEEDS = [
    encode_batch(
        [b"value-%d" % i * (i % 4) for i in range(12)],
        keys=[None if i % 3 else b"k%d" % i for i in range(12)],
        headers=[[("h", b"v")] if i % 2 else None for i in range(12)],
        timestamps=[1000 + i for i in range(12)],
        compression=codec,
    )
    for codec in Compression
] + [
    encode_message_set(
        [b"a" * 20, None, b"c"], keys=[b"k", None, b""], magic=magic, compression=codec
    )
    for magic in (0, 1)
    for codec in (0, 1, 2, 3)
]

LIMIT = 1 << 20


def _mutate(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    buf = bytearray(data)
    for pos, value in edits:
        buf[pos % len(buf)] = value
    if cut is not None:
        del buf[cut % (len(buf) + 1) :]
    return bytes(buf)


def _all_records(data: bytes) -> None:
    for record in iter_record_set_records(data, decompression_limit=LIMIT):
        _ = (record.offset, record.key, record.value, record.headers)


def _validate(data: bytes) -> None:
    for batch in validate_record_set(data, from_client=False, decompression_limit=LIMIT):
        validate_records(batch)


def _legacy_without_crc(data: bytes) -> None:
    # most mutations break the CRC; skip that check so the decoder itself is fuzzed
    for record in iter_legacy_records(data, verify_crc=False, limit=LIMIT):
        _ = (record.offset, record.key, record.value)


def _decode_everything(data: bytes) -> None:
    for step in (_all_records, _validate, _legacy_without_crc):
        with contextlib.suppress(RemoteProtocolError):
            step(data)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.sampled_from(SEEDS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
    cut=st.one_of(st.none(), st.integers(0, 10_000)),
)
def test_mutated_batches_raise_only_protocol_errors(
    seed: bytes, edits: list[tuple[int, int]], cut: int | None
) -> None:
    data = _mutate(seed, edits, cut)
    tracemalloc.start()
    try:
        _decode_everything(data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * LIMIT


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_random_bytes(data: bytes) -> None:
    _decode_everything(data)
