"""Transaction benchmark: kaflite's transactional producer beside confluent-kafka, aiokafka
and kafka-python, all against the embedded kaflite cluster.

kaflite's producer runs twice: with the cluster at ``transaction.version`` 2 (what a
new cluster finalizes: the leaders add partitions, KIP-890 part 2) and at 1 (its own
AddPartitionsToTxn before the first batch of each transaction); the second table
counts the requests each of them sent per transaction, from the brokers' registry.

Not a test. Starts a 3-broker cluster (replication factor 3, so every commit's
markers go to replicated leaders), then each client in turn runs T
transactions of R 100-byte records spread over a 3-partition topic, committing
each one, and the table shows transactions/s and records/s with the ratio to
confluent-kafka::

    .venv/bin/python benchmarks/transactions.py --transactions 200 --records 100

The time of a run includes init_transactions but not the client's start-up.
``--repeat`` rounds run every client once per round; the table shows the best
and the median.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

VALUE = b"x" * 100


def kaflite_txn(servers: str, topic: str, txns: int, records: int,
                client_id: str = "bench-kaflite") -> float:
    from kaflite.client import Producer

    async def main() -> float:
        async with Producer({"bootstrap.servers": servers, "linger.ms": 5,
                             "client.id": client_id,
                             "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"}) as p:
            t0 = time.perf_counter()
            await p.init_transactions()
            for _ in range(txns):
                p.begin_transaction()
                for i in range(records):
                    p.produce(topic, VALUE, partition=i % 3)
                await p.commit_transaction()
            return time.perf_counter() - t0
    return asyncio.run(main())


def confluent_txn(servers: str, topic: str, txns: int, records: int) -> float:
    import confluent_kafka

    p = confluent_kafka.Producer({"bootstrap.servers": servers, "linger.ms": 5,
                                  "transactional.id": f"bench-{uuid.uuid4().hex[:8]}"})
    t0 = time.perf_counter()
    p.init_transactions(60)
    for _ in range(txns):
        p.begin_transaction()
        for i in range(records):
            p.produce(topic, VALUE, partition=i % 3)
        p.commit_transaction(60)
    secs = time.perf_counter() - t0
    p.flush(10)
    return secs


def aiokafka_txn(servers: str, topic: str, txns: int, records: int) -> float:
    import aiokafka

    async def main() -> float:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, linger_ms=5,
                                      transactional_id=f"bench-{uuid.uuid4().hex[:8]}")
        await p.start()   # aiokafka's start() runs InitProducerId
        try:
            t0 = time.perf_counter()
            for _ in range(txns):
                async with p.transaction():
                    for i in range(records):
                        await p.send(topic, VALUE, partition=i % 3)
            return time.perf_counter() - t0
        finally:
            await p.stop()
    return asyncio.run(main())


def kafka_python_txn(servers: str, topic: str, txns: int, records: int) -> float:
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=servers, linger_ms=5,
                            transactional_id=f"bench-{uuid.uuid4().hex[:8]}")
    t0 = time.perf_counter()
    p.init_transactions()
    for _ in range(txns):
        p.begin_transaction()
        for i in range(records):
            p.send(topic, VALUE, partition=i % 3)
        p.commit_transaction()
    secs = time.perf_counter() - t0
    p.close()
    return secs


def at_transaction_version(level: int, run: Callable[[str, str, int, int], float]
                           ) -> Callable[[str, str, int, int], float]:
    """``run`` with the cluster's transaction.version at ``level`` (then back at 2)."""
    def wrapped(servers: str, topic: str, txns: int, records: int) -> float:
        from kaflite.client import sync

        with sync.Admin({"bootstrap.servers": servers}) as admin:
            admin.update_features({"transaction.version": level}, downgrade="safe")
            try:
                return run(servers, topic, txns, records)
            finally:
                admin.update_features({"transaction.version": 2})
    return wrapped


CLIENTS: dict[str, Callable[[str, str, int, int], float]] = {
    "kaflite": functools.partial(kaflite_txn, client_id="bench-kaflite-v2"),
    "kaflite (txn v1)": at_transaction_version(
        1, functools.partial(kaflite_txn, client_id="bench-kaflite-v1")),
    "confluent-kafka": confluent_txn,
    "aiokafka": aiokafka_txn,
    "kafka-python": kafka_python_txn,
}


def main() -> None:
    from kaflite.cluster import Cluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--transactions", type=int, default=200)
    ap.add_argument("--records", type=int, default=100, help="records per transaction")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    times: dict[str, list[float]] = {}
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as cluster:
        servers = cluster.bootstrap_servers
        kaflite_txn(servers, "warm-up", 1, 1)   # creates __transaction_state outside the runs
        for _ in range(max(args.repeat, 1)):
            for name, fn in CLIENTS.items():
                topic = f"txn-bench-{uuid.uuid4().hex[:8]}"
                cluster.create_topic(topic, 3, 3)
                run: Any = functools.partial(fn, servers, topic, args.transactions,
                                             args.records)
                times.setdefault(name, []).append(run())
        counts = {c.client_id: c.requests for c in cluster.clients(include_closed=True)}
    n, r = args.transactions, args.records
    base = n / min(times["confluent-kafka"])
    print(f"\n{n} transactions of {r} 100-byte records, 3 brokers, replication factor 3, "
          f"best of {max(args.repeat, 1)}\n")
    print("| client | txn/s (best) | txn/s (median) | records/s (best) | vs confluent-kafka |\n"
          "|---|---:|---:|---:|---:|")
    for name, secs in times.items():
        best, median = n / min(secs), n / statistics.median(secs)
        print(f"| {name} | {best:,.1f} | {median:,.1f} | {best * r:,.0f} | {best / base:.2f}x |")
    runs = n * max(args.repeat, 1)
    print("\nkaflite's requests per transaction, as the brokers counted them\n")
    apis = ["AddPartitionsToTxn", "Produce", "EndTxn", "InitProducerId"]
    print("| transaction.version | " + " | ".join(apis) + " |\n|---|" + "---:|" * len(apis))
    for level in (2, 1):
        sent = counts[f"bench-kaflite-v{level}"]
        print(f"| {level} | " + " | ".join(f"{sent.get(a, 0) / runs:.2f}" for a in apis) + " |")


if __name__ == "__main__":
    main()
