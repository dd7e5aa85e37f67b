"""Result records and exceptions of the partition log.

Append and read errors that a client must see are raised as the Kafka error
classes of ``kaflite.protocol.errors`` (each carries its ``code``), so a
handler answers with ``exc.code`` and needs no mapping table. Only conditions
that never reach a client (a follower fetching out of step, a corrupt file)
have their own exception types here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import NamedTuple

from kaflite.protocol import errors
from kaflite.protocol.records import InvalidRecordBatch

__all__ = [
    "AppendOrigin",
    "AppendResult",
    "LogError",
    "ProducerInfo",
    "ReadResult",
    "SegmentInfo",
    "TimestampOffset",
    "UnexpectedAppendOffsetError",
    "kafka_error_for",
]


class AppendOrigin(enum.Enum):
    """Who is appending (Kafka's ``AppendOrigin``); it decides how much is checked.

    CLIENT: a producer's batch; full validation, sequence checks, no control batches.
    COORDINATOR: the group or transaction coordinator writing its own records or
    transaction markers; control batches allowed, producer epochs checked but not
    sequences. Replication has its own entry point (``append_as_follower``).
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"


class AppendResult(NamedTuple):
    """What a Produce response needs from an append (Kafka's ``LogAppendInfo``)."""

    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool  # an idempotent retry answered from the producer state
    record_count: int


class ReadResult(NamedTuple):
    """Whole batches read from one segment, exactly as they lie on disk."""

    records: bytes
    first_offset: int  # base offset of the first batch returned, -1 when empty
    # Where the next fetch should start: past the last batch returned (the base
    # offset of the batch that did not fit, or the segment's end); the fetch
    # offset itself when nothing was returned.
    next_offset: int
    log_start_offset: int
    log_end_offset: int


class TimestampOffset(NamedTuple):
    """A ListOffsets answer: the offset found and the timestamp of that record."""

    offset: int
    timestamp: int


class SegmentInfo(NamedTuple):
    base_offset: int
    next_offset: int  # one past the last offset stored in the segment
    size_bytes: int
    max_timestamp: int
    path: str


@dataclass(frozen=True, slots=True)
class ProducerInfo:
    """One idempotent/transactional producer as DescribeProducers reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when no transaction is open


class LogError(Exception):
    """The log cannot do what was asked (a bug in the caller or a broken disk)."""


class UnexpectedAppendOffsetError(LogError):
    """A follower tried to append batches that do not continue its log.

    Kafka's ``UnexpectedAppendOffsetException``: the replica fetcher must
    truncate or reset its fetch position before trying again.
    """

    def __init__(self, message: str, first_offset: int, last_offset: int) -> None:
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


_BY_NAME: dict[str, type[errors.KafkaError]] = {
    cls.name: cls for cls in errors.ERROR_CLASSES.values()
}


def kafka_error_for(exc: InvalidRecordBatch) -> errors.KafkaError:
    """The Kafka error a broker answers for a batch that failed validation."""
    cls = _BY_NAME.get(exc.reason.error_name, errors.CorruptMessageError)
    err = cls(str(exc))
    err.record_errors = exc.record_errors
    return err
