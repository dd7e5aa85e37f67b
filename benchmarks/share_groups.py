"""Share groups against a classic group on one partition: does a queue scale with its
consumers where a partition-per-consumer group cannot?

Not a test. One kaflite cluster (3 brokers), one topic with ONE partition holding
``--records`` records, produced in 16 KiB batches (Java's ``batch.size``: a share-partition hands
out whole batches, as Kafka's does). Each run consumes them all, from the start, in a new group,
and the clock runs from the first subscribe until the last record is processed:

* ``classic``: one confluent-kafka ``Consumer`` (a second one would sit idle: one
  partition, one owner);
* ``share x1``, ``share x2``, ``share x4``: confluent-kafka ``ShareConsumer`` s in
  one share group (implicit acknowledgement, ``max.poll.records`` 100), each in its own
  thread.

"Processing" a record costs ``--work-ms`` (a sleep per polled batch, which releases
the GIL, as I/O-bound work would); with ``--work-ms 0`` the runs measure the broker
and client path alone. A share group's records are counted once each (a redelivery
would be counted again and show as more than ``--records``)::

    .venv/bin/python benchmarks/share_groups.py --records 4000 --work-ms 1
    .venv/bin/python benchmarks/share_groups.py --records 50000 --work-ms 0
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid
from typing import Any

from kaflite.cluster import Cluster

TOPIC = "bench-share"


def produce(cluster: Cluster, count: int) -> None:
    from confluent_kafka import Producer

    # Java's default batch.size (16 KiB, ~130 of these records): a share-partition hands out
    # whole batches (as Kafka's does), so librdkafka's 1 MB batches would go to one consumer.
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 20,
                  "acks": "all", "batch.size": 16384})
    value = b"x" * 100
    for _ in range(count):
        while True:
            try:
                p.produce(TOPIC, value, partition=0)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def earliest(cluster: Cluster, group: str) -> None:
    for broker in cluster.brokers.values():
        assert broker.share is not None
        broker.share.group_configs[group] = {"share.auto.offset.reset": "earliest"}


def run_classic(cluster: Cluster, count: int, work_ms: float) -> tuple[float, int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                  "group.id": f"classic-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest"})
    started = time.monotonic()
    c.subscribe([TOPIC])
    seen = 0
    try:
        while seen < count:
            msgs = [m for m in c.consume(100, 0.5) if m.error() is None]
            if msgs and work_ms:
                time.sleep(work_ms * len(msgs) / 1000)
            seen += len(msgs)
        return time.monotonic() - started, seen
    finally:
        c.close()


def run_share(cluster: Cluster, count: int, work_ms: float, consumers: int) -> tuple[float, int]:
    from confluent_kafka import ShareConsumer

    group = f"share-{uuid.uuid4().hex[:6]}"
    earliest(cluster, group)
    members = [ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                              "max.poll.records": "100"}) for _ in range(consumers)]
    lock = threading.Lock()
    seen = [0]
    done = threading.Event()

    def loop(c: Any) -> None:
        while not done.is_set():
            msgs = [m for m in c.poll(0.2) if m.error() is None]
            if msgs and work_ms:
                time.sleep(work_ms * len(msgs) / 1000)
            with lock:
                seen[0] += len(msgs)
                if seen[0] >= count:
                    done.set()

    started = time.monotonic()
    for c in members:
        c.subscribe([TOPIC])
    threads = [threading.Thread(target=loop, args=(c,)) for c in members]
    for t in threads:
        t.start()
    done.wait(600)
    elapsed = time.monotonic() - started
    done.set()
    for t in threads:
        t.join(30)
    for c in members:
        c.close()
    return elapsed, seen[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--work-ms", type=float, default=1.0)
    args = ap.parse_args()
    with Cluster(brokers=3) as cluster:
        cluster.create_topic(TOPIC, 1, 3)
        produce(cluster, args.records)
        results: list[tuple[str, float, int]] = []
        secs, n = run_classic(cluster, args.records, args.work_ms)
        results.append(("classic x1", secs, n))
        for k in (1, 2, 4):
            secs, n = run_share(cluster, args.records, args.work_ms, k)
            results.append((f"share x{k}", secs, n))
    base = args.records / results[0][1]
    print(f"{args.records} records, one partition, {args.work_ms} ms of work per record")
    print(f"{'group':12} {'seconds':>8} {'records/s':>10} {'counted':>8} {'vs classic':>11}")
    for name, secs, n in results:
        rate = args.records / secs
        print(f"{name:12} {secs:8.2f} {rate:10,.0f} {n:8} {rate / base:10.2f}x")


if __name__ == "__main__":
    main()
