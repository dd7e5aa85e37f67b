"""What one metadata change costs as the cluster grows (issue 36).

    PYTHONPATH=src python benchmarks/metadata_scale.py [--sizes 100,1000,5000,20000]
        [--changes 1000] [--budget 30]

Directly on a ``Controller`` with a data directory and 3 brokers registered:
create topics of 10 partitions at replication factor 3 up to N partitions (in
``batched()``), then time ``--changes`` ISR changes (``alter_isr``, shrinking and
expanding the ISR of partition after partition), each persisted as the
controller persists a change. Per size it reports the time a change, the bytes
written a change and, where the controller has a metadata log, the time to
write a snapshot (in its background thread), the longest this thread waited
for the GIL meanwhile (a 1 ms sleep overshooting) and the time to recover on a
restart.

Runs against any kaflite revision: bytes come from the log's counters where
there is a log, else from the size of the JSON metadata file (written whole on
every change). At large sizes an old revision would take minutes for 1,000
changes; ``--budget`` seconds cap the changes made per size (the count is
reported).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from kaflite.cluster.controller import BrokerInfo, Controller, PartitionState, TopicState


class _Quiet:
    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None:
        pass

    def on_topic_deleted(self, topic: TopicState) -> None:
        pass


def _controller(data_dir: Path) -> Controller:
    c = Controller(data_dir)
    for i in range(3):
        c.register_broker(BrokerInfo(i, "127.0.0.1", 9092 + i), _Quiet())
        c.broker_started(i)
    return c


def _bytes_written(c: Controller, data_dir: Path) -> int:
    appended = getattr(c, "bytes_appended", None)
    if isinstance(appended, int):
        return appended
    path = data_dir / "__cluster_metadata.json"   # revisions before the metadata log
    return c.writes * (path.stat().st_size if path.exists() else 0)


def measure(partitions: int, changes: int, budget: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        c = _controller(data_dir)
        with c.batched():
            for t in range(partitions // 10):
                c.create_topic(f"topic-{t}", c.assign_replicas(10, 3, start=t))
        names = [f"topic-{t}" for t in range(partitions // 10)]
        bytes_before = _bytes_written(c, data_dir)
        done = 0
        start = time.perf_counter()
        while done < changes and (done < 10 or time.perf_counter() - start < budget):
            name, index = names[done % len(names)], (done // len(names)) % 10
            p = c.topics[name].partitions[index]
            isr = p.replicas[:2] if len(p.isr) == 3 else list(p.replicas)
            c.alter_isr(name, index, p.leader, p.leader_epoch, isr)
            done += 1
        elapsed = time.perf_counter() - start
        out = {"partitions": partitions, "changes": done,
               "us_per_change": elapsed / done * 1e6,
               "bytes_per_change": (_bytes_written(c, data_dir) - bytes_before) / done}
        log = getattr(c, "log", None)
        if log is not None:
            t0 = time.perf_counter()
            written = log.snapshots_written
            log.start_snapshot()
            # The snapshot is built in the log's thread: how long does this thread
            # (the event loop's, in a broker) wait for the GIL meanwhile?
            stall = 0.0
            while log.snapshots_written == written and time.perf_counter() - t0 < 60:
                tick = time.perf_counter()
                time.sleep(0.001)
                stall = max(stall, time.perf_counter() - tick - 0.001)
            c.flush()
            out["snapshot_s"] = time.perf_counter() - t0
            out["stall_ms"] = stall * 1000
            out["snapshot_bytes"] = log.last_snapshot_bytes
            c.close()
            t0 = time.perf_counter()
            Controller(data_dir).close()
            out["recover_s"] = time.perf_counter() - t0
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000,20000")
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--budget", type=float, default=30.0)
    args = ap.parse_args()
    print(f"{'partitions':>10} {'changes':>7} {'us/change':>10} {'bytes/change':>12} "
          f"{'snapshot s':>10} {'snap bytes':>10} {'stall ms':>8} {'recover s':>9}")
    for n in (int(x) for x in args.sizes.split(",")):
        r = measure(n, args.changes, args.budget)
        extra = (f" {r['snapshot_s']:>10.3f} {int(r['snapshot_bytes']):>10} "
                 f"{r['stall_ms']:>8.1f} {r['recover_s']:>9.3f}" if "snapshot_s" in r else "")
        print(f"{n:>10} {int(r['changes']):>7} {r['us_per_change']:>10.1f} "
              f"{r['bytes_per_change']:>12.0f}{extra}", flush=True)


if __name__ == "__main__":
    main()
