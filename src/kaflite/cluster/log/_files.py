"""File names and the small text files of Kafka's log layout.

A partition directory ``<topic>-<partition>`` holds, as in Kafka:

* ``00000000000000000000.log``: record batches exactly as they travel on the wire;
* ``.index`` and ``.timeindex``: the sparse offset and time indexes of that segment;
* ``<offset>.snapshot``: producer state as of that offset;
* ``leader-epoch-checkpoint``: ``0``, a count, then ``epoch startOffset`` lines;
* ``partition.metadata``: ``version: 0`` and ``topic_id: <base64 uuid>``.

Kafka keeps ``log-start-offset-checkpoint``, ``recovery-point-offset-checkpoint``
and ``replication-offset-checkpoint`` (the high watermark) once per data
directory, for all partitions: ``0``, a count, then ``topic partition offset``
lines. kaflite writes the high watermarks that way (one file in the data
directory, ``write_offset_checkpoints``, by the broker: ``kaflite.cluster.hw_checkpoint``).
The log start and the recovery point, which change with the log itself, stay in
files of the same name and format but one per partition directory, so that a
``PartitionLog`` opens on its own. Older data directories also hold a
per-partition ``replication-offset-checkpoint``; it is read when the data
directory's file has no line for that partition.

Checkpoints are replaced atomically (write a ``.tmp``, fsync, rename, fsync the
directory), as Kafka's ``CheckpointFile`` does: a crash leaves the old or the new
file, never half of one. They change rarely (a leader change, DeleteRecords, a
flush), so the fsync is off the produce path. The leader-epoch checkpoint, which
every partition rewrites at once when leaders move, and ``partition.metadata``,
written as each partition is created, are renamed into place at once and fsynced
later on a thread of its own (``_deferred_sync``), as Kafka does since 3.7.
"""

from __future__ import annotations

import base64
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from kaflite.cluster.log._deferred_sync import (
    defer_write,
    fsync_path,
    pending_text,
    replace_file,
)

