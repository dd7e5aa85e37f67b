"""Placeholder: the same-shape fast path (filled in below)."""

from __future__ import annotations

from kaflite.protocol.records._decode import RecordColumns, decode_columns


def decode_columns_fast(
    buf: memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None = None,
) -> tuple[RecordColumns, int]:
    return decode_columns(buf, count, base_offset, base_timestamp, log_append_time)
