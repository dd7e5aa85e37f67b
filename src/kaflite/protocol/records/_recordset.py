"""Walking a record set whose batches may mix magic 2 with legacy magic 0/1.

A Fetch response from an old log can hold legacy message sets followed by v2
batches. The magic byte sits at the same place in both layouts (byte 16:
after offset, length and either the v2 leader epoch or the legacy CRC), so
each entry is dispatched on it.
"""

from __future__ import annotations

from collections.abc import Iterator

from kaflite.protocol._exceptions import RemoteProtocolError
from kaflite.protocol.records._batch import RecordBatch
from kaflite.protocol.records._compression import DEFAULT_DECOMPRESSION_LIMIT
from kaflite.protocol.records._decode import Record
from kaflite.protocol.records._legacy import LegacyMessage, iter_legacy_messages
from kaflite.protocol.records._wire import I32, LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET

__all__ = ["iter_record_set", "iter_record_set_records"]

BytesLike = bytes | bytearray | memoryview


def iter_record_set(
    data: BytesLike,
    *,
    allow_partial: bool = True,
    decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> Iterator[RecordBatch | LegacyMessage]:
    """Yield each v2 batch or legacy top-level message of a record set."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    view = view if view.format == "B" else view.cast("B")
    pos = 0
    size = len(view)
    while pos < size:
        if size - pos <= MAGIC_OFFSET:
            if allow_partial:
                return
            raise RemoteProtocolError(f"{size - pos} trailing bytes are not a whole entry")
        (length,) = I32.unpack_from(view, pos + LENGTH_OFFSET)
        end = pos + LOG_OVERHEAD + length
        if length < 0:
            raise RemoteProtocolError(f"negative entry length {length} at byte {pos}")
        if end > size:
            if allow_partial:
                return
            raise RemoteProtocolError(f"entry at byte {pos} runs past the end")
        magic = view[pos + MAGIC_OFFSET]
        if magic == 2:
            yield RecordBatch.from_buffer(view, pos, decompression_limit=decompression_limit)
        elif magic in (0, 1):
            yield from iter_legacy_messages(view[pos:end], allow_partial=False)
        else:
            raise RemoteProtocolError(f"unknown magic {magic} at byte {pos}")
        pos = end


def iter_record_set_records(
    data: BytesLike,
    *,
    allow_partial: bool = True,
    decompression_limit: int = DEFAULT_DECOMPRESSION_LIMIT,
) -> Iterator[Record]:
    """Every record of a record set, whatever its magic."""
    for entry in iter_record_set(
        data, allow_partial=allow_partial, decompression_limit=decompression_limit
    ):
        if isinstance(entry, RecordBatch):
            yield from entry.records()
        else:
            yield from entry.records(limit=decompression_limit)
