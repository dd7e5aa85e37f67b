"""Metadata snapshot files, in Kafka's layout (KIP-630).

Theory of operation
-------------------
A snapshot holds the whole metadata as of one log offset: the state after
applying every record below ``offset``. Its file, in the metadata partition's
directory, is named ``<offset, 20 digits>-<epoch, 10 digits>.checkpoint`` and
holds v2 record batches numbered from 0: a control batch with
SnapshotHeaderRecord, data batches of metadata records, and a control batch with
SnapshotFooterRecord. It is written to ``.checkpoint.part``, fsynced, then renamed,
so a crash never leaves a half snapshot under the final name; a file without a
footer or with a bad CRC is not used (the previous one is).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from kaflite.cluster.metalog import _versions
from kaflite.cluster.metalog._codec import (
    LEADER_EPOCH,
    control_type,
    decode_batch,
    encode_batch_of,
    footer_batch,
    header_batch,
)
from kaflite.protocol.messages._runtime import Struct
from kaflite.protocol.records import ControlRecordType, iter_batches

__all__ = ["list_snapshots", "read_snapshot", "snapshot_path", "write_snapshot"]

SUFFIX = ".checkpoint"
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
# records a data batch of a snapshot (Kafka cuts its batches at 8 KiB; a count is
# simpler and keeps batches of a few tens of KiB)
BATCH_RECORDS = 500


def snapshot_path(directory: Path, offset: int, epoch: int = LEADER_EPOCH) -> Path:
    return directory / f"{offset:020d}-{epoch:010d}{SUFFIX}"


def list_snapshots(directory: Path) -> list[tuple[int, Path]]:
    """(end offset, path) of every complete-named snapshot, oldest first."""
    found = []
    for path in directory.glob(f"*{SUFFIX}"):
        m = _NAME.match(path.name)
        if m:
            found.append((int(m.group(1)), path))
    return sorted(found)


def write_snapshot(directory: Path, offset: int, records: Iterable[Struct],
                   last_contained_ms: int, now_ms: int) -> tuple[Path, int]:
    """Write a snapshot of the state below ``offset``; its path and size in bytes.

    Blocking (it fsyncs): run it off the event loop, or at startup."""
    final = snapshot_path(directory, offset)
    part = final.with_name(final.name + ".part")
    size = 0
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        def put(data: bytes) -> None:
            nonlocal size
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            size += len(data)

        put(header_batch(0, last_contained_ms, now_ms))
        next_offset = 1
        # the snapshot's first record is its metadata.version, which the rest follow
        level = _versions.MINIMUM
        chunk: list[Struct] = []
        for record in records:
            chunk.append(record)
            if len(chunk) == BATCH_RECORDS:
                data, level = encode_batch_of(chunk, next_offset, now_ms, level)
                put(data)
                next_offset += len(chunk)
                chunk = []
        if chunk:
            put(encode_batch_of(chunk, next_offset, now_ms, level)[0])
            next_offset += len(chunk)
        put(footer_batch(next_offset, now_ms))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(part, final)
    _fsync_dir(directory)
    return final, size


def read_snapshot(path: Path) -> list[Struct]:
    """The records of a snapshot file; ``ValueError`` if it is torn or corrupt."""
    data = path.read_bytes()
    records: list[Struct] = []
    header = footer = False
    try:
        for batch in iter_batches(data, allow_partial=False):
            if not batch.crc_ok():
                raise ValueError(f"{path.name}: batch at offset {batch.base_offset} fails its CRC")
            kind = control_type(batch)
            if kind is ControlRecordType.SNAPSHOT_HEADER:
                header = True
            elif kind is ControlRecordType.SNAPSHOT_FOOTER:
                footer = True
            elif kind is None:
                records.extend(rec for _, rec in decode_batch(batch))
    except ValueError:
        raise
    except Exception as exc:   # a framing error of the file
        raise ValueError(f"{path.name}: {exc}") from exc
    if not (header and footer):
        raise ValueError(f"{path.name}: no snapshot {'footer' if header else 'header'}")
    return records


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
