"""Broker-side helpers: validation with precise reasons, in-place rewrites."""

from __future__ import annotations

import struct

import pytest

from kaflite.protocol.errors import LocalProtocolError, RemoteProtocolError
from kaflite.protocol.records import (
    BatchErrorReason,
    Compression,
    InvalidRecordBatch,
    RecordBatch,
    assign_offsets,
    encode_batch,
    encode_end_txn_marker_batch,
    encode_message_set,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batch,
    validate_record_set,
    validate_records,
)


def _batch(n: int = 3, **kw: object) -> bytearray:
    return bytearray(encode_batch([b"value-%d" % i for i in range(n)], base_timestamp=1000, **kw))  # type: ignore[arg-type]


def _reason(data: bytes | bytearray, **kw: object) -> BatchErrorReason:
    with pytest.raises(InvalidRecordBatch) as info:
        validate_batch(data, **kw)  # type: ignore[arg-type]
    assert isinstance(info.value, RemoteProtocolError)
    return info.value.reason


def test_valid_batch_passes_and_returns_header() -> None:
    batch = validate_batch(_batch(5, base_offset=0))
    assert batch.record_count == 5


def test_crc_mismatch_is_corrupt_message() -> None:
    data = _batch()
    data[-2] ^= 0x01  # a payload byte
    assert _reason(data) is BatchErrorReason.CRC
    assert BatchErrorReason.CRC.error_name == "CORRUPT_MESSAGE"
    assert not RecordBatch.from_buffer(data).crc_ok()


def test_crc_covers_attributes() -> None:
    data = _batch()
    data[22] ^= 0x10  # flip the transactional bit
    assert _reason(data) is BatchErrorReason.CRC


def test_truncated_and_length_errors() -> None:
    data = _batch()
    assert _reason(data[:40]) is BatchErrorReason.TRUNCATED
    assert _reason(data[:-1]) is BatchErrorReason.TRUNCATED
    bad = bytearray(data)
    struct.pack_into(">i", bad, 8, 10)
    assert _reason(bad) is BatchErrorReason.BATCH_LENGTH


def test_magic_errors() -> None:
    data = _batch()
    data[16] = 7
    assert _reason(data) is BatchErrorReason.MAGIC
    legacy = encode_message_set([b"a"], magic=1)
    reason = _reason(legacy)
    assert reason is BatchErrorReason.LEGACY_MAGIC
    assert reason.error_name == "UNSUPPORTED_FOR_MESSAGE_FORMAT"


def test_size_limit() -> None:
    data = _batch(100)
    assert _reason(data, max_batch_size=len(data) - 1) is BatchErrorReason.TOO_LARGE
    assert BatchErrorReason.TOO_LARGE.error_name == "MESSAGE_TOO_LARGE"
    validate_batch(data, max_batch_size=len(data))


def test_compressed_records_as_large_as_the_batch_limit_are_accepted() -> None:
    """A compressed batch decompresses to at most record_count x (max.message.bytes plus
    a record's framing): three records whose values are exactly the default 1 MiB limit
    read (franz-go's TestConsumeMaxDecompressBatchBytes produced them; CORRUPT_MESSAGE
    before), a fourth record's worth more is a bomb."""
    limit = 1048588    # Kafka's default message.max.bytes
    value = bytes(1 << 20)
    data = encode_batch([value] * 3, base_timestamp=1000, compression=Compression.GZIP)
    assert len(data) < limit
    batch = validate_batch(data, max_batch_size=limit)
    assert [len(v or b"") for v in batch.columns().values] == [1 << 20] * 3
    validate_records(batch)
    bomb = encode_batch([bytes(3 * limit)], base_timestamp=1000, compression=Compression.GZIP)
    with pytest.raises(InvalidRecordBatch) as info:
        validate_records(validate_batch(bomb, max_batch_size=limit))
    assert info.value.reason is BatchErrorReason.BAD_COMPRESSION


def _recrc(data: bytearray) -> None:
    import crc32c

    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))


