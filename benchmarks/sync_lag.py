"""Where the sync producer's time goes between ``produce()`` and the acknowledgement.

Not a test. kaflite's sync ``Producer`` builds batches in the caller's thread and
its loop thread encodes, sends and completes them; the two share the GIL. This
produces ``--records`` records of ``--size`` bytes (``--keyed``: keys
``key-0``..``key-999``) to a one-partition topic on Tansu (or ``--broker kaflite``) with the default configs,
and with a delivery callback on every ``--every``-th record prints, for each, when
``produce()`` was called and when its acknowledgement ran (ms from the first
call), then how long the ``produce()`` loop and the ``flush()`` took. A lag that
grows through the loop means the loop thread falls behind the caller, and the
batches it did not send meanwhile go out during ``flush()``.

Usage: python benchmarks/sync_lag.py [--records 200000] [--size 100] [--keyed]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import clients  # the benchmark's broker and topic helpers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--keyed", action="store_true")
    ap.add_argument("--every", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--broker", choices=["tansu", "kaflite"], default="tansu")
    args = ap.parse_args()
    from kaflite.client.sync import Producer

    n, value = args.records, b"x" * args.size
    keys: Sequence[bytes | None] = clients.bench_keys(n) if args.keyed else [None] * n
    with clients.tansu() if args.broker == "tansu" else clients.kaflite_broker() as servers:
        for r in range(args.rounds):
            topic = clients.create_topic(servers)
            sent: dict[int, float] = {}
            acked: dict[int, float] = {}
            with Producer(bootstrap_servers=servers) as p:
                produce = p.produce
                t0 = time.perf_counter()
                for i, k in enumerate(keys):
                    if i % args.every:
                        produce(topic, value, k)
                    else:
                        sent[i] = time.perf_counter()
                        produce(topic, value, k, on_delivery=lambda err, md, i=i, a=acked:
                                a.__setitem__(i, time.perf_counter()))
                t1 = time.perf_counter()
                p.flush()
                t2 = time.perf_counter()
            print(f"round {r + 1}: produce() loop {(t1 - t0) * 1e3:.1f} ms, flush() "
                  f"{(t2 - t1) * 1e3:.1f} ms, {n / (t2 - t0):,.0f} records/s")
            for i, at in sent.items():
                done = acked.get(i, float("nan"))
                print(f"  record {i:>7}: produce() at {(at - t0) * 1e3:6.1f} ms, acknowledged at "
                      f"{(done - t0) * 1e3:6.1f} ms (lag {(done - at) * 1e3:5.1f} ms)")


if __name__ == "__main__":
    main()
