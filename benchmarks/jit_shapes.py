"""Where numba's loops (``kaflite[jit]``) are used, and where not: the two choices measured.

For the shapes producers and consumers usually meet, 10,000 records of 100-byte
values with keys ``key-0``..``key-999``, one batch:

* encode: the table-driven Python encoder (``_keyed_parts``, what runs for values
  of one length) against numba's loop (``_jit.encode_keyed``, what runs for values
  of varied lengths), on the same columns;
* decode as ``bytes``: ``RecordBatch.columns(copy=True)`` (strided runs of one
  shape, what runs) against the bulk decoder with numba's walk (``decode_bulk``).

Each figure is the best of the repeats, in ns a record, the two interleaved.

Usage: python benchmarks/jit_shapes.py [--repeat N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

N = 10_000


def ns_a_record(fn: Callable[[], object], repeat: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best / N * 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    from kaflite.protocol.records import RecordBatch, _jit, encode_batch
    from kaflite.protocol.records._bulk import decode_bulk
    from kaflite.protocol.records._encode import _keyed_parts

    k = _jit.wait_ready(120)
    if k is None:
        raise SystemExit("numba's loops did not load: pip install kaflite[jit]")
    rnd = random.Random(1)
    keys = [b"key-%d" % (i % 1000) for i in range(N)]
    values = [rnd.randbytes(100) for _ in range(N)]
    klens, vlens = list(map(len, keys)), list(map(len, values))
    batch = RecordBatch.from_buffer(encode_batch(values, keys=keys, base_timestamp=1))
    section = bytes(batch.records_buffer())
    rows = [
        ("encode, table-driven Python (used)",
         lambda: b"".join(_keyed_parts(values, keys, None) or [])),
        ("encode, numba loop",
         lambda: b"".join(_jit.encode_keyed(k, values, keys, vlens, klens, None))),
        ("decode bytes, strided runs (used)", lambda: batch.columns(copy=True)),
        ("decode bytes, numba walk", lambda: decode_bulk(section, N, 0, 1)),
    ]
    best = dict.fromkeys((name for name, _ in rows), float("inf"))
    for _ in range(3):       # rounds: each row once per round, the best kept
        for name, fn in rows:
            best[name] = min(best[name], ns_a_record(fn, args.repeat))
    print(f"{N} records, 100-byte values, keys key-0..key-999; ns a record (best of "
          f"3 rounds of {args.repeat})")
    for name, ns in best.items():
        print(f"  {name:<40}{ns:>8.0f}")


if __name__ == "__main__":
    main()