@pytest.mark.parametrize("count,last_delta", [(0, 2), (2, 2), (3, 7), (-1, 2)])
def test_record_count_vs_last_offset_delta(count: int, last_delta: int) -> None:
    data = _batch(3)
    struct.pack_into(">i", data, 57, count)
    struct.pack_into(">i", data, 23, last_delta)
    _recrc(data)
    reason = _reason(data)
    assert reason is BatchErrorReason.RECORD_COUNT
    assert reason.error_name == "INVALID_RECORD"


def test_count_that_cannot_fit_uncompressed() -> None:
    data = _batch(3)
    struct.pack_into(">i", data, 57, 1000)
    struct.pack_into(">i", data, 23, 999)
    _recrc(data)
    assert _reason(data) is BatchErrorReason.RECORD_COUNT


def test_control_batch_from_client_rejected() -> None:
    marker = encode_end_txn_marker_batch(True, producer_id=1, producer_epoch=0, coordinator_epoch=0)
    assert _reason(marker) is BatchErrorReason.CONTROL_FROM_CLIENT
    validate_batch(marker, from_client=False)


def test_deep_validation() -> None:
    validate_records(validate_batch(_batch(4, compression=Compression.ZSTD)))
    # offsets 0, 2 with lastOffsetDelta patched to 1: framing passes, records fail
    from kaflite.protocol.records import RecordBatchBuilder

    b = RecordBatchBuilder(base_timestamp=0)
    b.append(b"a", offset_delta=0)
    b.append(b"b", offset_delta=2)
    data = bytearray(b.build())
    struct.pack_into(">i", data, 23, 1)
    _recrc(data)
    with pytest.raises(InvalidRecordBatch) as info:
        validate_records(validate_batch(data))
    assert info.value.reason is BatchErrorReason.OFFSETS_NOT_SEQUENTIAL
    with pytest.raises(InvalidRecordBatch) as info:
        validate_records(validate_batch(_batch(2)), require_keys=True)
    assert info.value.reason is BatchErrorReason.MISSING_KEY


def test_deep_validation_reports_malformed_records() -> None:
    data = _batch(2)
    data[61] = 0x7E  # record length varint now claims 63 bytes
    _recrc(data)
    with pytest.raises(InvalidRecordBatch) as info:
        validate_records(validate_batch(data))
    assert info.value.reason is BatchErrorReason.MALFORMED_RECORDS


def test_set_base_offset_keeps_crc_valid() -> None:
    data = _batch(3)
    set_base_offset(data, 123_456_789_000)
    batch = validate_batch(data)
    assert batch.base_offset == 123_456_789_000
    assert batch.columns().offsets == [123_456_789_000 + i for i in range(3)]


def test_set_partition_leader_epoch_keeps_crc_valid() -> None:
    data = _batch(3)
    set_partition_leader_epoch(data, 42)
    assert validate_batch(data).partition_leader_epoch == 42


def test_set_log_append_time_recomputes_crc() -> None:
    data = _batch(3, compression=Compression.GZIP)
    set_log_append_time(data, 99_999)
    batch = validate_batch(data)
    assert batch.timestamp_type == 1
    assert batch.max_timestamp == 99_999
    assert batch.compression == Compression.GZIP
    assert batch.columns().timestamps == [99_999] * 3


def test_rewrites_need_a_writable_buffer() -> None:
    with pytest.raises(LocalProtocolError):
        set_base_offset(memoryview(bytes(_batch())), 5)


def test_assign_offsets_over_a_record_set() -> None:
    data = _batch(3) + _batch(2) + _batch(1)
    batches = validate_record_set(data)
    assert [b.record_count for b in batches] == [3, 2, 1]
    nxt = assign_offsets(data, 1000, partition_leader_epoch=9)
    assert nxt == 1006
    after = validate_record_set(data)
    assert [b.base_offset for b in after] == [1000, 1003, 1005]
    assert {b.partition_leader_epoch for b in after} == {9}


def test_assign_offsets_does_not_write_past_a_bad_batch() -> None:
    data = _batch(3) + _batch(2)[:-3]
    before = bytes(data)
    with pytest.raises(RemoteProtocolError):
        assign_offsets(data, 50)
    assert data[61:] == before[61:]  # only the first (whole) batch was stamped


def test_record_set_rejects_trailing_garbage() -> None:
    with pytest.raises(InvalidRecordBatch):
        validate_record_set(_batch(1) + b"\x00" * 10)
