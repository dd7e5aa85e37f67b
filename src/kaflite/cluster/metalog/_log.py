"""``MetadataLog``: the controller's ``__cluster_metadata`` partition on disk (KIP-500, KIP-630).

Theory of operation
-------------------
Layout, in ``<data_dir>/__cluster_metadata-0/`` as Kafka's metadata partition:

* segments ``<base offset>.log`` of v2 record batches (with kaflite's ``.index``
  and ``.timeindex`` files), one batch per controller request, its records the
  metadata records of ``_codec``;
* snapshots ``<offset>-<epoch>.checkpoint`` (``_snapshot``).

Appending (on the event loop) encodes one batch, writes it with one
``os.write`` and asks the background worker to fsync it: the cost is
proportional to the change, never to the size of the metadata.

Snapshots: once ``snapshot_records`` records (or ``snapshot_bytes`` bytes) were
appended since the last one, the loop rolls a new segment at the current end
offset X (closing the old one: from then on every file below X is immutable)
and a thread of its own (so that fsyncs never wait behind it) runs
``_compactor`` in a child process, which builds the snapshot at X from the
previous snapshot and the segments below X and writes it; the thread then
removes the older snapshots and segments. The loop never waits for it, and
never reads a file it writes; the child shares neither the GIL nor the heap
(whose garbage collections it would set off).

Recovery: the newest readable snapshot, then every batch of the segments from
its offset on; a torn or corrupt tail (a crash mid-write) is cut off, as Kafka's
log recovery does.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from kaflite.cluster.log import LogSegment
from kaflite.cluster.metalog import _compactor, _versions
from kaflite.cluster.metalog._codec import decode_batch, encode_batch_of
from kaflite.cluster.metalog._snapshot import (
    list_snapshots,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from kaflite.cluster.metalog._worker import Worker
from kaflite.protocol.messages._runtime import Struct
from kaflite.protocol.records import RecordBatch

__all__ = ["DIRECTORY", "MetadataLog"]

log = logging.getLogger("kaflite.cluster.metalog")

DIRECTORY = "__cluster_metadata-0"
INDEX_INTERVAL = 4096
# Kafka snapshots after metadata.log.max.record.bytes.between.snapshots (20 MiB);
# a record count bounds the replay work of a restart too.
SNAPSHOT_RECORDS = 50_000
SNAPSHOT_BYTES = 20 * 1024 * 1024
SNAPSHOT_TIMEOUT_S = 600


def _now_ms() -> int:
    return int(time.time() * 1000)


def _child_env() -> dict[str, str]:
    """The environment of the snapshot process: this kaflite's code first on its path
    (an installed kaflite of another version must not write our snapshots)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


