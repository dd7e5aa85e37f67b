"""Which ``batch.size`` and ``linger.ms`` suit kaflite's producer? (Not a test.)

Starts one Tansu broker and, for each candidate configuration, produces N
records with the sync ``Producer.produce()`` (the call most applications make),
keyed (1,000 distinct keys) and unkeyed, 100-byte and 1 KB values, to a fresh
6-partition topic, then flushes. Rounds run every configuration once, so what
else the machine does falls on all alike; each cell is the best of the rounds
in records per second, with the producer process's CPU seconds beside it::

    .venv/bin/python benchmarks/producer_defaults.py --records 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from clients import bench_keys, create_topic, tansu

CANDIDATES = [(16_384, 5), (65_536, 5), (262_144, 5), (1_048_576, 5), (1_048_576, 0),
              (1_048_576, 20)]


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(servers: str, batch_size: int, linger: int, keyed: bool, size: int, n: int
        ) -> tuple[float, float]:
    from kaflite.client.sync import Producer

    topic = create_topic(servers, partitions=6)
    value = b"x" * size
    keys: Sequence[bytes | None] = bench_keys(n) if keyed else [None] * n
    with Producer(bootstrap_servers=servers, batch_size=batch_size, linger_ms=linger) as p:
        p.send(topic, value)
        c0, t0 = cpu(), time.perf_counter()
        produce = p.produce
        for k in keys:
            produce(topic, value, k)
        p.flush()
        secs, used = time.perf_counter() - t0, cpu() - c0
    return n / secs, used


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    best: dict[tuple[int, int, bool, int], tuple[float, float]] = {}
    with tansu() as servers:
        for _ in range(args.repeat):
            for size in (100, 1024):
                n = args.records if size == 100 else args.records // 4
                for keyed in (False, True):
                    for bs, linger in CANDIDATES:
                        rate, used = run(servers, bs, linger, keyed, size, n)
                        key = (bs, linger, keyed, size)
                        if key not in best or rate > best[key][0]:
                            best[key] = (rate, used / n * 1e6)
    print("| batch.size | linger.ms | 100 B unkeyed | 100 B keyed | 1 KB unkeyed | 1 KB keyed |")
    print("|---:|---:|---:|---:|---:|---:|")
    for bs, linger in CANDIDATES:
        cells = [f"{best[(bs, linger, k, s)][0]:,.0f} ({best[(bs, linger, k, s)][1]:.2f} µs)"
                 for s in (100, 1024) for k in (False, True)]
        print(f"| {bs:,} | {linger} | " + " | ".join(cells) + " |")
    print("\nmsg/s, best of the rounds (CPU µs per record of the producer's process)")


if __name__ == "__main__":
    main()
