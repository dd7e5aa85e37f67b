"""Share groups against a classic consumer group: records per second through N
consumers, for kaflite's client and for confluent-kafka, on the same kaflite cluster.

Not a test. One 3-broker kaflite cluster; a topic of ``--partitions`` partitions
holding ``--records`` records of 100 bytes. For each client and each
``--consumers`` count, in rounds: N members of a fresh group (a share group, or a
classic group) join on an empty topic and settle (every partition assigned, then
a second of quiet); then confluent-kafka's producer, on its own thread, writes the
records, and the members read until every record has been seen. The rate is the
records divided by the time from the first record received to the last: what the
group sustains, without its join. (The producer is not the limit: it writes
several times faster than any group here reads.) kaflite's members run on one event loop (one thread);
confluent-kafka's on one thread each, as an application would run them. Share
members accept what they get (implicit acknowledgement)::

    .venv/bin/python benchmarks/share.py --records 50000 --consumers 1,2,4 --repeat 3
    .venv/bin/python benchmarks/share.py --partitions 1 --consumers 1,2,4
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

from kaflite.client import Admin, Consumer, NewTopic, ShareConsumer
from kaflite.cluster import Cluster

VALUE = b"x" * 100
TIMEOUT = 120.0
CONFIG = {"group.share.heartbeat.interval.ms": "1000",
          "group.share.min.heartbeat.interval.ms": "100"}


class Tally:
    """Distinct (partition, offset) pairs seen, and when the first and last came."""

    def __init__(self, want: int) -> None:
        self.want = want
        self.seen: set[tuple[int, int]] = set()
        self.first = 0.0
        self.last = 0.0
        self.lock = threading.Lock()

    def add(self, pairs: list[tuple[int, int]]) -> None:
        if not pairs:
            return
        now = time.perf_counter()
        with self.lock:
            if not self.first:
                self.first = now
            self.seen.update(pairs)
            self.last = now

    @property
    def done(self) -> bool:
        return len(self.seen) >= self.want

    def rate(self) -> float:
        if not self.done or self.last <= self.first:
            return float("nan")
        return self.want / (self.last - self.first)


def produce_in_thread(servers: str, topic: str, n: int, partitions: int) -> threading.Thread:
    """confluent-kafka's producer writes ``n`` records, round robin over the partitions."""
    from confluent_kafka import Producer as RdProducer

    def run() -> None:
        p = RdProducer({"bootstrap.servers": servers, "linger.ms": 5})
        for i in range(n):
            while True:
                try:
                    p.produce(topic, VALUE, partition=i % partitions)
                    break
                except BufferError:
                    p.poll(0.01)
        p.flush(60)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def new_topic(servers: str, partitions: int) -> str:
    topic = f"bench-share-{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        async with Admin({"bootstrap.servers": servers}) as admin:
            await admin.create_topics([NewTopic(topic, partitions, 1)])
    asyncio.run(create())
    return topic


