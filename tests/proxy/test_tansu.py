"""The proxy in front of a broker that is not kaflite: Tansu (``tests/_tansu.py``).

Through the proxy, confluent-kafka (assigned), kaflite's client, kafka-python,
aiokafka, kcat and kafkajs (in consumer groups) produce and read back an exact
count; confluent-kafka, kaflite's client, kafka-python and kcat run a
transaction. The registry
names the roles (inferred from the traffic alone: nothing of Tansu's own
bookkeeping is used), and no answer a client got named Tansu's port. What Tansu
0.6 does not support (InitProducerId below v3, so aiokafka's and kafkajs's
idempotent and transactional producers; filtering aborted records for
read_committed; coordinator or leader moves, with one broker) is in
docs/proxy.md, "Against Tansu".
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.proxy import Proxy
from tests._tansu import tansu_broker
from tests.cluster.test_kafkajs import At, Peer, needs_kafkajs
from tests.proxy.conftest import AddressWatch

pytestmark = [pytest.mark.interop, pytest.mark.peer]


@pytest.fixture(scope="module")
def tansu() -> Iterator[str]:
    with tansu_broker() as servers:
        yield servers


@pytest.fixture(scope="module")
def watch() -> AddressWatch:
    return AddressWatch()


@pytest.fixture(scope="module")
def tansu_proxy(tansu: str, watch: AddressWatch) -> Iterator[Proxy]:
    with Proxy(tansu, filters=[watch]) as p:
        yield p


def check_addresses(watch: AddressWatch, tansu: str, proxy: Proxy) -> None:
    assert watch.answers > 0
    assert int(tansu.rsplit(":", 1)[1]) not in watch.ports
    assert watch.ports and watch.ports <= set(proxy.node_ports.values()) | {proxy.port}


def test_confluent_kafka_through_the_proxy(tansu: str, tansu_proxy: Proxy,
                                           watch: AddressWatch) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic, group = f"px-t-{uuid.uuid4().hex[:6]}", f"px-g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": tansu_proxy.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": tansu_proxy.bootstrap_servers, "linger.ms": 5})
    acked: list[bytes] = []
    for i in range(300):
        producer.produce(topic, f"c-{i}".encode(), partition=i % 3,
                         on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
    assert producer.flush(30) == 0
    assert len(acked) == 300
    # assigned, not subscribed: librdkafka takes 23 s to join a group on Tansu (directly
    # as through the proxy); kaflite's client below reads in a group
    consumer = Consumer({"bootstrap.servers": tansu_proxy.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "client.id": "px-tansu-c"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < 300 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value())
        roles = {r for c in tansu_proxy.connections(client_id="px-tansu-c") for r in c.roles}
    finally:
        consumer.close()
    assert sorted(got) == sorted(acked)
    assert "partition-leader" in roles
    # a transaction: librdkafka's InitProducerId (v3+) is one Tansu answers
    txn_topic = f"px-tx-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(txn_topic, 1, 1)])[txn_topic].result(30)
    tp = Producer({"bootstrap.servers": tansu_proxy.bootstrap_servers, "client.id": "px-tansu-ct",
                   "transactional.id": f"px-ctid-{uuid.uuid4().hex[:6]}"})
    tp.init_transactions(30)
    tp.begin_transaction()
    for i in range(5):
        tp.produce(txn_topic, f"t-{i}".encode())
    tp.commit_transaction(30)
    reader = Consumer({"bootstrap.servers": tansu_proxy.bootstrap_servers,
                       "group.id": f"px-r-{uuid.uuid4().hex[:6]}",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    reader.assign([TopicPartition(txn_topic, 0, 0)])
    read: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(read) < 5 and time.monotonic() < deadline:
            msg = reader.poll(0.2)
            if msg is not None and not msg.error():
                read.append(msg.value())
    finally:
        reader.close()
    assert read == [f"t-{i}".encode() for i in range(5)]
    roles = {r for c in tansu_proxy.connections(client_id="px-tansu-ct", include_closed=True)
             for r in c.roles}
    assert "txn-coordinator" in roles
    check_addresses(watch, tansu, tansu_proxy)


def test_kaflite_client_through_the_proxy(tansu: str, tansu_proxy: Proxy,
                                          watch: AddressWatch) -> None:
    from kaflite.client import Admin, Consumer, NewTopic, Producer

    topic, group = f"px-k-{uuid.uuid4().hex[:6]}", f"px-kg-{uuid.uuid4().hex[:6]}"
    bootstrap = tansu_proxy.bootstrap_servers

    async def main() -> list[bytes]:
        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics([NewTopic(topic, 3, 1)])
        async with Producer(bootstrap_servers=bootstrap) as p:
            for i in range(300):
                p.produce(topic, f"k-{i}".encode(), partition=i % 3)
            await p.flush()
        async with Producer({"bootstrap.servers": bootstrap,
                             "transactional.id": f"px-tid-{uuid.uuid4().hex[:6]}"}) as tp:
            await tp.init_transactions()
            tp.begin_transaction()
            await tp.send(topic, b"txn-committed", partition=0)
            await tp.commit_transaction()
        async with Consumer(bootstrap_servers=bootstrap, group_id=group,
                            auto_offset_reset="earliest", session_timeout_ms=10000,
                            heartbeat_interval_ms=1000) as c:
            c.subscribe([topic])
            out: list[bytes] = []
            for _ in range(40):
                out += [r.value for r in await c.poll(1000) if r.value is not None]
                if len(out) >= 301:
                    break
            return out

    got = asyncio.run(asyncio.wait_for(main(), 90))
    assert sorted(got) == sorted([f"k-{i}".encode() for i in range(300)] + [b"txn-committed"])
    roles = {r for c in tansu_proxy.connections(include_closed=True) for r in c.roles}
    assert "txn-coordinator" in roles
    check_addresses(watch, tansu, tansu_proxy)


# Tansu's JoinGroup that follows MEMBER_ID_REQUIRED comes back after 23 s with
# kafka-python's defaults (directly too), after about 3 s with these
FAST_GROUP = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000,
              "max_poll_interval_ms": 8000}
N = 300


def new_topic(bootstrap: str, partitions: int = 3) -> str:
    from kaflite.client import NewTopic
    from kaflite.client.sync import Admin

    topic = f"px-t-{uuid.uuid4().hex[:6]}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    return topic


def test_kafka_python_through_the_proxy(tansu: str, tansu_proxy: Proxy,
                                        watch: AddressWatch) -> None:
    import kafka

    bootstrap = tansu_proxy.bootstrap_servers
    topic, group = new_topic(bootstrap), f"px-kpg-{uuid.uuid4().hex[:6]}"
    producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    futures = [producer.send(topic, f"kp-{i}".encode(), key=str(i % 7).encode())
               for i in range(N)]
    producer.flush(30)
    assert all(f.get(30) for f in futures)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                   client_id="px-tansu-kp", auto_offset_reset="earliest",
                                   enable_auto_commit=False, **FAST_GROUP)
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < N and time.monotonic() < deadline:
            for records in consumer.poll(500).values():
                got += [r.value for r in records]
        consumer.commit()
        tps = [kafka.TopicPartition(topic, p) for p in range(3)]
        assert consumer.assignment() == set(tps)
        assert sum(consumer.committed(tp) or 0 for tp in tps) == N
        roles = {r for c in tansu_proxy.connections(client_id="px-tansu-kp") for r in c.roles}
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"kp-{i}".encode() for i in range(N))
    assert {"group-coordinator", "partition-leader"} <= roles
    # a transaction: Tansu runs the exchange (InitProducerId, AddPartitionsToTxn, EndTxn)
    txn_topic = new_topic(bootstrap, 1)
    tp = kafka.KafkaProducer(bootstrap_servers=bootstrap, client_id="px-tansu-kp-txn",
                             transactional_id=f"px-kp-tid-{uuid.uuid4().hex[:6]}")
    tp.init_transactions()
    tp.begin_transaction()
    for i in range(5):
        tp.send(txn_topic, f"keep-{i}".encode())
    tp.commit_transaction()
    tp.close()
    reader = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                 auto_offset_reset="earliest", enable_auto_commit=False)
    reader.assign([kafka.TopicPartition(txn_topic, 0)])
    read: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(read) < 5 and time.monotonic() < deadline:
        for records in reader.poll(300).values():
            read += [r.value for r in records]
    reader.close()
    assert read == [f"keep-{i}".encode() for i in range(5)]
    roles = {r for c in tansu_proxy.connections(client_id="px-tansu-kp-txn", include_closed=True)
             for r in c.roles}
    assert "txn-coordinator" in roles
    check_addresses(watch, tansu, tansu_proxy)


def test_aiokafka_through_the_proxy(tansu: str, tansu_proxy: Proxy,
                                    watch: AddressWatch) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bootstrap = tansu_proxy.bootstrap_servers
    topic, group = new_topic(bootstrap), f"px-aiog-{uuid.uuid4().hex[:6]}"

    async def main() -> tuple[list[bytes], int]:
        # not idempotent: aiokafka sends InitProducerId v0, which Tansu 0.6 answers
        # UNKNOWN_SERVER_ERROR (docs/proxy.md)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all",
                                    enable_idempotence=False)
        await producer.start()
        try:
            sends = [await producer.send(topic, f"aio-{i}".encode(), key=str(i % 7).encode())
                     for i in range(N)]
            for fut in sends:
                await fut
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                    client_id="px-tansu-aio", auto_offset_reset="earliest",
                                    enable_auto_commit=False, **FAST_GROUP)
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < N and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [r.value for r in records if r.value is not None]
            await consumer.commit()
            committed = sum([await consumer.committed(tp) or 0 for tp in consumer.assignment()])
        finally:
            await consumer.stop()
        return got, committed

    got, committed = asyncio.run(asyncio.wait_for(main(), 90))
    assert sorted(got) == sorted(f"aio-{i}".encode() for i in range(N))
    assert committed == N
    roles = {r for c in tansu_proxy.connections(client_id="px-tansu-aio", include_closed=True)
             for r in c.roles}
    assert {"group-coordinator", "partition-leader"} <= roles
    check_addresses(watch, tansu, tansu_proxy)


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_through_the_proxy(tansu: str, tansu_proxy: Proxy, watch: AddressWatch) -> None:
    """kcat 1.7.1's librdkafka (2.0.2) cannot read Tansu's own ApiVersions answer; the
    proxy's (default tags left out) it reads."""
    assert KCAT is not None
    bootstrap = tansu_proxy.bootstrap_servers
    topic, group = new_topic(bootstrap), f"px-kcg-{uuid.uuid4().hex[:6]}"
    proc = subprocess.run([KCAT, "-b", bootstrap, "-P", "-t", topic, "-K:", "-X", "acks=all"],
                          input="".join(f"k{i % 7}:kc-{i}\n" for i in range(N)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([KCAT, "-b", bootstrap, "-G", group, "-e", "-q", "-f", "%s\n",
                           "-X", "auto.offset.reset=earliest", "-X", "client.id=px-tansu-kcat",
                           "-X", "session.timeout.ms=6000", "-X", "max.poll.interval.ms=8000",
                           topic], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == sorted(f"kc-{i}" for i in range(N))
    roles = {r for c in tansu_proxy.connections(client_id="px-tansu-kcat", include_closed=True)
             for r in c.roles}
    assert {"group-coordinator", "partition-leader"} <= roles
    # a transaction, committed when kcat's input ends
    txn_topic = new_topic(bootstrap, 1)
    proc = subprocess.run([KCAT, "-b", bootstrap, "-P", "-t", txn_topic, "-m", "20",
                           "-X", f"transactional.id=px-kcat-tid-{uuid.uuid4().hex[:6]}"],
                          input="".join(f"t-{i}\n" for i in range(5)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "Transaction successfully committed" in proc.stderr, \
        proc.stderr
    proc = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", txn_topic, "-e", "-q",
                           "-f", "%s\n", "-X", "isolation.level=read_committed"],
                          capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == [f"t-{i}" for i in range(5)], proc.stderr
    check_addresses(watch, tansu, tansu_proxy)


@needs_kafkajs
def test_kafkajs_through_the_proxy(tansu: str, tansu_proxy: Proxy, watch: AddressWatch,
                                   tmp_path: Path) -> None:
    bootstrap = tansu_proxy.bootstrap_servers
    topic, group = new_topic(bootstrap), f"px-kjg-{uuid.uuid4().hex[:6]}"
    at = At(bootstrap)
    consumer = Peer(at, "consume", tmp_path / "consume.log", topic=topic, groupId=group,
                    expected=N, sessionTimeout=6000, rebalanceTimeout=8000, timeoutMs=90_000)
    consumer.wait_for(lambda lines: any("joined" in line for line in lines), 60, "a join")
    producer = Peer(at, "produce", tmp_path / "produce.log", topic=topic, count=N, batch=100,
                    compression="none", idempotent=False, prefix="j")
    acks = producer.result()["acks"]
    assert all(code == 0 for *_, code in acks)
    records = consumer.result()["records"]
    distinct = {(p, o): seq for _m, p, o, _k, _v, seq in records}
    assert sorted(int(seq) for seq in distinct.values()) == list(range(N))
    roles = {r for c in tansu_proxy.connections(client_id="kafkajs-interop", include_closed=True)
             for r in c.roles}
    assert {"group-coordinator", "partition-leader"} <= roles
    check_addresses(watch, tansu, tansu_proxy)
