"""``RecordBatchBuilder``: accumulate records one at a time, encode them at once.

A producer appends records as they arrive and needs to know, after each one,
how large the batch has grown (``batch.size``). The builder keeps the records
as columns and a running size estimate; ``build()`` hands the columns to the
bulk encoder, so appending costs a few list appends per record and encoding is
the same column-wise pass as ``encode_batch``.

The estimate is exact for uncompressed batches (it adds up the encoded size of
each record as Kafka's ``DefaultRecord.sizeInBytes`` does); for compressed
batches it is an upper bound, as in the Java producer, which estimates with a
compression ratio that starts at 1.0.
"""

from __future__ import annotations

from collections.abc import Sequence

from kaflite.protocol._exceptions import LocalProtocolError
from kaflite.protocol.records._compression import Compression, compress
from kaflite.protocol.records._encode import HeaderInput, assemble_batch, encode_records
from kaflite.protocol.records._wire import (
    COMPRESSION_MASK,
    CONTROL_BIT,
    HEADER_SIZE,
    NO_TIMESTAMP,
    TABLE_SIZE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    VARINT,
    VARINT_SIZE_PLUS,
    varint,
)

__all__ = ["RecordBatchBuilder"]

BytesLike = bytes | bytearray | memoryview


class RecordBatchBuilder:
    """Builds one v2 batch from appended records."""

    def __init__(
        self,
        *,
        base_offset: int = 0,
        compression: int = Compression.NONE,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        transactional: bool = False,
        control: bool = False,
        partition_leader_epoch: int = -1,
        log_append_time: bool = False,
        base_timestamp: int | None = None,
    ) -> None:
        if not 0 <= compression <= 4:
            raise LocalProtocolError(f"unknown compression codec {compression}")
        self.base_offset = base_offset
        self.compression = compression
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.transactional = transactional
        self.control = control
        self.partition_leader_epoch = partition_leader_epoch
        self.log_append_time = log_append_time
        self.base_timestamp = base_timestamp
        self._values: list[BytesLike | None] = []
        self._keys: list[BytesLike | None] = []
        self._headers: list[HeaderInput | None] = []
        self._timestamps: list[int] = []
        self._offset_deltas: list[int] = []
        self._has_keys = False
        self._has_headers = False
        self._size = HEADER_SIZE

    def __len__(self) -> int:
        return len(self._values)

    @property
    def size_in_bytes(self) -> int:
        """Encoded size of the batch so far (an upper bound when compressed)."""
        return self._size

    def append(
        self,
        value: BytesLike | None,
        *,
        key: BytesLike | None = None,
        headers: HeaderInput | None = None,
        timestamp: int | None = None,
        offset_delta: int | None = None,
    ) -> int:
        """Add a record; return its offset delta.

        Offset deltas must increase; by default they are consecutive.
        """
        if offset_delta is None:
            offset_delta = self._offset_deltas[-1] + 1 if self._offset_deltas else 0
        elif self._offset_deltas and offset_delta <= self._offset_deltas[-1]:
            raise LocalProtocolError(
                f"offset delta {offset_delta} does not follow {self._offset_deltas[-1]}"
            )
        if offset_delta < 0 or offset_delta > 0x7FFFFFFF:
            raise LocalProtocolError(f"offset delta {offset_delta} out of range")
        if timestamp is None:
            timestamp = self.base_timestamp if self.base_timestamp is not None else NO_TIMESTAMP
        if self.base_timestamp is None:
            self.base_timestamp = timestamp
        self._values.append(value)
        self._keys.append(key)
        self._headers.append(headers)
        self._timestamps.append(timestamp)
        self._offset_deltas.append(offset_delta)
        if key is not None:
            self._has_keys = True
        if headers:
            self._has_headers = True
        self._size += self._record_size(
            value, key, headers, timestamp - self.base_timestamp, offset_delta
        )
        return offset_delta

    @staticmethod
    def _record_size(
        value: BytesLike | None,
        key: BytesLike | None,
        headers: HeaderInput | None,
        timestamp_delta: int,
        offset_delta: int,
    ) -> int:
        # Kafka's DefaultRecord.sizeInBytes, with table lookups for the
        # common small varints.
        sp = VARINT_SIZE_PLUS
        body = 1
        body += (
            len(VARINT[timestamp_delta])
            if 0 <= timestamp_delta < TABLE_SIZE
            else len(varint(timestamp_delta))
        )
        body += (
            len(VARINT[offset_delta]) if offset_delta < TABLE_SIZE else len(varint(offset_delta))
        )
        if key is None:
            body += 1
        else:
            n = len(key)
            body += sp[n] if n < TABLE_SIZE else len(varint(n)) + n
        if value is None:
            body += 1
        else:
            n = len(value)
            body += sp[n] if n < TABLE_SIZE else len(varint(n)) + n
        if not headers:
            body += 1
        else:
            body += len(varint(len(headers)))
            for hkey, hvalue in headers:
                raw = hkey.encode("utf-8", "surrogateescape") if isinstance(hkey, str) else hkey
                body += len(varint(len(raw))) + len(raw)
                body += 1 if hvalue is None else len(varint(len(hvalue))) + len(hvalue)
        return (len(VARINT[body]) if body < TABLE_SIZE else len(varint(body))) + body

    def build(self) -> bytes:
        """Encode the batch (the builder may be reused; its records stay)."""
        n = len(self._values)
        base_ts = self.base_timestamp if self.base_timestamp is not None else NO_TIMESTAMP
        deltas: Sequence[int] | None = [t - base_ts for t in self._timestamps]
        if not any(deltas or ()):
            deltas = None
        offsets: Sequence[int] | None = self._offset_deltas
        if n and self._offset_deltas[-1] == n - 1:
            offsets = None  # consecutive: the encoder's table covers them
        section = encode_records(
            self._values,
            self._keys if self._has_keys else None,
            self._headers if self._has_headers else None,
            deltas,
            offsets,
        )
        if self.compression:
            section = compress(self.compression, section)
        attributes = self.compression & COMPRESSION_MASK
        if self.transactional:
            attributes |= TRANSACTIONAL_BIT
        if self.control:
            attributes |= CONTROL_BIT
        if self.log_append_time:
            attributes |= TIMESTAMP_TYPE_BIT
        return assemble_batch(
            section,
            count=n,
            last_offset_delta=self._offset_deltas[-1] if n else 0,
            base_offset=self.base_offset,
            base_timestamp=base_ts,
            max_timestamp=max(self._timestamps) if n else base_ts,
            attributes=attributes,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            partition_leader_epoch=self.partition_leader_epoch,
        )