__all__ = [
    "CLEANED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "SWAP_SUFFIX",
    "TIMEINDEX_SUFFIX",
    "atomic_write",
    "base_offset_of",
    "format_offset_checkpoints",
    "format_topic_id",
    "parse_partition_dir",
    "parse_topic_id",
    "read_epoch_checkpoint",
    "read_meta_properties",
    "read_offset_checkpoint",
    "read_offset_checkpoints",
    "read_partition_metadata",
    "segment_path",
    "write_epoch_checkpoint",
    "write_meta_properties",
    "write_offset_checkpoint",
    "write_offset_checkpoints",
    "write_partition_metadata",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
SNAPSHOT_SUFFIX = ".snapshot"
# Compaction writes a segment as ``.cleaned``, renames it ``.swap`` once complete,
# then swaps it in (Kafka's LogCleaner / LogLoader naming).
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"   # the high watermark
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"


def segment_path(directory: Path, base_offset: int, suffix: str) -> Path:
    """``<dir>/<20-digit base offset><suffix>``, Kafka's ``LogFileUtils.filenamePrefixFromOffset``."""
    return directory / f"{base_offset:020d}{suffix}"


def base_offset_of(name: str) -> int | None:
    """The base offset encoded in a segment or snapshot file name, else None."""
    stem = name.split(".", 1)[0]
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """``topic-3`` -> ("topic", 3); topic names may themselves contain dashes."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit() or "." in part:
        return None
    return topic, int(part)


# -- atomic replacement --------------------------------------------------------------


def atomic_write(path: Path, text: str, *, sync: bool = True) -> None:
    """Replace ``path`` with ``text`` (a crash leaves the old file or the new one);
    with ``sync``, durable when this returns (file and directory fsynced)."""
    tmp = path.with_name(path.name + ".tmp")
    if not sync:
        replace_file(path, text)
        return
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fsync_path(directory)


def _read_lines(path: Path) -> list[str] | None:
    queued = pending_text(path)        # written later by _deferred_sync: read the newest
    if queued is not None:
        return queued.splitlines()
    try:
        return path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return None


def _checkpoint_body(path: Path) -> list[str] | None:
    """The entry lines of a Kafka checkpoint file (version 0, count, entries)."""
    lines = _read_lines(path)
    if lines is None:
        return None
    if not lines:
        return []   # Kafka's CheckpointFile reads an empty file as no entries
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"{path}: not a version 0 checkpoint file")
    try:
        count = int(lines[1])
    except ValueError:
        raise ValueError(f"{path}: bad entry count {lines[1]!r}") from None
    body = [line for line in lines[2:] if line.strip()]
    if count != len(body):
        raise ValueError(f"{path}: expected {count} entries, found {len(body)}")
    return body


# -- leader-epoch-checkpoint ------------------------------------------------------------


def read_epoch_checkpoint(directory: Path) -> list[tuple[int, int]]:
    body = _checkpoint_body(directory / LEADER_EPOCH_CHECKPOINT)
    if body is None:
        return []
    entries = []
    for line in body:
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"leader-epoch-checkpoint: malformed line {line!r}")
        entries.append((int(parts[0]), int(parts[1])))
    return entries


def write_epoch_checkpoint(directory: Path, entries: list[tuple[int, int]]) -> None:
    """Replaced atomically and made durable later, off the caller's thread
    (``_deferred_sync``: a leader change rewrites thousands of these at once)."""
    lines = ["0", str(len(entries)), *(f"{epoch} {offset}" for epoch, offset in entries)]
    defer_write(directory / LEADER_EPOCH_CHECKPOINT, "\n".join(lines) + "\n")


# -- log-start / recovery-point checkpoints -------------------------------------------------


def read_offset_checkpoint(path: Path, topic: str, partition: int) -> int | None:
    """One partition's offset in a checkpoint file (None without the file or the
    line); ValueError if the file is not one, as ``read_offset_checkpoints``."""
    return (read_offset_checkpoints(path) or {}).get((topic, partition))


def write_offset_checkpoint(
    path: Path, topic: str, partition: int, offset: int, *, sync: bool = True
) -> None:
    atomic_write(path, format_offset_checkpoints({(topic, partition): offset}), sync=sync)


def read_offset_checkpoints(path: Path) -> dict[tuple[str, int], int] | None:
    """Every ``topic partition offset`` line of a data directory's checkpoint file
    (Kafka's ``OffsetCheckpointFile``); None if there is no file, ValueError if it
    is not one."""
    body = _checkpoint_body(path)
    if body is None:
        return None
    entries: dict[tuple[str, int], int] = {}
    for line in body:
        parts = line.split()
        if len(parts) != 3:
            raise ValueError(f"{path}: malformed line {line!r}")
        try:
            entries[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise ValueError(f"{path}: malformed line {line!r}") from None
    return entries


def format_offset_checkpoints(entries: Mapping[tuple[str, int], int]) -> str:
    """``0``, the count, then ``topic partition offset`` lines (sorted)."""
    lines = ["0", str(len(entries)),
             *(f"{topic} {partition} {offset}"
               for (topic, partition), offset in sorted(entries.items()))]
    return "\n".join(lines) + "\n"


def write_offset_checkpoints(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    """Replace a data directory's checkpoint file atomically (tmp, fsync, rename,
    fsync of the directory): a crash leaves the old file or the new one."""
    atomic_write(path, format_offset_checkpoints(entries))


# -- partition.metadata ------------------------------------------------------------------


def format_topic_id(topic_id: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def parse_topic_id(text: str | uuid.UUID) -> uuid.UUID:
    if isinstance(text, uuid.UUID):
        return text
    text = text.strip()
    if len(text) == 22:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    return uuid.UUID(text)


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    lines = _read_lines(directory / PARTITION_METADATA)
    if lines is None:
        return None
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise ValueError(f"{directory / PARTITION_METADATA}: unrecognised content")
    return parse_topic_id(fields["topic_id"])


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    """Written once, when the partition's log is created; written and fsynced later off
    the caller's thread (``_deferred_sync``), as Kafka flushes its PartitionMetadataFile
    later: two fsyncs a partition were half the time of creating thousands of partitions
    at once. A crash before it is written leaves none, which the next open writes."""
    text = f"version: 0\ntopic_id: {format_topic_id(topic_id)}\n"
    defer_write(directory / PARTITION_METADATA, text)


# -- meta.properties ------------------------------------------------------------------------


def read_meta_properties(data_dir: Path) -> dict[str, str] | None:
    """The key=value pairs of a Java properties file (comments skipped)."""
    lines = _read_lines(data_dir / META_PROPERTIES)
    if lines is None:
        return None
    props: dict[str, str] = {}
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def write_meta_properties(data_dir: Path, props: dict[str, str]) -> None:
    # Kafka writes a comment and a date line first (java.util.Properties.store).
    stamp = time.strftime("%a %b %d %H:%M:%S %Z %Y")
    lines = ["#", f"#{stamp}", *(f"{k}={v}" for k, v in props.items())]
    atomic_write(data_dir / META_PROPERTIES, "\n".join(lines) + "\n")