async def kaflite_run(servers: str, topic: str, n: int, partitions: int, members: int,
                      share: bool) -> float:
    tally = Tally(n)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    clients: list[Any]
    if share:
        clients = [ShareConsumer({"bootstrap.servers": servers, "group.id": group})
                   for _ in range(members)]
    else:
        clients = [Consumer({"bootstrap.servers": servers, "group.id": group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
                   for _ in range(members)]
    for c in clients:
        c.subscribe([topic])

    def settled() -> bool:
        owned = [c.assignment() for c in clients]
        covered = {tp.partition for o in owned for tp in o}
        if share:   # fetching every assigned partition: the share-partitions exist
            ready = all(o and all(any(tp in sess.partitions for sess in
                                      c._fetcher.sessions.values() if sess.open) for tp in o)
                        for c, o in zip(clients, owned, strict=True))
        else:   # as many members own partitions as can
            ready = sum(1 for o in owned if o) == min(len(clients), partitions)
        return ready and len(covered) == partitions

    stop = asyncio.Event()

    async def member(c: Any) -> None:
        # each member polls on its own, as separate applications would (a member with
        # nothing to read must not hold the others back)
        while not stop.is_set():
            records = await c.poll(100)
            tally.add([(r.partition, r.offset) for r in records])

    deadline = time.monotonic() + TIMEOUT
    producer: threading.Thread | None = None
    tasks = [asyncio.create_task(member(c)) for c in clients]
    try:
        while not settled() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1)
        producer = produce_in_thread(servers, topic, n, partitions)
        while not tally.done and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        if producer is not None:
            await asyncio.to_thread(producer.join, 60)
        for c in clients:
            await c.close()
    return tally.rate()


def confluent_run(servers: str, topic: str, n: int, partitions: int, members: int,
                  share: bool) -> float:
    from confluent_kafka import Consumer as RdConsumer
    from confluent_kafka import ShareConsumer as RdShareConsumer

    tally = Tally(n)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    owned: list[set[int]] = [set() for _ in range(members)]
    polls = [0] * members

    def member(i: int) -> None:
        conf: dict[str, Any] = {"bootstrap.servers": servers, "group.id": group}
        if share:
            c: Any = RdShareConsumer(conf)
            c.subscribe([topic])
            try:
                while not stop.is_set():
                    tally.add([(m.partition(), m.offset()) for m in c.poll(0.1)
                               if not m.error()])
                    polls[i] += 1
            finally:
                c.close()
        else:
            conf.update({"auto.offset.reset": "earliest", "enable.auto.commit": False})
            c = RdConsumer(conf)
            c.subscribe([topic])
            try:
                while not stop.is_set():
                    tally.add([(m.partition(), m.offset()) for m in c.consume(500, 0.1)
                               if not m.error()])
                    owned[i] = {tp.partition for tp in c.assignment()}
                    polls[i] += 1
            finally:
                c.close()

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(members)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + TIMEOUT
    # librdkafka's share consumer does not tell its assignment: its members have
    # joined and fetched once each has polled for three heartbeat intervals
    while time.monotonic() < deadline and not (
            all(p > 30 for p in polls) if share else
            len(set().union(*owned)) == partitions and
            sum(1 for o in owned if o) == min(members, partitions)):
        time.sleep(0.05)
    time.sleep(1)
    producer = produce_in_thread(servers, topic, n, partitions)
    while not tally.done and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    producer.join(timeout=60)
    for t in threads:
        t.join(timeout=30)
    return tally.rate()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--consumers", default="4", help="comma-separated member counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clients", default="kaflite,confluent-kafka")
    ap.add_argument("--processes", action="store_true",
                    help="brokers in their own processes (else threads of this one, where "
                         "kaflite's client shares the interpreter with them)")
    args = ap.parse_args()
    counts = [int(x) for x in args.consumers.split(",")]
    clients = args.clients.split(",")
    results: dict[tuple[str, int, str], list[float]] = {}
    runs: dict[str, Callable[[str, str, int, int, int, bool], float]] = {
        "kaflite": lambda *a: asyncio.run(kaflite_run(*a)),
        "confluent-kafka": confluent_run,
    }
    with Cluster(brokers=3, config=CONFIG, processes=args.processes) as cluster:
        servers = cluster.bootstrap_servers
        for _ in range(args.repeat):
            for client in clients:
                for members in counts:
                    for share in (True, False):
                        topic = new_topic(servers, args.partitions)
                        rate = runs[client](servers, topic, args.records, args.partitions,
                                            members, share)
                        kind = "share" if share else "classic"
                        results.setdefault((client, members, kind), []).append(rate)
                        print(f"  {client:16} {members} {kind:8} {rate:12,.0f} records/s",
                              flush=True)
    print(f"\n{args.records:,} records of 100 bytes, {args.partitions} partitions, "
          f"best of {args.repeat} (median in brackets)")
    print(f"{'client':16} {'members':>7} {'share':>22} {'classic group':>22} {'share/classic':>14}")
    for client in clients:
        for members in counts:
            share_rates = results[(client, members, "share")]
            classic_rates = results[(client, members, "classic")]
            s, c = max(share_rates), max(classic_rates)
            print(f"{client:16} {members:>7} {s:>11,.0f} ({statistics.median(share_rates):>8,.0f})"
                  f" {c:>11,.0f} ({statistics.median(classic_rates):>8,.0f}) {s / c:>13.2f}x")


if __name__ == "__main__":
    main()
