"""What the console costs the brokers: produce throughput with and without it.

    python benchmarks/console.py [--records 1000000] [--repeat 3]

Each round starts a 3-broker ``kaflite up`` in its own process (loopback), once
with the console off (``--http-port -1``) and once with it on, its background
work running (cluster watch every 0.5 s, metrics samples every second, group lag
every 5 s for a group with committed offsets) and, in this process, a browser's
worth of clients: one polling ``/api/cluster``, ``/api/topics``, the topic,
``/api/groups``, ``/api/series`` and ``/api/clients`` every second, and one
reading the live stream. First the cluster idles for 10 s: the CPU it uses
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from broker import cpu_seconds, free_ports, wait_port

TOPIC = "bench-console"
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


def poll_api(base: str, stop: threading.Event, counts: list[int]) -> None:
    """A browser's worth of polling: every route the pages read, once a second."""
    while not stop.is_set():
        for path in PATHS:
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(base + path, timeout=30) as resp:
                resp.read()
                counts[0] += 1
        stop.wait(1.0)


def read_stream(base: str, stop: threading.Event, counts: list[int]) -> None:
    with contextlib.suppress(OSError), \
            urllib.request.urlopen(base + "/api/stream", timeout=60) as resp:
        while not stop.is_set():
            line = resp.readline()
            if not line:
                break
            if line.startswith(b"event:"):
                counts[1] += 1


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


def one_round(console: bool, records: int) -> Round:
    with kaflite_up(console) as cluster:
        prepare(cluster.bootstrap)
        stop = threading.Event()
        counts = [0, 0]
        threads = []
        if cluster.http is not None:
            threads = [threading.Thread(target=poll_api, args=(cluster.http, stop, counts)),
                       threading.Thread(target=read_stream, args=(cluster.http, stop, counts))]
            for t in threads:
                t.start()
        time.sleep(2)          # the samplers and pollers are running before we measure
        idle0, t0 = cpu_seconds(cluster.pid), time.perf_counter()
        time.sleep(IDLE_S)
        idle = (cpu_seconds(cluster.pid) - idle0) / (time.perf_counter() - t0)
        cpu0 = cpu_seconds(cluster.pid)
        wall = produce(cluster.bootstrap, records)
        cpu = cpu_seconds(cluster.pid) - cpu0
        stop.set()
        for t in threads:
            t.join(5)
    mb = records * len(VALUE) / 1e6
    return Round(records / wall, cpu / mb, idle, counts[0], counts[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs: dict[bool, list[Round]] = {False: [], True: []}
    for i in range(args.repeat):
        for console in (False, True) if i % 2 == 0 else (True, False):
            r = one_round(console, args.records)
            runs[console].append(r)
            print(f"round {i + 1} console {'on ' if console else 'off'}: "
                  f"{r.rate:,.0f} records/s, {r.cpu_per_mb:.3f} CPU s/MB, "
                  f"idle {r.idle_cpu * 100:.1f}% of a core, "
                  f"{r.api_calls} API calls, {r.events} stream events", flush=True)
    off_rate = statistics.median(r.rate for r in runs[False])
    on_rate = statistics.median(r.rate for r in runs[True])
    off_cpu = statistics.median(r.cpu_per_mb for r in runs[False])
    on_cpu = statistics.median(r.cpu_per_mb for r in runs[True])
    off_idle = statistics.median(r.idle_cpu for r in runs[False])
    on_idle = statistics.median(r.idle_cpu for r in runs[True])
    print(json.dumps({"records": args.records, "repeat": args.repeat,
                      "off_idle_core_pct": round(off_idle * 100, 2),
                      "on_idle_core_pct": round(on_idle * 100, 2),
                      "off_records_per_s": round(off_rate), "on_records_per_s": round(on_rate),
                      "throughput_cost_pct": round((1 - on_rate / off_rate) * 100, 1),
                      "off_cpu_s_per_mb": round(off_cpu, 3), "on_cpu_s_per_mb": round(on_cpu, 3),
                      "cpu_cost_pct": round((on_cpu / off_cpu - 1) * 100, 1)}, indent=1))


if __name__ == "__main__":
    main()
