"""Broker-side batch handling on raw bytes, without decoding records.

A leader appending a Produce request does not need the records themselves:
it checks each batch's framing and CRC, then stamps the batch with the
offsets it assigns (baseOffset) and its leader epoch (partitionLeaderEpoch).
Both fields lie *before* the CRC-covered range (which starts at the
attributes), so they are rewritten in place and the CRC stays valid. Setting
LogAppendTime changes the attributes and maxTimestamp, which the CRC covers,
so that one recomputes the CRC.

Validation failures raise ``InvalidRecordBatch`` (a ``RemoteProtocolError``)
whose ``reason`` names the check that failed and whose ``error_name`` is the
Kafka error code a broker should answer with, following Kafka's
``LogValidator``: a broken frame or CRC is CORRUPT_MESSAGE, a well-framed batch
with inconsistent contents is INVALID_RECORD, an oversized one
MESSAGE_TOO_LARGE, and a pre-v2 message set where v2 is required
UNSUPPORTED_FOR_MESSAGE_FORMAT.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from kaflite.protocol._exceptions import LocalProtocolError, RemoteProtocolError
from kaflite.protocol.records._batch import RecordBatch
from kaflite.protocol.records._compression import DEFAULT_DECOMPRESSION_LIMIT, MAX_CODEC
from kaflite.protocol.records._wire import (
    ATTRIBUTES_OFFSET,
    BASE_OFFSET_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    I16,
    I32,
    I64,
    LEADER_EPOCH_OFFSET,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    MIN_RECORD_SIZE,
    NO_TIMESTAMP,
    RECORD_FRAMING_MAX,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    U32,
    crc32c,
)

__all__ = [
    "BatchErrorReason",
    "InvalidRecordBatch",
    "RecordSummary",
    "assign_offsets",
    "batch_codec",
    "set_base_offset",
    "set_log_append_time",
    "set_partition_leader_epoch",
    "validate_batch",
    "validate_record_set",
    "validate_records",
]

BytesLike = bytes | bytearray | memoryview

WalkFn = Callable[[BytesLike, int, int], tuple[int, bool, bool, int, int]]


def _native_walker() -> WalkFn | None:
    """The C record walker, or None where it was not compiled (no C compiler at install):
    the Python decoders check the same then."""
    try:
        from kaflite.protocol.records._walk import walk
    except ImportError:
        return None
    return walk


_walk = _native_walker()


class BatchErrorReason(enum.Enum):
    """Why a batch was rejected, with the Kafka error a broker returns for it."""

    TRUNCATED = ("CORRUPT_MESSAGE", "the batch header or body is cut short")
    BATCH_LENGTH = ("CORRUPT_MESSAGE", "batchLength is out of bounds")
    MAGIC = ("CORRUPT_MESSAGE", "unknown magic byte")
    LEGACY_MAGIC = ("UNSUPPORTED_FOR_MESSAGE_FORMAT", "magic 0/1 message set where v2 is required")
    CRC = ("CORRUPT_MESSAGE", "CRC-32C mismatch")
    TOO_LARGE = ("MESSAGE_TOO_LARGE", "batch exceeds the size limit")
    RECORD_COUNT = ("INVALID_RECORD", "record count is invalid or disagrees with lastOffsetDelta")
    CONTROL_FROM_CLIENT = ("INVALID_RECORD", "clients may not write control batches")
    MALFORMED_RECORDS = ("CORRUPT_MESSAGE", "the records section does not decode")
    OFFSETS_NOT_SEQUENTIAL = ("INVALID_RECORD", "record offset deltas are not 0..n-1")
    MISSING_KEY = ("INVALID_RECORD", "a compacted topic needs a key on every record")
    COMPRESSION = ("UNSUPPORTED_COMPRESSION_TYPE", "unknown compression codec")
    BAD_COMPRESSION = ("CORRUPT_MESSAGE", "the compressed records do not decompress")

    @property
    def error_name(self) -> str:
        return self.value[0]

    @property
    def description(self) -> str:
        return self.value[1]


class InvalidRecordBatch(RemoteProtocolError):
    """A batch failed broker-side validation; see ``reason``."""

    def __init__(self, reason: BatchErrorReason, detail: str, position: int = 0,
                 record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        self.reason = reason
        self.error_name = reason.error_name
        self.position = position
        self.record_errors = record_errors    # KIP-467: (index in the batch, why)
        super().__init__(
            f"{reason.error_name}: {reason.description}: {detail} (batch at byte {position})"
        )


def _view(data: BytesLike) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def batch_codec(data: BytesLike, pos: int = 0) -> int:
    """The compression codec id of the v2 batch at ``pos`` (-1 if too short to tell)."""
    view = _view(data)
    if len(view) - pos < ATTRIBUTES_OFFSET + 2:
        return -1
    return int(view[pos + ATTRIBUTES_OFFSET + 1]) & COMPRESSION_MASK


class BatchProducer(NamedTuple):
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool


def batch_producer(data: BytesLike, pos: int = 0) -> BatchProducer | None:
    """Who wrote the v2 batch at ``pos``, from its header (None if too short to tell)."""
    view = _view(data)
    if len(view) - pos < HEADER.size:
        return None
    h = HEADER.unpack_from(view, pos)
    return BatchProducer(h[9], h[10], h[11], bool(h[5] & TRANSACTIONAL_BIT))


def validate_batch(
    data: BytesLike,
    pos: int = 0,
    *,
    max_batch_size: int | None = None,
    from_client: bool = True,
    decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> RecordBatch:
    """Check the framing, CRC and counts of the v2 batch at ``pos``; records stay undecoded.

    Returns the batch (header parsed). ``from_client`` rejects control batches,
    which only a transaction coordinator's markers may carry.
    """
    view = _view(data)
    left = len(view) - pos
    if left > MAGIC_OFFSET:
        magic = view[pos + MAGIC_OFFSET]
        if magic in (0, 1):
            raise InvalidRecordBatch(BatchErrorReason.LEGACY_MAGIC, f"magic {magic}", pos)
        if magic != 2:
            raise InvalidRecordBatch(BatchErrorReason.MAGIC, f"magic {magic}", pos)
    if left < HEADER_SIZE:
        raise InvalidRecordBatch(
            BatchErrorReason.TRUNCATED, f"{left} bytes, header needs {HEADER_SIZE}", pos
        )
    (length,) = I32.unpack_from(view, pos + LENGTH_OFFSET)
    if length < MIN_BATCH_LENGTH:
        raise InvalidRecordBatch(
            BatchErrorReason.BATCH_LENGTH, f"batchLength {length} < {MIN_BATCH_LENGTH}", pos
        )
    size = LOG_OVERHEAD + length
    if max_batch_size is not None and size > max_batch_size:
        raise InvalidRecordBatch(
            BatchErrorReason.TOO_LARGE, f"{size} bytes > {max_batch_size}", pos
        )
    if size > left:
        raise InvalidRecordBatch(
            BatchErrorReason.TRUNCATED, f"batch of {size} bytes, {left} available", pos
        )
    batch = RecordBatch(view[pos : pos + size], decompression_limit)
    actual = crc32c(view[pos + ATTRIBUTES_OFFSET : pos + size])
    if actual != batch.crc:
        raise InvalidRecordBatch(
            BatchErrorReason.CRC, f"stored {batch.crc:#010x}, computed {actual:#010x}", pos
        )
    count = batch.record_count
    # Kafka's LogValidator: the offset range must match the count exactly.
    if count <= 0 or batch.last_offset_delta != count - 1:
        raise InvalidRecordBatch(
            BatchErrorReason.RECORD_COUNT,
            f"{count} records but lastOffsetDelta {batch.last_offset_delta}",
            pos,
        )
    if not batch.attributes & COMPRESSION_MASK and count * MIN_RECORD_SIZE > size - HEADER_SIZE:
        raise InvalidRecordBatch(
            BatchErrorReason.RECORD_COUNT,
            f"{count} records cannot fit in {size - HEADER_SIZE} bytes",
            pos,
        )
    if from_client and batch.attributes & CONTROL_BIT:
        raise InvalidRecordBatch(BatchErrorReason.CONTROL_FROM_CLIENT, "control bit set", pos)
    codec = batch.attributes & COMPRESSION_MASK
    if codec > MAX_CODEC:
        raise InvalidRecordBatch(BatchErrorReason.COMPRESSION, f"codec id {codec}", pos)
    if codec and max_batch_size is not None:
        # A batch of n records holds at most n records of max.message.bytes each, each
        # with its framing (a value of exactly max.message.bytes is a producer's limit:
        # franz-go's TestConsumeMaxDecompressBatchBytes): anything that decompresses to
        # more is a bomb, stopped at that size.
        batch.decompression_limit = min(decompression_limit,
                                        count * (max_batch_size + RECORD_FRAMING_MAX))
    return batch


_I64_MAX = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class RecordSummary:
    """What the record-level checks of an append need from a validated batch."""

    count: int
    newest: int   # largest CreateTime, or NO_TIMESTAMP
    oldest: int   # smallest CreateTime other than NO_TIMESTAMP, or NO_TIMESTAMP


def validate_records(batch: RecordBatch, *, require_keys: bool = False,
                     position: int = 0, native: bool = True) -> RecordSummary:
    """Deep validation: decode every record (decompressing if needed), as Kafka's
    ``LogValidator`` does before any append.

    Checks that the records section decompresses within the batch's bound, that
    exactly ``record_count`` records parse and fill it, each of the length it
    states, and that they carry the offset deltas ``0..n-1`` a producer must
    send; with ``require_keys`` (a compacted topic), that every record has a key.
    The C walker (``_walk.c``) does it without a Python object per record; where
    it is not built, or with ``native=False``, the columnar decoders do.
    """
    try:
        buf = batch.records_buffer()   # decompressed once here, kept for columns()
    except RemoteProtocolError as exc:
        raise InvalidRecordBatch(BatchErrorReason.BAD_COMPRESSION, str(exc), position) from None
    try:
        count = batch.checked_count(buf)
    except RemoteProtocolError as exc:
        raise InvalidRecordBatch(BatchErrorReason.MALFORMED_RECORDS, str(exc), position) from None
    if _walk is not None and native:
        try:
            end, sequential, null_key, newest, oldest = _walk(buf, count,
                                                              batch.base_timestamp)
        except ValueError as exc:
            raise InvalidRecordBatch(BatchErrorReason.MALFORMED_RECORDS, str(exc),
                                     position) from None
        if end != len(buf):
            raise InvalidRecordBatch(BatchErrorReason.MALFORMED_RECORDS,
                                     f"{len(buf) - end} bytes left after the batch's "
                                     f"{count} records", position)
    else:
        try:
            cols = batch.columns(fields=False)
        except RemoteProtocolError as exc:
            raise InvalidRecordBatch(BatchErrorReason.MALFORMED_RECORDS, str(exc),
                                     position) from None
        base = batch.base_offset
        sequential = cols.offsets == list(range(base, base + count))
        null_key = require_keys and None in cols.keys
        # (a LogAppendTime batch's columns carry its maxTimestamp; the append checks
        # timestamps only of CreateTime batches)
        stamps = cols.timestamps
        newest = max(stamps, default=NO_TIMESTAMP)
        oldest = min(stamps, default=NO_TIMESTAMP)
        if oldest == NO_TIMESTAMP:   # (rare: a record without a timestamp)
            oldest = min((t for t in stamps if t != NO_TIMESTAMP), default=NO_TIMESTAMP)
        if newest > _I64_MAX or oldest < -_I64_MAX - 1:
            raise InvalidRecordBatch(BatchErrorReason.MALFORMED_RECORDS,
                                     "a record timestamp overflows", position)
    if not sequential:
        raise InvalidRecordBatch(BatchErrorReason.OFFSETS_NOT_SEQUENTIAL, "gap or reorder",
                                 position)
    if require_keys and null_key:
        keys = batch.columns(fields=False).keys
        missing = [i for i, k in enumerate(keys) if k is None]
        raise InvalidRecordBatch(
            BatchErrorReason.MISSING_KEY, f"{len(missing)} of {count} records have no key",
            position, tuple((i, "Compacted topic cannot accept message without key.")
                            for i in missing))
    return RecordSummary(count, newest, oldest)


def validate_record_set(
    data: BytesLike,
    *,
    max_batch_size: int | None = None,
    from_client: bool = True,
    decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> list[RecordBatch]:
    """Validate every batch of a Produce request's record set; no partial batch allowed."""
    view = _view(data)
    batches: list[RecordBatch] = []
    pos = 0
    while pos < len(view):
        batch = validate_batch(
            view,
            pos,
            max_batch_size=max_batch_size,
            from_client=from_client,
            decompression_limit=decompression_limit,
        )
        batches.append(batch)
        pos += batch.size_in_bytes
    return batches


