"""The ``__transaction_state`` record format, and the states a transaction goes through.

A record's key is an int16 version (0) then ``TransactionLogKey`` (the
transactional id); its value is an int16 version then ``TransactionLogValue``:
producer id and epoch, timeout, state, the partitions in the transaction and
two timestamps. Version 1 adds three tagged fields for transactions v2
(KIP-890): the previous and next producer ids (an epoch that overflowed at the
end of a transaction moves it to a new producer id) and the transaction version
the client spoke. kaflite writes version 1 for a v2 transaction and version 0
otherwise, as Kafka does for a cluster below ``transaction.version`` 2. A null
value is a tombstone: the transactional id expired.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from kaflite.cluster.groups._records import split_version
from kaflite.protocol.messages import TransactionLogKey, TransactionLogValue
from kaflite.protocol.messages import transaction_log_value as tlv

__all__ = ["TxnRecord", "TxnState", "decode_txn_key", "decode_txn_value", "encode_txn_key",
           "encode_txn_value"]

KEY_VERSION = 0
VALUE_VERSION = 0
_I16 = struct.Struct(">h")


class TxnState(enum.IntEnum):
    """Kafka's ``TransactionState`` ids, as stored in the log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name DescribeTransactions and ListTransactions use."""
        return _DISPLAY[self]

    @classmethod
    def from_display(cls, name: str) -> TxnState | None:
        for state, shown in _DISPLAY.items():
            if shown == name:
                return state
        return None


_DISPLAY = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One transactional id's state as the log holds it."""

    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1      # the id a v2 transaction whose epoch ran out moves to
    client_tv: int = 0              # the client's transaction version (2: KIP-890 part 2)


def encode_txn_key(transactional_id: str) -> bytes:
    body = TransactionLogKey(transactional_id=transactional_id).encode(KEY_VERSION)
    return _I16.pack(KEY_VERSION) + body


def encode_txn_value(rec: TxnRecord) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(rec.partitions):
        by_topic.setdefault(topic, []).append(index)
    value = TransactionLogValue(
        producer_id=rec.producer_id, producer_epoch=rec.producer_epoch,
        transaction_timeout_ms=rec.timeout_ms, transaction_status=int(rec.state),
        transaction_partitions=[tlv.PartitionsSchema(topic=t, partition_ids=ids)
                                for t, ids in by_topic.items()],
        transaction_last_update_timestamp_ms=rec.last_update_ms,
        transaction_start_timestamp_ms=rec.start_ms,
        previous_producer_id=rec.previous_producer_id, next_producer_id=rec.next_producer_id,
        client_transaction_version=rec.client_tv)
    version = 1 if rec.client_tv >= 2 else VALUE_VERSION
    return _I16.pack(version) + value.encode(version)


def decode_txn_key(data: bytes | bytearray | memoryview) -> str:
    version, r = split_version(data)
    if version != KEY_VERSION:
        raise ValueError(f"unknown TransactionLogKey version {version}")
    return TransactionLogKey.read(r, KEY_VERSION).transactional_id


def decode_txn_value(data: bytes | bytearray | memoryview) -> TxnRecord:
    version, r = split_version(data)
    if version < 0:
        raise ValueError(f"bad TransactionLogValue version {version}")
    v = TransactionLogValue.read(r, min(version, TransactionLogValue.MAX_VERSION))
    parts = frozenset((p.topic, i) for p in v.transaction_partitions or ()
                      for i in p.partition_ids)
    return TxnRecord(v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
                     TxnState(v.transaction_status), parts,
                     v.transaction_last_update_timestamp_ms, v.transaction_start_timestamp_ms,
                     v.previous_producer_id, v.next_producer_id, v.client_transaction_version)
