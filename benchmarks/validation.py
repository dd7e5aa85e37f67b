"""The cost of record-level validation on the broker's produce path, in one run.

    python benchmarks/validation.py [--mb 200] [--repeat 5]

A leader append (``PartitionLog.append_as_leader``: validation, offset
stamping, the write to the segment and its indexes, the producer state) of
``--mb`` MB of batches, timed twice in the same process on fresh logs:

* "batch checks only": the record-level checks (decoding every record,
  decompressing compressed batches, per-record timestamps) are switched off by
  patching them out, which is what the broker did before they were added;
* "Python": full validation by the columnar decoders (the C walker patched out);
* "C walker": the broker as ``make`` builds it (``_walk.c``).

Workloads: the shapes producers send, 1 MiB of records per batch:
100-byte and 1 KiB values with a 16-byte key, values of mixed sizes (50-1500
bytes, so the same-shape fast path does not apply), and lz4 and zstd
compressed batches of 1 KiB records (librdkafka's default codec is none, its
most used ones lz4 and zstd). The ratios are throughput with full
validation over batch-only throughput. Best of ``--repeat``.

Not a test. Results are recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kaflite.cluster.log import (
    LogConfig,
    PartitionLog,
    _validation,
)
from kaflite.protocol.records import Compression, RecordSummary, _broker, encode_batch

BATCH_BYTES = 1 << 20


def batches(kind: str, total: int) -> list[bytes]:
    rng = random.Random(7)
    size = {"100 B": 100, "1 KiB": 1024, "mixed": 0, "lz4 1 KiB": 1024, "zstd 1 KiB": 1024}[kind]
    codec = Compression.LZ4 if kind.startswith("lz4") else \
        Compression.ZSTD if kind.startswith("zstd") else Compression.NONE
    out: list[bytes] = []
    made = 0
    now = int(time.time() * 1000)
    while made < total:
        values: list[bytes | None] = []
        used = 0
        while used < BATCH_BYTES:
            n = size or rng.randint(50, 1500)
            # half-compressible values, as real payloads are
            v = rng.randbytes(n // 2) + bytes(n - n // 2)
            values.append(v)
            used += n + 30
        keys: list[bytes | None] = [rng.randbytes(16) for _ in values]
        b = encode_batch(values, keys=keys, timestamps=[now] * len(values), compression=codec)
        out.append(b)
        made += used
    return out


@contextlib.contextmanager
def batch_checks_only() -> Iterator[None]:
    saved = _validation.validate_records, _validation._check_timestamps
    nothing = RecordSummary(0, -1, -1)
    _validation.validate_records = lambda batch, **_: nothing  # type: ignore[assignment]
    _validation._check_timestamps = lambda *a: None  # type: ignore[assignment]
    try:
        yield
    finally:
        _validation.validate_records, _validation._check_timestamps = saved


@contextlib.contextmanager
def python_validation() -> Iterator[None]:
    saved = _broker._walk
    _broker._walk = None
    try:
        yield
    finally:
        _broker._walk = saved


def append_all(data: list[bytes]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        log = PartitionLog.open(Path(tmp) / "bench-0",
                                LogConfig(segment_bytes=1 << 30, max_message_bytes=2 << 20))
        start = time.perf_counter()
        for b in data:
            log.append_as_leader(b, 0)
        elapsed = time.perf_counter() - start
        log.close()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    assert _broker._walk is not None, "the C walker is not built (make builds it)"
    print("| workload | batch checks only MB/s | Python MB/s | C walker MB/s "
          "| ratio Python | ratio C |")
    print("|---|---|---|---|---|---|")
    for kind in ("100 B", "1 KiB", "mixed", "lz4 1 KiB", "zstd 1 KiB"):
        data = batches(kind, args.mb << 20)
        wire = sum(map(len, data)) / (1 << 20)
        best = {"off": float("inf"), "py": float("inf"), "c": float("inf")}
        for _ in range(args.repeat):   # alternate, so that other load falls on all alike
            with batch_checks_only():
                best["off"] = min(best["off"], append_all(data))
            with python_validation():
                best["py"] = min(best["py"], append_all(data))
            best["c"] = min(best["c"], append_all(data))
        off, py, c = (wire / best[k] for k in ("off", "py", "c"))
        print(f"| {kind} | {off:.0f} | {py:.0f} | {c:.0f} | {py / off:.2f} | {c / off:.2f} |",
              flush=True)

if __name__ == "__main__":
    main()