class MetadataLog:
    def __init__(self, directory: Path, *, snapshot_records: int = SNAPSHOT_RECORDS,
                 snapshot_bytes: int = SNAPSHOT_BYTES) -> None:
        self.directory = directory
        self.snapshot_records = snapshot_records
        self.snapshot_bytes = snapshot_bytes
        self.directory.mkdir(parents=True, exist_ok=True)
        self.worker = Worker(f"metadata-log {directory}")
        self.next_offset = 0
        # the metadata.version in force at the end of the log: the record versions to
        # write (followed through every record recovered and appended)
        self.metadata_version = _versions.MINIMUM
        self.snapshot_offset = 0        # end offset of the newest snapshot (0: none)
        self._active: LogSegment | None = None
        self._since_snapshot = (0, 0)   # records, bytes appended since the last snapshot
        self._snapshotting = False
        # the thread waiting for the snapshot process (its own: a snapshot takes
        # seconds, and the worker's fsyncs must not wait behind it)
        self._snapshotter: threading.Thread | None = None
        # counters (read by tests and benchmarks)
        self.records_appended = 0
        self.batches_appended = 0
        self.bytes_appended = 0
        self.last_batch_bytes = 0
        self.snapshots_written = 0
        self.last_snapshot_bytes = 0
        self.recovered_records = 0
        self.truncated_bytes = 0

    # -- recovery --------------------------------------------------------------------------
    def recover(self, apply: Callable[[Struct], None]) -> bool:
        """Replay the newest snapshot and the log after it; False if there was nothing."""
        found = False

        def follow(record: Struct) -> None:
            self.metadata_version = _versions.after(record, self.metadata_version)
            apply(record)

        for offset, path in reversed(list_snapshots(self.directory)):
            try:
                records = read_snapshot(path)
            except ValueError as exc:
                log.warning("metadata snapshot %s is unusable (%s); trying an older one",
                            path.name, exc)
                continue
            for record in records:
                follow(record)
            self.snapshot_offset = self.next_offset = offset
            found = True
            break
        segments = sorted(int(p.stem) for p in self.directory.glob("*.log") if p.stem.isdigit())
        # segments wholly below the snapshot are obsolete (a crash before their removal)
        while len(segments) > 1 and segments[1] <= self.snapshot_offset:
            segments.pop(0)
        now = _now_ms()
        for i, base in enumerate(segments):
            if base > self.next_offset:
                raise RuntimeError(f"{self.directory}: the metadata log has a gap at "
                                   f"{self.next_offset}; the next segment starts at {base}")
            segment = LogSegment(self.directory, base, INDEX_INTERVAL, now)

            def on_batch(_info: object, view: memoryview) -> None:
                nonlocal found
                for offset, record in decode_batch(RecordBatch.from_buffer(view)):
                    if offset >= self.snapshot_offset:
                        follow(record)
                        self.recovered_records += 1
                        found = True

            self.truncated_bytes += segment.recover(on_batch)
            self.next_offset = max(self.next_offset, segment.next_offset)
            if i == len(segments) - 1 and segment.next_offset >= self.snapshot_offset:
                self._active = segment
            else:
                segment.close()
        if self.truncated_bytes:
            log.warning("%s: cut %d bytes of a torn metadata batch", self.directory,
                        self.truncated_bytes)
        return found

    # -- appending ---------------------------------------------------------------------------
    def append(self, records: Sequence[Struct]) -> int:
        """Append one batch of ``records``; its size in bytes. Does not wait for the disk."""
        if not records:
            return 0
        now = _now_ms()
        data, self.metadata_version = encode_batch_of(records, self.next_offset, now,
                                                      self.metadata_version)
        segment = self._segment()
        segment.append(data, self.next_offset + len(records) - 1, now)
        self.next_offset += len(records)
        self.records_appended += len(records)
        self.batches_appended += 1
        self.bytes_appended += len(data)
        self.last_batch_bytes = len(data)
        self.worker.sync(segment.log_path)
        n, size = self._since_snapshot
        self._since_snapshot = (n + len(records), size + len(data))
        if (n + len(records) >= self.snapshot_records or size + len(data) >= self.snapshot_bytes) \
                and not self._snapshotting:
            self.start_snapshot()
        return len(data)

    def _segment(self) -> LogSegment:
        if self._active is None:
            self._active = LogSegment(self.directory, self.next_offset, INDEX_INTERVAL, _now_ms())
        return self._active

    # -- snapshots ---------------------------------------------------------------------------
    def start_snapshot(self) -> None:
        """Snapshot the state at the current end offset, in the background."""
        if self._snapshotting or self.next_offset == self.snapshot_offset:
            return
        end = self.next_offset
        if self._active is not None:
            # Roll: every file below ``end`` is final from now on, so the worker
            # reads them while the loop appends to the new segment.
            self._active.seal()
            self._active.close()
            self.worker.sync(self._active.log_path)
            self._active = None
        self._since_snapshot = (0, 0)
        self._snapshotting = True
        self._snapshotter = threading.Thread(target=self._snapshot, args=(end,),
                                             name=f"metadata-snapshot {end}", daemon=True)
        self._snapshotter.start()

    def write_snapshot_now(self, records: Iterable[Struct]) -> None:
        """Write a snapshot at the end offset, synchronously: at startup only (the
        migration of a JSON metadata file), never on a running event loop."""
        _, size = write_snapshot(self.directory, self.next_offset, records, _now_ms(), _now_ms())
        self.snapshot_offset = self.next_offset
        self.snapshots_written += 1
        self.last_snapshot_bytes = size

    def _snapshot(self, end: int) -> None:
        """(snapshot thread) Build and write the snapshot at ``end``, then drop what it
        replaces."""
        try:
            try:
                done = subprocess.run(
                    [sys.executable, "-m", "kaflite.cluster.metalog._compactor",
                     str(self.directory), str(end)],
                    stdin=subprocess.DEVNULL, capture_output=True, text=True,
                    timeout=SNAPSHOT_TIMEOUT_S, check=False, env=_child_env())
            except OSError as exc:   # no interpreter to start: build it here instead
                log.warning("cannot start the snapshot process (%s); building it in-process",
                            exc)
                _compactor.build(self.directory, end)
            else:
                if done.returncode:
                    log.error("metadata snapshot at %d failed: %s", end, done.stderr[-2000:])
                    return
            self.last_snapshot_bytes = snapshot_path(self.directory, end).stat().st_size
            self.snapshot_offset = end
            self.snapshots_written += 1
            self._remove_below(end)
        finally:
            self._snapshotting = False

    def _remove_below(self, end: int) -> None:
        """(snapshot thread) Remove the snapshots before ``end`` and the segments below it."""
        for offset, path in list_snapshots(self.directory):
            if offset < end:
                path.unlink(missing_ok=True)
        for base in sorted(int(p.stem) for p in self.directory.glob("*.log") if p.stem.isdigit()):
            if base < end:
                LogSegment(self.directory, base, INDEX_INTERVAL, 0).delete()
        for part in self.directory.glob("*.checkpoint.part"):
            part.unlink(missing_ok=True)

    # -- the end -----------------------------------------------------------------------------
    def flush(self, timeout: float | None = None) -> bool:
        """Block until every append is fsynced and every snapshot written (tests, close)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        snapshotter = self._snapshotter
        if snapshotter is not None:
            snapshotter.join(timeout)
            if snapshotter.is_alive():
                return False
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return self.worker.drain(left)

    def close(self) -> None:
        self.flush()
        if self._active is not None:
            self._active.close()
