"""What bounds consume: each client's wall rate beside its own CPU time, against Tansu.

``clients.py`` times consume by the wall clock. When both clients get the same
rate with CPU to spare, the broker sets the pace, and the ratio says nothing of
the clients. Here confluent-kafka writes ``--records`` records of ``--size`` bytes
(``--keyed``: keys ``key-0``..``key-999``) to a Tansu topic, then kaflite's and
confluent-kafka's consume functions of ``clients.py`` read it, in rounds, with
the process's CPU time (``getrusage``) beside the wall time.

Usage: python benchmarks/consume_cpu.py [--size 1024] [--records 100000] [--keyed]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import clients  # the benchmark's own consume functions


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--keyed", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    n, value = args.records, b"x" * args.size
    keys = clients.bench_keys(n) if args.keyed else None
    readers = {"kaflite": clients.kaflite_consume, "confluent-kafka": clients.confluent_consume}
    print(f"{n} records of {args.size} B{' keyed' if args.keyed else ''} written by confluent-kafka"
          " to Tansu")
    with clients.tansu() as servers:
        topic = clients.create_topic(servers)
        clients.confluent_produce(servers, topic, value, n, keys, False)
        for r in range(args.rounds):
            for name, read in readers.items():
                c0, t0 = cpu_seconds(), time.perf_counter()
                read(servers, topic, value, n)
                wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
                print(f"round {r + 1} {name:<16}{n / wall:>12,.0f} rec/s  wall {wall * 1e3:6.0f} ms"
                      f"  CPU {cpu * 1e3:6.0f} ms ({cpu / wall:4.0%})"
                      f"  {cpu / n * 1e6:.2f} us CPU a record")


if __name__ == "__main__":
    main()
