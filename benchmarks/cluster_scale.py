"""Does a kaflite cluster keep answering as it grows? (issue 36, part 2)

    python benchmarks/cluster_scale.py [--sizes 100,1000,5000,20000] [--seconds 20]
                                       [--processes] [--out scale.md] [--profile DIR]

For each size: a fresh 3-broker cluster in its own process (``kaflite.verify``'s
``ClusterProcess``, data on disk), grown to that many partitions at RF 3 (idle
topics of 100 partitions, created 1,000 partitions a request), then a producer
(acks=all) and a consumer group running on a 6-partition topic, then one broker
killed and restarted, and the cluster waited on until every ISR is whole again.
Throughout, an ApiVersions probe (``kaflite.verify._probe``) asks each broker
every 100 ms, and the cluster's own event-loop lag (``kaflite_event_loop_lag_ms``
on ``/metrics``) is read at the end of each phase.

It reports, a row per size: the time to create the partitions (per partition,
which includes each partition's log files), ApiVersions p99 and worst while
steady and around the broker's crash and return, the loop lag's p99 and worst,
and how long the ISRs took to be whole again. Cost per metadata change must stay
flat as partitions grow; the p99 must stay in milliseconds.

The cluster's process collects garbage with ``kaflite.cluster.gc_policy`` (full
collections walk what is new); ``KAFLITE_GC=cpython`` in the environment runs it with
CPython's own policy instead, to compare. Collections of 250 ms or more are counted
from the cluster's log (``KAFLITE_LOOP_STALL_MS``, set to 250 unless given).

Not a test; its figures are in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from kaflite.client import NewTopic
from kaflite.client.sync import Admin, Consumer, Producer
from kaflite.cluster.loop_lag import STALL_ENV
from kaflite.verify._probe import ApiVersionsProbe
from kaflite.verify.control import ClusterProcess
from kaflite.verify.runner import fill_partitions

CONFIG = {"replica.lag.time.max.ms": 10000, "offsets.topic.num.partitions": 6,
          "min.insync.replicas": 2, "group.initial.rebalance.delay.ms": 0}


def create(servers: str, partitions: int) -> float:
    """The idle partitions (``kaflite.verify``'s filler topics of 100 partitions, 1,000
    partitions a request) and the traffic topic; the seconds taken."""
    started = time.perf_counter()
    fill_partitions(servers, partitions)
    admin = Admin({"bootstrap.servers": servers})
    try:
        admin.create_topics([NewTopic("traffic", 6, 3)])
    finally:
        admin.close()
    return time.perf_counter() - started


class Traffic:
    """A producer (acks=all, 200 records/s) and a consumer group on ``traffic``."""

    def __init__(self, servers: str) -> None:
        self.servers = servers
        self.stop = threading.Event()
        self.acked = 0
        self.consumed = 0
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> Traffic:
        for t in self.threads:
            t.start()
        return self

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.servers, "acks": "all", "linger.ms": 5})

        def acked(*args: Any) -> None:
            if args and args[0] is None:
                self.acked += 1
        i = 0
        while not self.stop.is_set():
            p.produce("traffic", f"v{i}".encode(), key=f"k{i % 100}".encode(),
                      on_delivery=acked)
            i += 1
            if i % 20 == 0:
                time.sleep(0.1)
        p.flush(30)
        p.close()

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.servers, "group.id": "scale",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["traffic"])
        while not self.stop.is_set():
            self.consumed += len(c.poll(timeout_ms=200))
        c.close()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)


def loop_lag(cluster: ClusterProcess) -> dict[str, float]:
    with urllib.request.urlopen(cluster.url + "/metrics", timeout=120) as resp:
        text = resp.read().decode()
    out = {}
    for stat, value in re.findall(r'kaflite_event_loop_lag_ms\{stat="(\w+)"\} ([0-9.e+]+)',
                                  text):
        out[stat] = float(value)
    return out


def whole(cluster: ClusterProcess, timeout: float = 300) -> float:
    """Seconds until every partition's ISR has all its replicas again (and a leader).

    It asks the console's summary (``/api/cluster``: counts only), not ``/cluster``,
    whose JSON of every partition, twice a second, was a quarter of the loop's time
    in the crash phase at 20,000 partitions: the measurement disturbed what it
    measured."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        with urllib.request.urlopen(cluster.url + "/api/cluster", timeout=120) as resp:
            summary = json.loads(resp.read())
        if summary["under_replicated"] == 0 and summary["offline"] == 0:
            return time.monotonic() - started
        time.sleep(0.5)
    return float("inf")


