"""Checks on record sets before they enter the log (Kafka's ``LogValidator``).

Leader appends (``validate_produce``) get Kafka's checks before anything is
appended, so that no batch a consumer cannot read reaches the log:

* batch level, on the raw bytes: framing, CRC-32C, record count against the
  offset range, size against ``max.message.bytes``, exactly one batch per
  Produce, a known compression codec (else UNSUPPORTED_COMPRESSION_TYPE), a
  sequence number on every idempotent batch, no control batch from a client,
  no LogAppendTime claimed by a producer;
* record level, for every batch from a client, compressed or not: the records
  section is decompressed (bounded: at most ``record_count`` times
  ``max.message.bytes``, and never more than the codec's own limit), exactly
  ``record_count`` records must decode and fill it, each of the length it
  states, with offset deltas ``0..n-1`` (else CORRUPT_MESSAGE or
  INVALID_RECORD); every record's timestamp must lie within
  ``message.timestamp.before/after.max.ms`` of the broker's clock (CreateTime
  topics; else INVALID_TIMESTAMP), and on a compacted topic every record needs
  a key.

Records are checked by the codec's C record walker where it is built, else by
its columnar decoders; the cost on the produce path is in docs/benchmarks.md.

Replicated batches (``parse_replicated``) only need framing and CRC, and
offsets that continue the log: the leader validated them already, and a
compacted leader's batches legitimately hold fewer records than their offset
range.
"""

from __future__ import annotations

from kaflite.cluster.log._config import LogConfig
from kaflite.cluster.log._segment import BatchInfo, check_batch, parse_info
from kaflite.cluster.log._types import UnexpectedAppendOffsetError, kafka_error_for
from kaflite.protocol import errors
from kaflite.protocol.records import (
    NO_TIMESTAMP,
    InvalidRecordBatch,
    RecordBatch,
    RecordSummary,
    validate_record_set,
    validate_records,
)

__all__ = ["parse_replicated", "validate_produce"]


def validate_produce(
    view: memoryview,
    config: LogConfig,
    *,
    now_ms: int,
    log_append_time: bool,
    max_message_bytes: int,
    from_client: bool,
) -> list[RecordBatch]:
    """The batches of a leader append, or the Kafka error to answer with."""
    if len(view) > config.segment_bytes and from_client:
        # Kafka's RecordBatchTooLargeException: a record set must fit in one segment.
        raise errors.RecordListTooLargeError(
            f"{len(view)} bytes exceed segment.bytes {config.segment_bytes}"
        )
    try:
        batches = validate_record_set(
            view, max_batch_size=max_message_bytes, from_client=from_client
        )
        if from_client and len(batches) != 1:
            raise errors.InvalidRecordError(
                f"a Produce record set must hold exactly one batch, not {len(batches)}"
            )
        for batch in batches:
            _check_batch(batch, config, now_ms, log_append_time, from_client)
            if from_client or (config.compact and not batch.is_control):
                summary = validate_records(batch, require_keys=config.compact)
                if from_client and not log_append_time:
                    _check_timestamps(summary, config, now_ms)
    except InvalidRecordBatch as exc:
        raise kafka_error_for(exc) from None
    return batches


def _check_batch(
    batch: RecordBatch, config: LogConfig, now_ms: int, log_append_time: bool, from_client: bool
) -> None:
    if from_client and batch.producer_id >= 0 and batch.base_sequence < 0:
        raise errors.InvalidRecordError(
            f"producer {batch.producer_id} sent a batch without a sequence number"
        )
    if from_client and batch.is_log_append_time and not log_append_time:
        raise errors.InvalidTimestampError("the producer set LogAppendTime on a CreateTime topic")


def _check_timestamps(summary: RecordSummary, config: LogConfig, now_ms: int) -> None:
    """Every record's CreateTime within the topic's bounds (-1: no timestamp)."""
    newest = summary.newest
    if newest != NO_TIMESTAMP and newest - now_ms > config.message_timestamp_after_max_ms:
        raise errors.InvalidTimestampError(
            f"timestamp {newest} is more than message.timestamp.after.max.ms "
            f"({config.message_timestamp_after_max_ms}) ahead of {now_ms}"
        )
    if config.message_timestamp_before_max_ms >= now_ms:
        return   # (the default, Long.MAX_VALUE: nothing can be too old)
    oldest = now_ms if summary.oldest == NO_TIMESTAMP else summary.oldest
    if now_ms - oldest > config.message_timestamp_before_max_ms:
        raise errors.InvalidTimestampError(
            f"timestamp {oldest} is more than message.timestamp.before.max.ms "
            f"({config.message_timestamp_before_max_ms}) before {now_ms}"
        )


def parse_replicated(view: memoryview, log_end_offset: int) -> list[BatchInfo]:
    """Headers of the replicated batches in ``view``; a torn last batch is left out.

    A Fetch response may end with a partial batch (its size limit cut it); the
    follower takes what is whole and fetches the rest next time.
    """
    infos: list[BatchInfo] = []
    pos = 0
    expected = log_end_offset
    while pos < len(view):
        size = check_batch(view, pos)
        if not size:
            if infos and _is_torn_tail(view, pos):
                break
            raise errors.CorruptMessageError(f"replicated batch at byte {pos} is corrupt")
        info = parse_info(view, pos, pos)
        if info.base_offset < expected:
            raise UnexpectedAppendOffsetError(
                f"replicated batch at offset {info.base_offset} does not follow {expected}",
                info.base_offset,
                info.last_offset,
            )
        infos.append(info)
        expected = info.last_offset + 1
        pos += size
    return infos


def _is_torn_tail(view: memoryview, pos: int) -> bool:
    """True if the bytes at ``pos`` begin a batch that the buffer cuts short."""
    left = len(view) - pos
    if left < 12:
        return True
    length = int.from_bytes(view[pos + 8 : pos + 12], "big", signed=True)
    return 12 + length > left
