"""Helpers for the partition log tests: build batches, read a log back whole."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kaflite.cluster.log import LogConfig, PartitionLog
from kaflite.protocol.records import RecordBatch, encode_batch, iter_batches

T0 = 1_700_000_000_000  # a fixed "now" for tests


def batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    ts: int = T0,
    timestamps: Sequence[int] | None = None,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
    compression: int = 0,
    transactional: bool = False,
) -> bytes:
    """One v2 batch as a producer sends it (base offset 0, no leader epoch)."""
    return encode_batch(
        list(values),
        keys=list(keys) if keys is not None else None,
        timestamps=list(timestamps) if timestamps is not None else [ts] * len(values),
        compression=compression,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )


def open_log(path: Path, name: str = "topic-0", **config: object) -> PartitionLog:
    return PartitionLog.open(path / name, LogConfig(**config), now_ms=T0)  # type: ignore[arg-type]


def read_batches(log: PartitionLog, start: int | None = None) -> list[RecordBatch]:
    """Every batch from ``start`` (default: log start) to the log end, via ``read``."""
    offset = log.log_start_offset if start is None else start
    out: list[RecordBatch] = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        got = list(iter_batches(result.records, allow_partial=False))
        if not got:
            break
        out.extend(got)
        offset = got[-1].next_offset
    return out


def read_records(log: PartitionLog, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from ``start`` to the log end."""
    out = []
    first = log.log_start_offset if start is None else start
    for b in read_batches(log, start):
        for r in b:
            if r.offset >= first:
                out.append(
                    (r.offset, None if r.key is None else bytes(r.key),
                     None if r.value is None else bytes(r.value))
                )
    return out
