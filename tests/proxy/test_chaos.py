"""The chaos filter at 10% errors, for every client: each still produces and reads
back an exact count (confluent-kafka and kaflite's client: test_faults.py).

The errors are ones a client recovers from (NOT_LEADER_OR_FOLLOWER on Produce,
Fetch and ListOffsets; COORDINATOR_NOT_AVAILABLE on FindCoordinator, OffsetCommit
and OffsetFetch), placed so that no error comes with a side effect: a client that
retries never writes a record twice.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.cluster import Cluster
from kaflite.proxy import Proxy
from kaflite.proxy.filters.chaos import ChaosFilter
from tests.cluster.test_kafkajs import At, Peer, needs_kafkajs

COUNT = 400


@pytest.fixture(scope="module")
def chaos() -> ChaosFilter:
    return ChaosFilter(rate=0.1, seed=11)


@pytest.fixture(scope="module")
def chaotic(cluster3: Cluster, chaos: ChaosFilter) -> Iterator[Proxy]:
    with Proxy(cluster3.bootstrap_servers, filters=[chaos]) as p:
        yield p


def expected(prefix: str) -> list[bytes]:
    return sorted(f"{prefix}-{i}".encode() for i in range(COUNT))


def test_kafka_python(cluster3: Cluster, chaotic: Proxy, chaos: ChaosFilter) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = "chaos-kp"
    cluster3.create_topic(topic, 3, 3)
    before = dict(chaos.injected)
    producer = KafkaProducer(bootstrap_servers=chaotic.bootstrap_servers, acks="all",
                             retries=50, linger_ms=5)
    futures = [producer.send(topic, f"kp-{i}".encode()) for i in range(COUNT)]
    producer.flush(60)
    for f in futures:
        f.get(30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=chaotic.bootstrap_servers,
                             group_id="chaos-kp-g", auto_offset_reset="earliest")
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < COUNT and time.monotonic() < deadline:
        for msgs in consumer.poll(500).values():
            got += [m.value for m in msgs]
    got += [m.value for msgs in consumer.poll(500).values() for m in msgs]
    consumer.close()
    assert sorted(got) == expected("kp")
    assert sum(chaos.injected.values()) > sum(before.values())


def test_aiokafka(cluster3: Cluster, chaotic: Proxy, chaos: ChaosFilter) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = "chaos-aio"
    cluster3.create_topic(topic, 3, 3)

    async def main() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=chaotic.bootstrap_servers, acks="all",
                                    enable_idempotence=True, linger_ms=5)
        await producer.start()
        try:
            sends = [await producer.send(topic, f"aio-{i}".encode()) for i in range(COUNT)]
            for fut in sends:
                await fut
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=chaotic.bootstrap_servers,
                                    group_id="chaos-aio-g", auto_offset_reset="earliest",
                                    # aiokafka's last auto-commit in stop() does not retry: an
                                    # injected COORDINATOR_NOT_AVAILABLE would raise there
                                    enable_auto_commit=False)
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < COUNT and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=500)).values():
                    got += [m.value for m in msgs if m.value is not None]
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got += [m.value for m in msgs if m.value is not None]
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(asyncio.wait_for(main(), 90))) == expected("aio")


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat(cluster3: Cluster, chaotic: Proxy) -> None:
    assert KCAT is not None
    topic = "chaos-kcat"
    cluster3.create_topic(topic, 3, 3)
    proc = subprocess.run([KCAT, "-b", chaotic.bootstrap_servers, "-P", "-t", topic,
                           "-X", "acks=all", "-X", "enable.idempotence=true"],
                          input="\n".join(f"kc-{i}" for i in range(COUNT)) + "\n",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    # read without a group: kcat -G stops at the first consumer error librdkafka reports
    # (an injected COORDINATOR_NOT_AVAILABLE on OffsetFetch), though librdkafka retries it
    proc = subprocess.run([KCAT, "-b", chaotic.bootstrap_servers, "-C", "-t", topic, "-o",
                           "beginning", "-e", "-q", "-f", "%s\n"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    got = sorted(line.encode() for line in proc.stdout.splitlines() if line)
    assert got == expected("kc")


@needs_kafkajs
@pytest.mark.peer
def test_kafkajs(cluster3: Cluster, chaotic: Proxy, tmp_path: Path) -> None:
    topic = "chaos-kjs"
    # one partition: kafkajs retries a whole send when one partition of it failed,
    # and its idempotent producer then writes the partitions that had succeeded again
    # (with new sequence numbers), directly against a broker too
    cluster3.create_topic(topic, 1, 3)
    at = At(chaotic.bootstrap_servers)
    acks = Peer(at, "produce", tmp_path / "p.log", topic=topic, count=COUNT, batch=50,
                compression="none", idempotent=True, prefix="kj").result()["acks"]
    assert all(code == 0 for *_, code in acks)
    records = Peer(at, "consume", tmp_path / "c.log", topic=topic, groupId="chaos-kjs-g",
                   expected=COUNT, timeoutMs=90_000).result()["records"]
    distinct = {(p, o): v for _m, p, o, _k, v, _s in records}
    assert sorted(v.encode() for v in distinct.values()) == expected("kj")
