"""What the console costs the brokers: produce throughput with and without it.

    python benchmarks/console.py [--records 1000000] [--repeat 3]

Each round starts a 3-broker ``kaflite up`` in its own process (loopback) three
times: with the console off (``--http-port -1``); "quiet", the console on with
its background work only (cluster watch every 0.5 s, metrics samples every
second, group lag every 5 s for a group with committed offsets); and "on", the
same with a browser's worth of clients in a process of their own: one polling
``/api/cluster``, ``/api/topics``, the topic, ``/api/groups``, ``/api/series``
and ``/api/clients`` every second, one reading the live stream. First the cluster idles for 10 s: the CPU it uses
then (as a share of one core) is what the console's background work and its
polling page cost by themselves, steadier than any throughput figure on a shared
machine. Then a confluent-kafka producer (librdkafka) sends
``--records`` 100-byte records (acks=all, 6 partitions, replication factor 3)
and we take the wall-clock rate and the cluster process's CPU seconds per MB
(from /proc). Off and on alternate round by round, so other load falls on both
alike; the table gives medians. Not a test; results are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker import cpu_seconds, free_ports, wait_port

SharedCounts = Any   # multiprocessing.Array("l", 2): API calls, stream events
TOPIC = "bench-console"
MODES = ("off", "quiet", "on")
VALUE = b"v" * 100
IDLE_S = 10.0
PATHS = ("/api/cluster", "/api/topics", f"/api/topics/{TOPIC}", "/api/groups",
         "/api/series", "/api/clients")


@dataclass
class Cluster:
    bootstrap: str
    pid: int
    http: str | None


@contextlib.contextmanager
def kaflite_up(console: bool) -> Iterator[Cluster]:
    ports = free_ports(4)
    data = tempfile.mkdtemp(prefix="kaflite-bench-console-")
    env = {**os.environ, "KAFLITE_STATE_DIR": str(Path(data) / "state")}
    http_port = ports + 3 if console else -1
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite.cli", "up", "--brokers", "3", "--base-port",
         str(ports), "--data-dir", str(Path(data) / "log"), "--http-port", str(http_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        for i in range(3):
            wait_port(ports + i)
        if console:
            wait_port(http_port)
        yield Cluster(",".join(f"127.0.0.1:{ports + i}" for i in range(3)), proc.pid,
                      f"http://127.0.0.1:{http_port}" if console else None)
    finally:
        proc.terminate()
        proc.wait(60)


def poll_api(base: str, counts: SharedCounts) -> None:
    """A browser's worth of polling: every route the pages read, once a second."""
    while True:
        for path in PATHS:
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(base + path, timeout=30) as resp:
                resp.read()
                counts[0] += 1
        time.sleep(1.0)


def read_stream(base: str, counts: SharedCounts) -> None:
    with contextlib.suppress(OSError), \
            urllib.request.urlopen(base + "/api/stream", timeout=60) as resp:
        while line := resp.readline():
            if line.startswith(b"event:"):
                counts[1] += 1


def page(base: str, counts: SharedCounts) -> None:
    """The browser, in a process of its own (until terminated)."""
    threading.Thread(target=read_stream, args=(base, counts), daemon=True).start()
    poll_api(base, counts)


def prepare(bootstrap: str) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 6, 3)]).values():
        future.result(30)
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-lag",
                            "enable.auto.commit": False})
    consumer.commit(offsets=[ck.TopicPartition(TOPIC, p, 0) for p in range(6)],
                    asynchronous=False)
    consumer.close()


def produce(bootstrap: str, records: int) -> float:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                            "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, VALUE, key=b"%d" % (i % 1000))
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("records left unsent")
    return time.perf_counter() - started


@dataclass
class Round:
    rate: float        # records per second
    cpu_per_mb: float  # cluster CPU seconds per MB of values
    idle_cpu: float    # cluster CPU seconds per second with no produce load
    api_calls: int
    events: int


def one_round(mode: str, records: int) -> Round:
    with kaflite_up(mode != "off") as cluster:
        prepare(cluster.bootstrap)
        counts: SharedCounts = multiprocessing.Array("l", 2)
        browser = None
        if cluster.http is not None and mode == "on":
            browser = multiprocessing.Process(target=page, args=(cluster.http, counts))
            browser.start()
        time.sleep(2)          # the samplers and pollers are running before we measure
        idle0, t0 = cpu_seconds(cluster.pid), time.perf_counter()
        time.sleep(IDLE_S)
        idle = (cpu_seconds(cluster.pid) - idle0) / (time.perf_counter() - t0)
        cpu0 = cpu_seconds(cluster.pid)
        wall = produce(cluster.bootstrap, records)
        cpu = cpu_seconds(cluster.pid) - cpu0
        if browser is not None:
            browser.terminate()
            browser.join(10)
    mb = records * len(VALUE) / 1e6
    return Round(records / wall, cpu / mb, idle, counts[0], counts[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[Round]] = {m: [] for m in MODES}
    for i in range(args.repeat):
        order = MODES if i % 2 == 0 else MODES[::-1]
        for mode in order:
            r = one_round(mode, args.records)
            runs[mode].append(r)
            print(f"round {i + 1} console {mode:5}: {r.rate:,.0f} records/s, "
                  f"{r.cpu_per_mb:.4f} CPU s/MB, idle {r.idle_cpu * 100:.1f}% of a core, "
                  f"{r.api_calls} API calls, {r.events} stream events", flush=True)
    out: dict[str, object] = {"records": args.records, "repeat": args.repeat}
    off = runs["off"]
    for mode in MODES:
        rate = statistics.median(r.rate for r in runs[mode])
        cpu = statistics.median(r.cpu_per_mb for r in runs[mode])
        idle = statistics.median(r.idle_cpu for r in runs[mode])
        row: dict[str, float] = {"records_per_s": round(rate), "cpu_s_per_mb": round(cpu, 4),
                                 "idle_core_pct": round(idle * 100, 2)}
        if mode != "off":
            row["throughput_cost_pct"] = round(
                (1 - rate / statistics.median(r.rate for r in off)) * 100, 1)
            row["cpu_cost_pct"] = round(
                (cpu / statistics.median(r.cpu_per_mb for r in off) - 1) * 100, 1)
        out[mode] = row
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
