"""Issue 36's scene, end to end: a cluster that wedged on metadata writes.

    PYTHONPATH=src python benchmarks/metadata_restart.py [--topics 406] [--partitions 1435]
        [--processes]

An in-process cluster of 3 brokers (one event loop) with 406 topics and 1,435
partitions at RF 3, as in the issue. Broker 2 restarts; as it catches up, its
leaders add it back to each ISR (one AlterPartition, so one metadata change,
each). Reports the time to create the topics, the time until every ISR is
whole again, and how long ApiVersions waits on broker 0 meanwhile (a probe
every 5 ms, which gives up after 60 s without an answer). Runs against any
kaflite revision.
"""

from __future__ import annotations

import argparse
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path

from kaflite.cluster.cluster import Cluster

PROBE_TIMEOUT_S = 60


def probe(port: int, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    """ApiVersions v0 on a raw socket every 5 ms; (sent at, wait) of each is appended
    to ``out`` (wait ``inf`` when no answer came within PROBE_TIMEOUT_S, which ends
    the probe)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=PROBE_TIMEOUT_S)
    request = struct.pack(">ihhih", 10, 18, 0, 1, -1)
    try:
        while not stop.is_set():
            t0 = time.perf_counter()
            s.sendall(request)
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            got = 0
            while got < size:
                got += len(s.recv(size - got))
            out.append((t0, time.perf_counter() - t0))
            time.sleep(0.005)
    except TimeoutError:
        out.append((t0, float("inf")))
    finally:
        s.close()


def whole(cluster: Cluster) -> bool:
    return all(len(p.isr) == 3 for t in list(cluster.controller.topics.values())
               for p in t.partitions)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topics", type=int, default=406)
    ap.add_argument("--partitions", type=int, default=1435)
    ap.add_argument("--processes", action="store_true",
                    help="one OS process per broker (their replicas replay the records)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, \
            Cluster(brokers=3, data_dir=Path(tmp), processes=args.processes) as cluster:
        t0 = time.perf_counter()
        per = [args.partitions // args.topics + (i < args.partitions % args.topics)
               for i in range(args.topics)]
        for i, n in enumerate(per):
            cluster.create_topic(f"topic-{i}", n, 3)
        deadline = time.time() + 300
        while not whole(cluster) and time.time() < deadline:
            time.sleep(0.1)
        print(f"created {sum(per)} partitions in {time.perf_counter() - t0:.1f} s", flush=True)
        stop = threading.Event()
        lat: list[tuple[float, float]] = []
        port0 = int(cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)[1])
        th = threading.Thread(target=probe, args=(port0, stop, lat))
        th.start()
        time.sleep(1)
        t0 = time.perf_counter()
        cluster.call(cluster.restart_broker(2))
        restarted = time.perf_counter() - t0
        deadline = time.time() + 600
        while not whole(cluster) and time.time() < deadline:
            time.sleep(0.05)
        healed = time.perf_counter() - t0
        time.sleep(1)
        stop.set()
        th.join()
        print(f"restart {restarted:.2f} s, every ISR whole after {healed:.2f} s "
              f"(inf: no answer within {PROBE_TIMEOUT_S} s)", flush=True)
        # The restart itself (the broker's stop and start, loading its logs, on the
        # one loop) stalls the probe too; the ISR changes follow it.
        for label, waits in (
                ("during the restart", [w for at, w in lat if t0 <= at < t0 + restarted]),
                ("after it, ISRs healing", [w for at, w in lat if at >= t0 + restarted])):
            waits.sort()
            if waits:
                print(f"  ApiVersions {label}: {len(waits)} probes, median "
                      f"{waits[len(waits) // 2] * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms",
                      flush=True)


if __name__ == "__main__":
    main()
