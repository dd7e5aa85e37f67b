"""Transactional producers and read_committed consumers of kafka-python and aiokafka."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000,
                                    "group.initial.rebalance.delay.ms": 0}) as c:
        yield c


def test_kafka_python_commit_and_abort(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    topic = "kp-txn"
    cluster.create_topic(topic, 1, 3)
    p = kafka.KafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                            transactional_id="kp-tid", client_id="kp-txn")
    p.init_transactions()
    p.begin_transaction()
    for i in range(5):
        p.send(topic, f"keep{i}".encode(), partition=0)
    p.commit_transaction()
    p.begin_transaction()
    for i in range(5):
        p.send(topic, f"drop{i}".encode(), partition=0)
    p.flush()
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic, b"tail", partition=0)
    p.commit_transaction()
    p.close()

    def read(isolation: str) -> list[bytes]:
        c = kafka.KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                isolation_level=isolation, auto_offset_reset="earliest",
                                enable_auto_commit=False, fetch_max_wait_ms=100)
        tp = kafka.TopicPartition(topic, 0)
        c.assign([tp])
        out: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                out += [r.value for r in records]
            if c.position(tp) >= c.end_offsets([tp])[tp]:
                break
        c.close()
        return out

    assert read("read_committed") == [f"keep{i}".encode() for i in range(5)] + [b"tail"]
    assert len(read("read_uncommitted")) == 11


def test_aiokafka_commit_and_abort(cluster: Cluster) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    topic = "aio-txn"
    cluster.create_topic(topic, 2, 3)

    async def run() -> tuple[list[bytes], list[bytes]]:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=cluster.bootstrap_servers,
                                      transactional_id="aio-tid", client_id="aio-txn")
        await p.start()
        try:
            async with p.transaction():
                for i in range(6):
                    await p.send(topic, f"keep{i}".encode(), partition=i % 2)
            await p.begin_transaction()
            for i in range(6):
                await p.send(topic, f"drop{i}".encode(), partition=i % 2)
            await p.abort_transaction()
        finally:
            await p.stop()
        out = []
        for isolation in ("read_committed", "read_uncommitted"):
            c = aiokafka.AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                                          isolation_level=isolation,
                                          auto_offset_reset="earliest",
                                          enable_auto_commit=False)
            await c.start()
            try:
                tps = [aiokafka.TopicPartition(topic, i) for i in range(2)]
                c.assign(tps)
                got: list[bytes] = []
                ends = await c.end_offsets(tps)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    batch = await c.getmany(timeout_ms=200)
                    got += [r.value for records in batch.values() for r in records]
                    if all([await c.position(tp) >= ends[tp] for tp in tps]):
                        break
                out.append(got)
            finally:
                await c.stop()
        return out[0], out[1]

    committed, everything = asyncio.run(run())
    assert sorted(committed) == sorted(f"keep{i}".encode() for i in range(6))
    assert len(everything) == 12
