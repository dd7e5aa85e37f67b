"""Real third-party clients against the embedded cluster: the proof of wire compatibility.

Each client creates its own topic (6 partitions, replication factor 3) with
its own admin API, produces keyed records with every compression codec, and
reads every partition back from its leader. Every record must come back
exactly once, in the order it was produced within its partition.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

from kaflite.cluster import Cluster

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 6
PER_CODEC = 20_000  # 5 codecs x 20,000 = 100,000 records per client


def expected_records(client: str) -> list[tuple[bytes, bytes]]:
    out = []
    for codec in CODECS:
        for i in range(PER_CODEC):
            out.append((f"{client}-{codec}-key-{i % 997}".encode(),
                        f"{client}-{codec}-{i:06d}".encode()))
    return out


def check_read_back(produced: dict[int, list[bytes]], consumed: dict[int, list[bytes]]) -> None:
    assert sum(len(v) for v in consumed.values()) == sum(len(v) for v in produced.values())
    for partition, values in produced.items():
        assert consumed.get(partition, []) == values, f"partition {partition} differs"


def test_confluent_kafka(cluster3: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "interop-confluent"
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    futures = admin.create_topics([NewTopic(topic, PARTITIONS, 3)], operation_timeout=30)
    futures[topic].result(30)
    produced: dict[int, list[bytes]] = defaultdict(list)
    errors: list[str] = []
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": cluster3.bootstrap_servers,
                             "compression.type": codec, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True})
        acked: list[tuple[int, int, bytes]] = []

        def on_delivery(err, msg, acked=acked):  # type: ignore[no-untyped-def]
            if err is not None:
                errors.append(str(err))
            else:
                acked.append((msg.partition(), msg.offset(), msg.value()))

        for key, value in expected_records("c"):
            if not value.startswith(f"c-{codec}-".encode()):
                continue
            while True:
                try:
                    producer.produce(topic, value, key, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        assert producer.flush(60) == 0
        for partition, _offset, value in sorted(acked):
            produced[partition].append(value)
    assert not errors
    consumer = Consumer({"bootstrap.servers": cluster3.bootstrap_servers,
                         "group.id": "interop-confluent-reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    consumed: dict[int, list[bytes]] = defaultdict(list)
    total = sum(len(v) for v in produced.values())
    deadline = time.monotonic() + 120
    while sum(len(v) for v in consumed.values()) < total and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 0.5):
            assert msg.error() is None, msg.error()
            consumed[msg.partition()].append(msg.value())
    consumer.close()
    check_read_back(produced, consumed)


def test_kafka_python(cluster3: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = "interop-kafkapython"
    admin = KafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers)
    admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
    admin.close()
    for codec in CODECS:
        producer = KafkaProducer(bootstrap_servers=cluster3.bootstrap_servers, acks="all",
                                 compression_type=None if codec == "none" else codec,
                                 linger_ms=5)
        futures = [producer.send(topic, value=v, key=k) for k, v in expected_records("k")
                   if v.startswith(f"k-{codec}-".encode())]
        producer.flush(60)
        for fut in futures:
            fut.get(30)  # raises if the broker refused the record
        producer.close()
    values_by_partition: dict[int, list[bytes]] = defaultdict(list)
    consumer = KafkaConsumer(bootstrap_servers=cluster3.bootstrap_servers,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    total = len(expected_records("k"))
    deadline = time.monotonic() + 120
    while sum(len(v) for v in values_by_partition.values()) < total \
            and time.monotonic() < deadline:
        for tp, msgs in consumer.poll(500, max_records=50_000).items():
            values_by_partition[tp.partition] += [m.value for m in msgs]
    consumer.close()
    expected = sorted(v for _, v in expected_records("k"))
    got = sorted(v for vs in values_by_partition.values() for v in vs)
    assert got == expected
    for partition, values in values_by_partition.items():
        per_codec: dict[str, list[int]] = defaultdict(list)
        for v in values:
            _, codec, n = v.decode().split("-")
            per_codec[codec].append(int(n))
        for codec, seq in per_codec.items():
            assert seq == sorted(seq), f"partition {partition} {codec} out of order"


def test_aiokafka(cluster3: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    topic = "interop-aiokafka"

    async def main() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=cluster3.bootstrap_servers)
        await admin.start()
        await admin.create_topics([NewTopic(topic, PARTITIONS, 3)])
        await admin.close()
        produced: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
        for codec in CODECS:
            producer = AIOKafkaProducer(bootstrap_servers=cluster3.bootstrap_servers, acks="all",
                                        compression_type=None if codec == "none" else codec,
                                        linger_ms=5, enable_idempotence=True)
            await producer.start()
            try:
                sends = []
                for k, v in expected_records("a"):
                    if v.startswith(f"a-{codec}-".encode()):
                        sends.append((v, await producer.send(topic, value=v, key=k)))
                for v, fut in sends:
                    md = await fut
                    produced[md.partition].append((md.offset, v))
            finally:
                await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster3.bootstrap_servers,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        consumed: dict[int, list[bytes]] = defaultdict(list)
        try:
            consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await consumer.seek_to_beginning()
            total = sum(len(v) for v in produced.values())
            deadline = time.monotonic() + 120
            while sum(len(v) for v in consumed.values()) < total and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500, max_records=50_000)
                for tp, msgs in batch.items():
                    consumed[tp.partition] += [m.value for m in msgs]
        finally:
            await consumer.stop()
        check_read_back({p: [v for _, v in sorted(items)] for p, items in produced.items()},
                        consumed)

    asyncio.run(main())


def test_metadata_lists_every_broker(cluster3: Cluster) -> None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers}).list_topics(timeout=10)
    assert sorted(md.brokers) == [0, 1, 2]
    for b in md.brokers.values():
        assert b.host == "127.0.0.1" and b.port == cluster3.broker(b.id).port