class Profile:
    """``py-spy record`` of the cluster process for one phase (``--profile DIR``), as
    collapsed stacks in DIR/<size>-<phase>.txt; nothing without a directory."""

    def __init__(self, out: Path | None, cluster: ClusterProcess, name: str) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        if out is None or cluster.proc is None:
            return
        out.mkdir(parents=True, exist_ok=True)
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.proc = subprocess.Popen(
            [spy, "record", "--pid", str(cluster.proc.pid), "--format", "raw", "--rate", "100",
             "--nonblocking", "-o", str(out / f"{name}.txt")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1)   # attached before the phase begins

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)   # py-spy writes its file on SIGINT
            self.proc.wait(60)


GC_LINE = re.compile(r"garbage collection of generation (\d) took (\d+) ms")


def long_collections(log: Path) -> list[int]:
    """The collections of the cluster's process that took ``KAFLITE_LOOP_STALL_MS`` or
    longer (``cluster/loop_lag.py`` logs them), in ms; all phases."""
    if not log.is_file():
        return []
    return [int(m.group(2)) for m in GC_LINE.finditer(log.read_text(errors="replace"))]


def one(size: int, seconds: float, processes: bool,
        profile: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kaflite-scale-") as tmp:
        cluster = ClusterProcess(Path(tmp), config=CONFIG, processes=processes,
                                 start_timeout=120).start()
        try:
            servers = cluster.bootstrap_servers
            created = create(servers, size)
            traffic = Traffic(servers).start()
            spy = Profile(profile, cluster, f"{size}-steady")
            probe = ApiVersionsProbe(servers, interval_s=0.1, timeout_s=120).start()
            time.sleep(seconds)
            steady = probe.stop()
            spy.stop()
            lag_steady = loop_lag(cluster)
            spy = Profile(profile, cluster, f"{size}-crash")
            probe = ApiVersionsProbe(servers, interval_s=0.1, timeout_s=120).start()
            cluster.post("/brokers/1/kill")
            time.sleep(5)
            cluster.post("/brokers/1/restart")
            healed = whole(cluster)
            around = probe.stop()
            spy.stop()
            lag_crash = loop_lag(cluster)
            traffic.close()
            log = Path(tmp) / "cluster.log"
            if profile is not None and log.is_file():   # the loop's stalls' stacks
                shutil.copy(log, profile / f"{size}-cluster.log")
            return {"size": size, "create_s": created, "steady": steady, "crash": around,
                    "lag_steady": lag_steady, "lag_crash": lag_crash, "healed_s": healed,
                    "acked": traffic.acked, "consumed": traffic.consumed,
                    "long_gcs": long_collections(log)}
        finally:
            cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000,20000")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--processes", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--profile", type=Path, default=None,
                    help="py-spy the cluster process in each phase (collapsed stacks here)")
    args = ap.parse_args()
    # where the loop stalls 250 ms or more: its stack, and each collection as long, logged
    os.environ.setdefault(STALL_ENV, "250")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        r = one(size, args.seconds, args.processes, args.profile)
        rows.append(r)
        print(r, flush=True)
    lines = ["| partitions | create (ms/partition) | ApiVersions p99 / worst, steady (ms) | "
             "ApiVersions p99 / worst, crash (ms) | loop lag p99 / worst (ms) | "
             "ISRs whole after restart (s) | collections >= 250 ms (count / worst ms) | "
             "acked | consumed |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s, c = r["steady"], r["crash"]
        lag = r["lag_crash"]
        lines.append(
            f"| {r['size']} | {r['create_s'] * 1000 / r['size']:.2f} | "
            f"{s.get('apiversions p99 (ms)', '-')} / {s.get('apiversions worst (ms)', '-')} | "
            f"{c.get('apiversions p99 (ms)', '-')} / {c.get('apiversions worst (ms)', '-')} | "
            f"{lag.get('p99', float('nan')):.0f} / {lag.get('worst', float('nan')):.0f} | "
            f"{r['healed_s']:.1f} | {len(r['long_gcs'])} / {max(r['long_gcs'], default=0)} | "
            f"{r['acked']} | {r['consumed']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
