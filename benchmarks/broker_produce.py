"""The broker's produce path alone: this checkout against the code at REV, in one run.

    python benchmarks/broker_produce.py [--baseline REV] [--mb 300] [--repeat 5]

``benchmarks/broker.py`` drives brokers with librdkafka, whose batching adapts to
the broker's speed; on two shared cores its rounds vary by 2x or more. This one
sends the same stream of Produce requests to each broker (a one-broker
``kaflite up`` in its own process, loopback): ``--partitions`` partitions of 1 MB
batches per request, 5 requests in flight, acks=all, so the broker's work is the
same for both. It reports the wall-clock throughput and, steadier, MB per CPU
second of the broker process (from /proc): the throughput the broker would reach
if the produce path had a core to itself. The two brokers alternate, round by
round, so other load falls on both alike.

Record shapes: 1 KiB and 100 B values, and mixed 50-1500 B values with keys (the
records the same-shape fast path cannot take); ``tiny``: ten 100 B records per
partition a request, so that the per-request work (not the bytes) is measured.
Not a test; results are in docs/benchmarks.md.

``--request-log`` compares this checkout with the request log on (``kaflite up
--request-log``: a record per request, buffered and appended to
``__kaflite_requests``) against the same checkout without it, instead of a
baseline revision; ``--shapes tiny`` is the shape that shows its cost.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker import cpu_seconds, kaflite_broker

from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import CreateTopicsRequest, ProduceRequest
from kaflite.protocol.messages import create_topics_request as ct
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch

IN_FLIGHT = 5
SHAPES = ("1 KiB", "100 B", "mixed")
TINY = "tiny"


def batch(shape: str) -> bytes:
    rng = random.Random(5)
    now = int(time.time() * 1000)
    values: list[bytes | None] = []
    used = 0
    limit = 1_000 if shape == TINY else 1_000_000   # under message.max.bytes (1048588)
    while used < limit:
        n = {"1 KiB": 1024, "100 B": 100, TINY: 100}.get(shape) or rng.randint(50, 1500)
        values.append(rng.randbytes(n // 2) + bytes(n - n // 2))
        used += n + 20
    keys: list[bytes | None] | None = \
        [rng.randbytes(12) for _ in values] if shape == "mixed" else None
    return encode_batch(values, keys=keys, timestamps=[now] * len(values))


@dataclass
class Run:
    mb: float
    wall_s: float
    cpu_s: float
    requests: int = 0


async def drive(bootstrap: str, topic: str, records: bytes, requests: int, partitions: int
                ) -> float:
    host, port = bootstrap.rsplit(":", 1)
    conn = await BrokerConnection(host, int(port)).open()
    try:
        await conn.request(CreateTopicsRequest(topics=[ct.CreatableTopic(
            name=topic, num_partitions=partitions, replication_factor=1)], timeout_ms=10000))
        req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[pq.TopicProduceData(
            name=topic, partition_data=[pq.PartitionProduceData(p, records) for p in range(partitions)])])
        gate = asyncio.Semaphore(IN_FLIGHT)

        async def one() -> None:
            async with gate:
                resp = await conn.request(req, timeout=120)
                codes = {p.error_code for t in resp.responses for p in t.partition_responses}
                if codes != {0}:
                    raise RuntimeError(f"produce failed: {codes}")

        await one()   # warm-up: the topic is led and the connection trusted
        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(requests)))
        return time.perf_counter() - start
    finally:
        conn.close()


def run_one(bootstrap: str, pid: int, shape: str, records: bytes, mb: int, partitions: int
            ) -> Run:
    requests = max(1, mb * (1 << 20) // (len(records) * partitions))
    topic = f"p-{shape.replace(' ', '')}-{time.time_ns()}"
    before = cpu_seconds(pid)
    wall = asyncio.run(drive(bootstrap, topic, records, requests, partitions))
    cpu = cpu_seconds(pid) - before
    return Run(requests * partitions * len(records) / (1 << 20), wall, cpu, requests)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", default="9b14fa6",
                    help="git revision to compare with (default: before record validation)")
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--request-log", action="store_true",
                    help="compare with the request log on and off, both this checkout")
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help=f"record shapes, comma-separated ({', '.join(SHAPES)}, {TINY})")
    args = ap.parse_args()
    from broker import PIDS
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    if args.request_log:
        names = ("kaflite+request-log", "kaflite")
        brokers_cm = (kaflite_broker(extra=("--request-log",)), kaflite_broker())
    else:
        names = ("kaflite", f"kaflite@{args.baseline}")
        brokers_cm = (kaflite_broker(), kaflite_broker(args.baseline))
    runs: dict[tuple[str, str], list[Run]] = {}
    with brokers_cm[0] as now, brokers_cm[1] as then:
        brokers = ((names[0], now), (names[1], then))
        for shape in shapes:
            records = batch(shape)
            for i in range(args.repeat):
                for name, bootstrap in brokers if i % 2 == 0 else brokers[::-1]:
                    r = run_one(bootstrap, PIDS[bootstrap], shape, records, args.mb,
                                args.partitions)
                    runs.setdefault((shape, name), []).append(r)
                    print(f"{shape:6} round {i + 1} {name:18} {r.mb / r.wall_s:7.0f} MB/s  "
                          f"broker CPU {r.cpu_s:5.2f} s  {r.mb / r.cpu_s:6.0f} MB per CPU-s  "
                          f"{r.requests / r.wall_s:6.0f} requests/s  "
                          f"{r.requests / r.cpu_s:6.0f} per CPU-s",
                          flush=True)
    med = statistics.median
    print(f"\n{args.mb} MB per round, {args.partitions} batches per request, acks=all, "
          f"median (best) of {args.repeat} rounds")
    print(f"| records | {names[0]} MB/s | {names[1]} MB/s | {names[0]} MB per CPU-s | "
          f"{names[1]} MB per CPU-s | ratio (per CPU-s) |")
    print("|---|---|---|---|---|---|")
    for shape in shapes:
        a, b = runs[(shape, names[0])], runs[(shape, names[1])]
        wall_a = [r.mb / r.wall_s for r in a]
        wall_b = [r.mb / r.wall_s for r in b]
        cpu_a = [r.mb / r.cpu_s for r in a]
        cpu_b = [r.mb / r.cpu_s for r in b]
        print(f"| {shape} | {med(wall_a):.1f} ({max(wall_a):.1f}) | "
              f"{med(wall_b):.1f} ({max(wall_b):.1f}) | {med(cpu_a):.1f} ({max(cpu_a):.1f}) | "
              f"{med(cpu_b):.1f} ({max(cpu_b):.1f}) | {med(cpu_a) / med(cpu_b):.2f} "
              f"({max(cpu_a) / max(cpu_b):.2f}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