def _writable(data: bytearray | memoryview) -> memoryview:
    view = _view(data)
    if view.readonly:
        raise LocalProtocolError("in-place batch rewrite needs a writable buffer (bytearray)")
    return view


def _check_header(view: memoryview, pos: int) -> None:
    if pos < 0 or len(view) - pos < HEADER_SIZE:
        raise RemoteProtocolError(f"no complete batch header at byte {pos}")
    if view[pos + MAGIC_OFFSET] != 2:
        raise RemoteProtocolError(f"batch at byte {pos} is not magic 2")


def set_base_offset(data: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Rewrite baseOffset in place (outside the CRC: the CRC stays valid)."""
    view = _writable(data)
    _check_header(view, pos)
    try:
        I64.pack_into(view, pos + BASE_OFFSET_OFFSET, base_offset)
    except struct.error:
        raise LocalProtocolError(f"base offset out of range: {base_offset}") from None


def set_partition_leader_epoch(data: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Rewrite partitionLeaderEpoch in place (outside the CRC)."""
    view = _writable(data)
    _check_header(view, pos)
    try:
        I32.pack_into(view, pos + LEADER_EPOCH_OFFSET, epoch)
    except struct.error:
        raise LocalProtocolError(f"leader epoch out of range: {epoch}") from None


def set_log_append_time(data: bytearray | memoryview, timestamp: int, pos: int = 0) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as maxTimestamp; recompute the CRC."""
    view = _writable(data)
    _check_header(view, pos)
    (length,) = I32.unpack_from(view, pos + LENGTH_OFFSET)
    end = pos + LOG_OVERHEAD + length
    if length < MIN_BATCH_LENGTH or end > len(view):
        raise RemoteProtocolError(f"batch at byte {pos} has an invalid length {length}")
    (attributes,) = I16.unpack_from(view, pos + ATTRIBUTES_OFFSET)
    try:
        I64.pack_into(view, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    except struct.error:
        raise LocalProtocolError(f"timestamp out of range: {timestamp}") from None
    I16.pack_into(view, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_BIT)
    U32.pack_into(view, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET : end]))


def assign_offsets(
    data: bytearray | memoryview,
    next_offset: int,
    *,
    partition_leader_epoch: int | None = None,
) -> int:
    """Stamp consecutive offsets on every batch of a record set; return the next offset.

    The batches must already have passed ``validate_record_set``.
    """
    view = _writable(data)
    pos = 0
    while pos < len(view):
        _check_header(view, pos)
        fields = HEADER.unpack_from(view, pos)
        length, last_delta = fields[1], fields[6]
        end = pos + LOG_OVERHEAD + length
        if length < MIN_BATCH_LENGTH or end > len(view):
            raise RemoteProtocolError(f"batch at byte {pos} has an invalid length {length}")
        I64.pack_into(view, pos + BASE_OFFSET_OFFSET, next_offset)
        if partition_leader_epoch is not None:
            I32.pack_into(view, pos + LEADER_EPOCH_OFFSET, partition_leader_epoch)
        next_offset += last_delta + 1
        pos = end
    return next_offset
