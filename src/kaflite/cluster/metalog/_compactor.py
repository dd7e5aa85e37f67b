"""Build a metadata snapshot from the files below an offset, in a process of its own.

    python -m kaflite.cluster.metalog._compactor <metadata log directory> <end offset>

Theory of operation (KIP-630): the snapshot at offset X is the state after every
record below X. Everything below X is in immutable files once the log has
rolled at X: the previous snapshot and the segments between it and X. So the
snapshot can be built from files alone, without the live controller: replay
them into an empty model, write the model's records (``_snapshot``).

``MetadataLog`` runs this in a child process, waited for by its worker thread.
Building in a thread of the broker's own process was measured to stall its event
loop up to 126 ms at 20,000 partitions (benchmarks/metadata_scale.py): the
replay's allocations set off full garbage collections of the whole process,
which hold the GIL throughout. A child process shares neither heap nor GIL.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

from kaflite.cluster.metalog._codec import decode_batch
from kaflite.cluster.metalog._image import replay, snapshot_records
from kaflite.cluster.metalog._snapshot import list_snapshots, read_snapshot, write_snapshot
from kaflite.protocol.messages._runtime import Struct
from kaflite.protocol.records import iter_batches

__all__ = ["build", "main", "records_below"]


def records_below(directory: Path, end: int, last_ms: list[int] | None = None
                  ) -> Iterator[Struct]:
    """The newest readable snapshot at or below ``end``, then the log's records below
    ``end``; ``last_ms`` (if given) ends up holding the newest batch timestamp read."""
    start = 0
    for offset, path in reversed(list_snapshots(directory)):
        if offset > end:
            continue
        try:
            records = read_snapshot(path)
        except ValueError:
            continue
        yield from records
        start = offset
        break
    for base in sorted(int(p.stem) for p in directory.glob("*.log") if p.stem.isdigit()):
        if base >= end:
            break
        for batch in iter_batches((directory / f"{base:020d}.log").read_bytes()):
            if last_ms is not None and batch.base_offset < end:
                last_ms.append(batch.max_timestamp)
            for offset, record in decode_batch(batch):
                if start <= offset < end:
                    yield record


def build(directory: Path, end: int) -> int:
    """Write the snapshot at ``end``; its size in bytes."""
    from kaflite.cluster.controller import Controller  # the model's home imports this package

    state = Controller(None)
    stamps: list[int] = []
    for record in records_below(directory, end, stamps):
        replay(state, record)
    now = int(time.time() * 1000)
    # SnapshotHeaderRecord.LastContainedLogTimestamp: the append time of the last
    # record the snapshot contains
    last = max(stamps, default=now)
    _, size = write_snapshot(directory, end, snapshot_records(state), last, now)
    return size


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        print("usage: python -m kaflite.cluster.metalog._compactor DIRECTORY END_OFFSET",
              file=sys.stderr)
        return 2
    build(Path(argv[0]), int(argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
