"""Batches written by librdkafka (captured by tools/capture_batches.py) decode exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kaflite.protocol.records import (
    Compression,
    iter_batches,
    validate_record_set,
    validate_records,
)

FIXTURES = Path(__file__).parent / "fixtures"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _text(v: memoryview | None) -> str | None:
    return None if v is None else bytes(v).decode()


@pytest.mark.parametrize("codec", list(CODECS))
def test_librdkafka_batch(codec: str) -> None:
    data = (FIXTURES / f"librdkafka-{codec}.bin").read_bytes()
    meta = json.loads((FIXTURES / f"librdkafka-{codec}.json").read_text())
    expected = meta["records"]
    batches = validate_record_set(data)  # framing, CRC-32C, counts
    assert all(b.compression == CODECS[codec] for b in batches)
    for b in batches:
        validate_records(b)
    got = [r for b in iter_batches(data, allow_partial=False) for r in b.records()]
    assert [r.offset for r in got] == list(range(len(expected)))
    assert [_text(r.key) for r in got] == [e["key"] for e in expected]
    assert [_text(r.value) for r in got] == [e["value"] for e in expected]
    assert [[[k, _text(v)] for k, v in r.headers] for r in got] == [e["headers"] for e in expected]
    first = batches[0]
    assert all(first.base_timestamp <= r.timestamp <= batches[-1].max_timestamp for r in got)


def test_librdkafka_snappy_is_raw_and_ours_is_xerial() -> None:
    # librdkafka writes a raw snappy block; the decoder tells it from xerial framing
    data = (FIXTURES / "librdkafka-snappy.bin").read_bytes()
    (batch,) = list(iter_batches(data))
    assert not bytes(batch.buffer[61:69]).startswith(b"\x82SNAPPY")
    assert batch.compression == Compression.SNAPPY
