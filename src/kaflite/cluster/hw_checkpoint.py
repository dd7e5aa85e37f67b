"""One broker's high-watermark checkpoint: Kafka's ``replication-offset-checkpoint``.

Kafka's ``ReplicaManager`` writes the high watermark of every partition it hosts
to one file per log directory, ``replication-offset-checkpoint`` (``0``, the
count, then ``topic partition offset`` lines), every
``replica.high.watermark.checkpoint.interval.ms`` (5 s) from a scheduler thread,
and once more at a clean shutdown. A restarted replica starts from it, so that
ListOffsets and Fetch do not go back to 0 while it learns the high watermark
again.

Here the snapshot of the offsets is taken on the broker's event loop (a dict of
ints, cheap), and the file is written in this broker's own worker thread: the
write replaces the file atomically (a ``.tmp``, fsync, rename, fsync of the
directory), and an fsync can wait on the file system's journal behind gigabytes
of dirty log pages; the event loop keeps serving meanwhile. At most one write is
in flight per broker: a write waits for the one before it to end, then takes its
snapshot.

A partition deleted while a write is in flight may still have its line in that
file (the snapshot was taken before); the next write drops it, and a restart
ignores the lines of partitions whose log is gone, so nothing comes back.

Data directories written before this file existed hold one
``replication-offset-checkpoint`` per partition directory; those are read for
the partitions the data directory's file has no line for, and removed once the
file holds their value.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kaflite.cluster.log import LogManager
from kaflite.cluster.log._files import (
    REPLICATION_OFFSET_CHECKPOINT,
    read_offset_checkpoints,
    write_offset_checkpoints,
)

__all__ = ["HighWatermarkCheckpoint"]

log = logging.getLogger("kaflite.cluster.hw_checkpoint")

TopicPartition = tuple[str, int]


def _write(path: Path, entries: Mapping[TopicPartition, int], legacy: list[Path]) -> None:
    """The worker thread's part: the file, then the per-partition files it replaces."""
    write_offset_checkpoints(path, entries)
    for old in legacy:
        with contextlib.suppress(OSError):      # its partition may be deleted meanwhile
            old.unlink(missing_ok=True)


class HighWatermarkCheckpoint:
    """The ``replication-offset-checkpoint`` file of one broker's data directory."""

    def __init__(self, data_dir: Path, thread_name: str = "kaflite-hw-checkpoint") -> None:
        self.path = data_dir / REPLICATION_OFFSET_CHECKPOINT
        self._thread_name = thread_name
        # Read at start, for the logs on disk that no partition hosts yet: a write
        # keeps their lines until the controller hands them to the broker.
        self.unhosted: dict[TopicPartition, int] = {}
        self._legacy: list[Path] = []
        self._written: dict[TopicPartition, int] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._inflight: asyncio.Future[None] | None = None
        self._lock = asyncio.Lock()
        self.writes = 0             # files written since the broker started

    # -- start ----------------------------------------------------------------------------
    def load(self, logs: LogManager) -> None:
        """Read the file (or the older per-partition files) for the logs on disk."""
        try:
            entries = read_offset_checkpoints(self.path)
        except (OSError, ValueError):
            # Kafka takes the log directory offline; kaflite starts the replicas
            # from 0, as before there was a checkpoint, and rewrites the file.
            log.exception("cannot read %s; high watermarks start from 0", self.path)
            entries = None
        self._written = entries
        hosted = logs.logs()
        found = {tp: hw for tp, hw in (entries or {}).items() if tp in hosted}
        for tp, plog in hosted.items():
            if tp in found:
                continue
            legacy = plog.legacy_high_watermark()
            if legacy is not None:
                found[tp] = legacy
                self._legacy.append(plog.legacy_high_watermark_path)
        self.unhosted = found

    def initial(self, tp: TopicPartition, log_end_offset: int) -> int:
        """The high watermark a replica of ``tp`` starts from, capped by its log end."""
        hw = self.unhosted.pop(tp, 0)
        return max(0, min(hw, log_end_offset))

    def forget(self, tp: TopicPartition) -> None:
        """``tp``'s log is deleted: its line goes from the next write."""
        self.unhosted.pop(tp, None)

    # -- writes ---------------------------------------------------------------------------
    async def write(
        self, snapshot: Callable[[], Awaitable[Mapping[TopicPartition, int]]]
    ) -> dict[TopicPartition, int] | None:
        """Write what ``snapshot()`` returns (awaited on the loop, once any write in
        flight has ended; it may take the partitions a chunk at a time, as each entry
        only has to be a high watermark the partition had) in the worker thread; the
        entries written, or None when they are those of the last write. OSError if the
        write failed."""
        async with self._lock:
            await self._wait_inflight()
            entries = dict(await snapshot())
            if entries == self._written and not self._legacy:
                return None
            legacy, self._legacy = self._legacy, []
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=self._thread_name)
            loop = asyncio.get_running_loop()
            self._inflight = loop.run_in_executor(
                self._executor, _write, self.path, entries, legacy)
            try:
                # Shielded: a cancelled caller (the periodic task at shutdown) does
                # not leave the thread's write behind unawaited; the next one waits.
                await asyncio.shield(self._inflight)
            except OSError:
                self._legacy = legacy + self._legacy
                raise
            self._written = entries
            self.writes += 1
            return entries

    async def _wait_inflight(self) -> None:
        inflight = self._inflight
        if inflight is not None and not inflight.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(inflight)

    async def close(self) -> None:
        """Wait for a write in flight, then let the worker thread go."""
        await self._wait_inflight()
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
