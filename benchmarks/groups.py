"""How long a group takes to be stable again after a third member joins: classic
(JoinGroup/SyncGroup) against KIP-848 (ConsumerGroupHeartbeat), for kaflite's
client and for confluent-kafka, on the same kaflite cluster.

Not a test. One 3-broker cluster with Kafka's default group settings (classic:
the clients' own ``heartbeat.interval.ms`` 3 s; KIP-848: the coordinator's
``group.consumer.heartbeat.interval.ms`` 5 s) unless ``--fast`` lowers both to
500 ms. For each client and protocol, in rounds: two members subscribe to a
12-partition topic and settle; then the third subscribes, and the clock runs
from its ``subscribe`` until the three own disjoint, non-empty sets covering
every partition, the last change after which nothing moved for ``--quiet``
seconds (the wait itself is not counted). The members are polled all along
(kaflite's on one event loop, confluent-kafka's on one thread each)::

    .venv/bin/python benchmarks/groups.py --repeat 3
    .venv/bin/python benchmarks/groups.py --repeat 3 --fast
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kaflite.client import Consumer
from kaflite.cluster import Cluster

PARTITIONS = 12


class Watch:
    """Samples the members' assignments: when did they last change, and are they settled?"""

    def __init__(self, owners: Callable[[], list[set[int]]]) -> None:
        self.owners = owners
        self.last: list[set[int]] | None = None
        self.changed = time.monotonic()

    def sample(self) -> bool:
        now = self.owners()
        if now != self.last:
            self.last, self.changed = now, time.monotonic()
        return all(now) and sum(map(len, now)) == PARTITIONS and \
            set().union(*now) == set(range(PARTITIONS))


async def kaflite_run(servers: str, topic: str, protocol: str, fast: bool,
                      quiet: float) -> float:
    group = f"g-{uuid.uuid4().hex[:8]}"
    conf: dict[str, Any] = {"bootstrap.servers": servers, "group.id": group,
                            "group.protocol": protocol, "auto.offset.reset": "earliest"}
    if fast and protocol == "classic":
        conf["heartbeat.interval.ms"] = 500
    members = [Consumer(conf) for _ in range(3)]
    stop = asyncio.Event()

    async def pump(c: Consumer) -> None:
        while not stop.is_set():
            await c.poll(timeout_ms=20)

    tasks: list[asyncio.Task[None]] = []
    watch = Watch(lambda: [{tp.partition for tp in c.assignment()} for c in members])
    try:
        for c in members[:2]:
            await c.start()
            c.subscribe([topic])
            tasks.append(asyncio.create_task(pump(c)))
        two = Watch(lambda: [{tp.partition for tp in c.assignment()} for c in members[:2]])
        while not (two.sample() and time.monotonic() - two.changed > quiet):
            await asyncio.sleep(0.01)
        await members[2].start()
        started = time.monotonic()
        members[2].subscribe([topic])
        tasks.append(asyncio.create_task(pump(members[2])))
        while not (watch.sample() and time.monotonic() - watch.changed > quiet):
            await asyncio.sleep(0.01)
        return watch.changed - started
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in members:
            await c.close()


class RdMember:
    def __init__(self, conf: dict[str, Any], topic: str) -> None:
        self.conf, self.topic = conf, topic
        self.owned: set[int] = set()
        self.subscribed_at = 0.0
        self.go = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        from confluent_kafka import Consumer as RdConsumer

        c = RdConsumer(self.conf)
        try:
            self.go.wait()
            self.subscribed_at = time.monotonic()
            c.subscribe([self.topic])
            while not self.stop.is_set():
                c.poll(0.02)
                self.owned = {tp.partition for tp in c.assignment()}
        finally:
            c.close()


def confluent_run(servers: str, topic: str, protocol: str, fast: bool, quiet: float) -> float:
    group = f"g-{uuid.uuid4().hex[:8]}"
    conf: dict[str, Any] = {"bootstrap.servers": servers, "group.id": group,
                            "group.protocol": protocol, "auto.offset.reset": "earliest"}
    if fast and protocol == "classic":
        conf["heartbeat.interval.ms"] = 500
    members = [RdMember(conf, topic) for _ in range(3)]
    try:
        for m in members[:2]:
            m.go.set()
        two = Watch(lambda: [set(m.owned) for m in members[:2]])
        while not (two.sample() and time.monotonic() - two.changed > quiet):
            time.sleep(0.01)
        members[2].go.set()
        watch = Watch(lambda: [set(m.owned) for m in members])
        while not (watch.sample() and time.monotonic() - watch.changed > quiet):
            time.sleep(0.01)
        return watch.changed - members[2].subscribed_at
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.thread.join(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fast", action="store_true",
                    help="500 ms heartbeats for both protocols instead of Kafka's defaults")
    ap.add_argument("--quiet", type=float, default=2.0,
                    help="seconds without a change that make a group stable")
    args = ap.parse_args()
    config: dict[str, object] = {"replica.lag.time.max.ms": 10000,
                                 "offsets.topic.num.partitions": 6}
    if args.fast:
        config.update({"group.consumer.heartbeat.interval.ms": 500,
                       "group.consumer.min.heartbeat.interval.ms": 500})
    results: dict[tuple[str, str], list[float]] = {}
    with Cluster(brokers=3, config=config) as cluster:
        servers = cluster.bootstrap_servers
        for _ in range(args.repeat):
            for protocol in ("classic", "consumer"):
                topic = f"bench-groups-{uuid.uuid4().hex[:8]}"
                cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
                t = asyncio.run(kaflite_run(servers, topic, protocol, args.fast, args.quiet))
                results.setdefault(("kaflite", protocol), []).append(t)
                t = confluent_run(servers, topic, protocol, args.fast, args.quiet)
                results.setdefault(("confluent-kafka", protocol), []).append(t)
    print(f"{'client':<16} {'protocol':<9} {'median s':>9} {'best s':>7}  runs")
    for (client, protocol), times in results.items():
        print(f"{client:<16} {protocol:<9} {statistics.median(times):9.2f} "
              f"{min(times):7.2f}  {', '.join(f'{t:.2f}' for t in times)}")
    for client in ("kaflite", "confluent-kafka"):
        classic = statistics.median(results[(client, "classic")])
        modern = statistics.median(results[(client, "consumer")])
        print(f"{client}: KIP-848 / classic = {modern / classic:.2f}")
    ratio = statistics.median(results[("kaflite", "consumer")]) / \
        statistics.median(results[("confluent-kafka", "consumer")])
    print(f"KIP-848: kaflite / confluent-kafka = {ratio:.2f}")


if __name__ == "__main__":
    main()
