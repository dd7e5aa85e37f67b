"""Control records: the transaction markers a coordinator writes into partitions.

A control batch has attribute bit 5 set (and, for transaction markers, the
transactional bit 4) and holds records whose key is::

    version int16 (0) | type int16 (0 = ABORT, 1 = COMMIT, ...)

For the end-transaction markers (ABORT/COMMIT) the value is::

    version int16 (0) | coordinatorEpoch int32

(Kafka's ``EndTransactionMarker``.) KRaft also defines control types 2-5 for
its own metadata log; they are recognised by type but their values are not
parsed here. As in Kafka, a key or value with a newer version is read by its
version-0 prefix, so an older reader keeps working.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from kaflite.protocol._exceptions import LocalProtocolError, RemoteProtocolError
from kaflite.protocol.records._batch import RecordBatch
from kaflite.protocol.records._encode import encode_batch

__all__ = [
    "ControlRecordType",
    "EndTxnMarker",
    "encode_end_txn_marker",
    "encode_end_txn_marker_batch",
    "parse_control_type",
    "parse_end_txn_marker",
    "read_end_txn_marker",
]

_KEY = struct.Struct(">hh")
_END_TXN_VALUE = struct.Struct(">hi")

BytesLike = bytes | bytearray | memoryview


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    UNKNOWN = -1


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """A COMMIT or ABORT marker and the coordinator epoch that wrote it."""

    type: ControlRecordType
    coordinator_epoch: int
    version: int = 0

    @property
    def is_commit(self) -> bool:
        return self.type is ControlRecordType.COMMIT


def parse_control_type(key: BytesLike | None) -> ControlRecordType:
    """The control type of a control record's key (UNKNOWN for unknown types)."""
    if key is None or len(key) < _KEY.size:
        raise RemoteProtocolError("control record key is missing or shorter than 4 bytes")
    version, kind = _KEY.unpack_from(key, 0)
    if version < 0:
        raise RemoteProtocolError(f"invalid control record key version {version}")
    try:
        return ControlRecordType(kind)
    except ValueError:
        return ControlRecordType.UNKNOWN


def parse_end_txn_marker(key: BytesLike | None, value: BytesLike | None) -> EndTxnMarker:
    """Parse an ABORT/COMMIT control record from its key and value."""
    kind = parse_control_type(key)
    if kind not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise RemoteProtocolError(f"control record of type {kind.name} is not a transaction marker")
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise RemoteProtocolError("end transaction marker value is missing or shorter than 6 bytes")
    version, epoch = _END_TXN_VALUE.unpack_from(value, 0)
    if version < 0:
        raise RemoteProtocolError(f"invalid end transaction marker version {version}")
    return EndTxnMarker(kind, epoch, version)


def encode_end_txn_marker(marker: EndTxnMarker) -> tuple[bytes, bytes]:
    """The (key, value) of a version-0 marker record."""
    if marker.type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        raise LocalProtocolError(f"{marker.type!r} is not a transaction marker type")
    try:
        return _KEY.pack(0, marker.type), _END_TXN_VALUE.pack(0, marker.coordinator_epoch)
    except struct.error:
        raise LocalProtocolError(
            f"coordinator epoch out of range: {marker.coordinator_epoch}"
        ) from None


def encode_end_txn_marker_batch(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    timestamp: int = -1,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A control batch holding one COMMIT (or ABORT) marker, as a leader writes it."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    key, value = encode_end_txn_marker(EndTxnMarker(kind, coordinator_epoch))
    return encode_batch(
        [value],
        keys=[key],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transactional=True,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=timestamp,
        control=True,
    )


def read_end_txn_marker(batch: RecordBatch) -> EndTxnMarker:
    """The marker held by a control batch (its first record)."""
    if not batch.is_control:
        raise RemoteProtocolError("not a control batch")
    for record in batch:
        return parse_end_txn_marker(record.key, record.value)
    raise RemoteProtocolError("control batch has no records")
