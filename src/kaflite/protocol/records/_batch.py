"""The v2 record batch (magic 2) as a lazily decoded object.

``RecordBatch.from_buffer`` parses the 61-byte header with one ``struct`` call
and keeps a ``memoryview`` of the whole batch. Nothing else happens until the
records are asked for: ``records_buffer()`` decompresses the records section
(once, bounded by ``decompression_limit``), ``__iter__`` decodes records one at
a time, and ``columns()`` decodes all of them in one pass into parallel lists.

``iter_batches`` walks a record set (a Fetch response's ``records`` field, a
Produce request's, or a log segment) batch by batch. A fetch response may end
with a partial batch, which Kafka clients skip; pass ``allow_partial=False``
to treat it as an error instead.
"""

from __future__ import annotations

from collections.abc import Iterator

from kaflite.protocol._exceptions import RemoteProtocolError
from kaflite.protocol.records._compression import DEFAULT_DECOMPRESSION_LIMIT, decompress
from kaflite.protocol.records._decode import Record, RecordColumns, iter_records
from kaflite.protocol.records._stride import decode_columns_fast
from kaflite.protocol.records._wire import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    HEADER,
    HEADER_SIZE,
    I32,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    MIN_RECORD_SIZE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    crc32c,
)

__all__ = ["RecordBatch", "iter_batches"]

BytesLike = bytes | bytearray | memoryview


def _as_view(data: BytesLike) -> memoryview:
    view = data if isinstance(data, memoryview) else memoryview(data)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


class RecordBatch:
    """A magic-2 record batch: header fields now, records on demand."""

    __slots__ = (
        "_decompressed",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "buffer",
        "crc",
        "decompression_limit",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    def __init__(self, buffer: memoryview, decompression_limit: int) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = HEADER.unpack_from(buffer, 0)
        self.buffer = buffer
        self.decompression_limit = decompression_limit
        self._decompressed: memoryview | None = None

    @classmethod
    def from_buffer(
        cls,
        data: BytesLike,
        pos: int = 0,
        *,
        decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT,
    ) -> RecordBatch:
        """Parse the batch header at ``pos``; the batch must be complete."""
        view = _as_view(data)
        if pos < 0 or len(view) - pos < HEADER_SIZE:
            raise RemoteProtocolError(
                f"record batch header needs {HEADER_SIZE} bytes, {len(view) - pos} left"
            )
        magic = view[pos + MAGIC_OFFSET]
        if magic != 2:
            raise RemoteProtocolError(f"expected a magic 2 record batch, got magic {magic}")
        (length,) = I32.unpack_from(view, pos + LENGTH_OFFSET)
        if length < MIN_BATCH_LENGTH:
            raise RemoteProtocolError(f"record batch length {length} is below the minimum")
        end = pos + LOG_OVERHEAD + length
        if end > len(view):
            raise RemoteProtocolError(
                f"record batch of {LOG_OVERHEAD + length} bytes runs past the buffer end"
            )
        return cls(view[pos:end], decompression_limit)

    # -- attributes ----------------------------------------------------------------
    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime (Kafka's TimestampType ids)."""
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: when bit 6 is set, baseTimestamp is the delete horizon."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_BIT else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size_in_bytes(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    # -- integrity -------------------------------------------------------------------
    def compute_crc(self) -> int:
        return int(crc32c(self.buffer[ATTRIBUTES_OFFSET:]))

    def crc_ok(self) -> bool:
        return self.compute_crc() == self.crc

    # -- records -----------------------------------------------------------------------
    def records_buffer(self) -> memoryview:
        """The (decompressed) records section; decompressed once and cached."""
        if self._decompressed is None:
            raw = self.buffer[HEADER_SIZE:]
            codec = self.attributes & COMPRESSION_MASK
            if codec:
                self._decompressed = decompress(codec, raw, limit=self.decompression_limit)
            else:
                self._decompressed = raw
        return self._decompressed

    def checked_count(self, buf: BytesLike) -> int:
        """``record_count``, if that many records can fit in ``buf`` (the records
        section); else ``RemoteProtocolError``."""
        count: int = self.record_count
        if count < 0 or count * MIN_RECORD_SIZE > len(buf):
            raise RemoteProtocolError(
                f"record count {count} cannot fit in {len(buf)} bytes of records"
            )
        return count

    def _log_append_time(self) -> int | None:
        return self.max_timestamp if self.attributes & TIMESTAMP_TYPE_BIT else None

    def columns(self, *, copy: bool = False, fields: bool = True) -> RecordColumns:
        """All records as parallel lists, decoded in one pass.

        Keys, values and header values are views of the batch buffer. With
        ``copy=True`` they are ``bytes`` instead: the records section is copied
        once and sliced (runs of same-shape records are cut out in C), at about
        half the cost of a view per field followed by ``bytes(view)``, for a
        caller that wants ``bytes`` anyway (the consumer). ``fields=False``
        checks every record as fully but may leave keys and values out (an
        empty placeholder, or None where the record has none): for validation.
        """
        buf = self.records_buffer()
        count = self.checked_count(buf)
        cols, end = decode_columns_fast(
            buf, count, self.base_offset, self.base_timestamp, self._log_append_time(), copy,
            fields,
        )
        if end != len(buf):
            raise RemoteProtocolError(
                f"{len(buf) - end} bytes left after the batch's {count} records"
            )
        return cols

    def records(self) -> list[Record]:
        return self.columns().records()

    def __iter__(self) -> Iterator[Record]:
        """Records on demand: nothing is decoded until the first one is asked for.

        The records are then decoded in one bulk pass (much faster per record
        than one at a time) and handed out one by one.
        """
        yield from self.columns().records()

    def iter_one_by_one(self) -> Iterator[Record]:
        """Decode strictly one record per step (for very large batches read partially)."""
        buf = self.records_buffer()
        count = self.checked_count(buf)
        return iter_records(
            buf, count, self.base_offset, self.base_timestamp, self._log_append_time()
        )

    def __len__(self) -> int:
        return int(self.record_count)

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, records={self.record_count}, "
            f"attributes={self.attributes:#x}, producer_id={self.producer_id}, "
            f"size={self.size_in_bytes})"
        )


def iter_batches(
    data: BytesLike,
    *,
    allow_partial: bool = True,
    decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> Iterator[RecordBatch]:
    """Yield the v2 batches of a record set in order.

    A trailing partial batch ends the iteration when ``allow_partial`` is true
    (a Fetch response may be cut mid-batch) and raises otherwise.
    """
    view = _as_view(data)
    pos = 0
    size = len(view)
    while pos < size:
        if size - pos < HEADER_SIZE:
            if allow_partial:
                return
            raise RemoteProtocolError(f"{size - pos} trailing bytes are not a whole batch")
        (length,) = I32.unpack_from(view, pos + LENGTH_OFFSET)
        end = pos + LOG_OVERHEAD + length
        if length >= MIN_BATCH_LENGTH and end > size and allow_partial:
            return
        yield RecordBatch.from_buffer(view, pos, decompression_limit=decompression_limit)
        pos = end
