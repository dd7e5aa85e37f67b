"""What a high-watermark checkpoint costs the broker's event loop while its log is written.

    python benchmarks/hw_checkpoint.py [--partitions 6] [--seconds 30] [--dir DIR]

A writer process appends to 1 GiB files in ``--dir`` with 1 MiB writes and no
fsync for ``--seconds`` (as a broker writes its segments: dirty pages left to
the kernel).
Meanwhile, every 0.5 s, this process writes a checkpoint of ``--partitions``
partitions the two ways kaflite has done it:

* ``per-partition``: one ``replication-offset-checkpoint`` per partition directory,
  each replaced atomically (write, fsync, rename, fsync of the directory), all on
  the event loop (the code before it moved): the loop is blocked for the whole time;
* ``per-dir, thread``: one file for all of them, written in a worker thread; the
  loop only takes the snapshot. A loop-lag probe (a callback every 1 ms) reports
  the longest the loop waited during the write.

Printed: per checkpoint, the wall time the loop was blocked, as percentiles.
This is a benchmark, not a test; results are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kaflite.cluster.log._files import write_offset_checkpoint, write_offset_checkpoints

MIB = 1 << 20


def writer(directory: str, seconds: float) -> None:
    """1 MiB writes for ``seconds``, in 1 GiB segments; the one before last is
    deleted as a new one starts (retention), so the disk use stays bounded."""
    block = os.urandom(MIB)
    deadline = time.monotonic() + seconds
    segments: list[str] = []
    while time.monotonic() < deadline:
        path = os.path.join(directory, f"{len(segments) * 1024:020d}.log")
        segments.append(path)
        if len(segments) > 2:
            os.unlink(segments[-3])
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(1024):
                os.write(fd, block)
                if time.monotonic() >= deadline:
                    break
        finally:
            os.close(fd)


def old_style(root: Path, partitions: int, hw: int) -> None:
    for i in range(partitions):
        write_offset_checkpoint(root / f"t-{i}" / "replication-offset-checkpoint", "t", i, hw)


async def lag_probe(stop: asyncio.Event, worst: list[float]) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        worst[0] = max(worst[0], now - last)
        last = now


async def measure(root: Path, partitions: int, proc: mp.process.BaseProcess) -> None:
    pool = ThreadPoolExecutor(1)
    loop = asyncio.get_running_loop()
    blocked: dict[str, list[float]] = {"per-partition": [], "per-dir, thread": []}
    hw = 0
    while proc.is_alive():
        hw += 1
        t0 = time.perf_counter()
        old_style(root, partitions, hw)                       # on the loop
        blocked["per-partition"].append(time.perf_counter() - t0)
        worst = [0.0]
        stop = asyncio.Event()
        probe = asyncio.create_task(lag_probe(stop, worst))
        await asyncio.sleep(0.005)
        worst[0] = 0.0
        snapshot = {("t", i): hw for i in range(partitions)}  # the loop's part
        await loop.run_in_executor(pool, write_offset_checkpoints,
                                   root / "replication-offset-checkpoint", snapshot)
        stop.set()
        await probe
        blocked["per-dir, thread"].append(worst[0])
        await asyncio.sleep(0.5)
    pool.shutdown()
    for name, values in blocked.items():
        values.sort()
        q = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else values * 99
        print(f"{name:16} {len(values):3} checkpoints: loop blocked p50 "
              f"{q[49] * 1000:8.2f} ms  p99 {q[98] * 1000:8.2f} ms  max {values[-1] * 1000:8.2f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--dir", default=None, help="where to write (default: the temp dir)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kaflite-hwckpt-", dir=args.dir))
    try:
        for i in range(args.partitions):
            (root / f"t-{i}").mkdir()
        proc = mp.get_context("spawn").Process(
            target=writer, args=(str(root / "t-0"), args.seconds))
        proc.start()
        asyncio.run(measure(root, args.partitions, proc))
        proc.join()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
