"""Control batches: transaction markers built, parsed and checked against aiokafka."""

from __future__ import annotations

import pytest

from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.records import (
    ControlRecordType,
    EndTxnMarker,
    RecordBatch,
    encode_end_txn_marker,
    encode_end_txn_marker_batch,
    parse_control_type,
    parse_end_txn_marker,
    read_end_txn_marker,
)


@pytest.mark.parametrize("commit", [True, False])
def test_marker_batch_round_trip(commit: bool) -> None:
    data = encode_end_txn_marker_batch(
        commit,
        producer_id=4000,
        producer_epoch=3,
        coordinator_epoch=17,
        base_offset=55,
        timestamp=123,
    )
    batch = RecordBatch.from_buffer(data)
    assert batch.crc_ok()
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_offset) == (4000, 3, 55)
    marker = read_end_txn_marker(batch)
    assert marker == EndTxnMarker(
        ControlRecordType.COMMIT if commit else ControlRecordType.ABORT, 17
    )
    assert marker.is_commit is commit
    (record,) = list(batch)
    assert bytes(record.key) == (b"\x00\x00\x00\x01" if commit else b"\x00\x00\x00\x00")  # type: ignore[arg-type]
    assert bytes(record.value) == b"\x00\x00\x00\x00\x00\x11"  # type: ignore[arg-type]


def test_marker_read_by_aiokafka() -> None:
    mod = pytest.importorskip("aiokafka.record.default_records")
    data = encode_end_txn_marker_batch(False, producer_id=1, producer_epoch=0, coordinator_epoch=2)
    batch = mod.DefaultRecordBatch(data)
    assert batch.is_control_batch and batch.is_transactional
    (record,) = list(batch)
    assert record.key == b"\x00\x00\x00\x00"


def test_newer_versions_are_read_by_their_prefix() -> None:
    assert parse_control_type(b"\x00\x01\x00\x01extra") is ControlRecordType.COMMIT
    m = parse_end_txn_marker(b"\x00\x00\x00\x00", b"\x00\x01\x00\x00\x00\x05tail")
    assert m == EndTxnMarker(ControlRecordType.ABORT, 5, 1)
    assert parse_control_type(b"\x00\x00\x00\x63") is ControlRecordType.UNKNOWN


@pytest.mark.parametrize(
    "key,value",
    [
        (None, b"\x00\x00\x00\x00\x00\x00"),
        (b"\x00\x00", b"\x00\x00\x00\x00\x00\x00"),
        (b"\xff\xff\x00\x01", b"\x00\x00\x00\x00\x00\x00"),
        (b"\x00\x00\x00\x01", None),
        (b"\x00\x00\x00\x01", b"\x00\x00\x00"),
        (b"\x00\x00\x00\x02", b"\x00\x00\x00\x00\x00\x00"),
    ],
)
def test_malformed_markers(key: bytes | None, value: bytes | None) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_end_txn_marker(key, value)


def test_encode_marker_key_value() -> None:
    key, value = encode_end_txn_marker(EndTxnMarker(ControlRecordType.COMMIT, 2**31 - 1))
    assert key == b"\x00\x00\x00\x01" and value == b"\x00\x00\x7f\xff\xff\xff"
