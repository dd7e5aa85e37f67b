"""Third-party clients over SASL_SSL against a 3-broker cluster whose brokers
replicate over the same SASL_SSL listener (SCRAM-SHA-512): confluent-kafka
(librdkafka), kafka-python, aiokafka, kcat and kafkajs each produce and consume
in a group with PLAIN and with SCRAM-SHA-512; confluent-kafka also with
OAUTHBEARER (librdkafka's unsecured development token). The registry shows each
client's principal and mechanism, and that the replica fetchers authenticated."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.observe import ConnectionSnapshot
from kaflite.security.certs import Pki
from tests.cluster.security.conftest import security_config
from tests.conftest import wait_for

MECHANISMS = ["PLAIN", "SCRAM-SHA-512"]
N = 20
KCAT = shutil.which("kcat")
NODE = shutil.which("node")
KAFKAJS = Path(__file__).parent.parent / "kafkajs" / "node_modules" / "kafkajs"


@pytest.fixture(scope="module")
def cluster(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    config = security_config(pki)
    config |= {"inter.broker.listener.name": "SASL_SSL",
               "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
               "sasl.users": "admin:admin-secret,alice:alice-secret",
               "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                   "org.apache.kafka.common.security.scram.ScramLoginModule required "
                   'username="admin" password="admin-secret";'}
    with Cluster(brokers=3, listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                 config=config) as c:
        yield c


def new_topic(cluster: Cluster, client: str) -> str:
    topic = f"{client}-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=3, replication_factor=3)
    return topic


def expected() -> list[str]:
    return [f"v{i}" for i in range(N)]


PRE_AUTH = {"ApiVersions", "SaslHandshake", "SaslAuthenticate"}


def assert_registry(cluster: Cluster, client_id: str, mechanism: str,
                    principal: str = "User:alice") -> None:
    # A client may drop a connection before it has authenticated (librdkafka does, now
    # and then, with a spare connection to a broker): such a row is closed and made no
    # request past the handshake. Every other row is the user's. The client has exited
    # by now, but the broker may not have read the close of such a connection yet.
    def snapshot() -> list[ConnectionSnapshot]:
        return cluster.connections(client_id=client_id, include_closed=True)

    wait_for(lambda: all(r.closed_at is not None for r in snapshot()
                         if r.sasl_mechanism is None),
             f"{client_id}'s unauthenticated connections to close", state=snapshot)
    rows = snapshot()
    done = [r for r in rows if r.sasl_mechanism is not None]
    for r in rows:
        if r.sasl_mechanism is None:
            assert r.closed_at is not None and set(r.apis) <= PRE_AUTH, r
    assert done, f"no authenticated connection of {client_id}: {rows}"
    assert {(r.principal, r.sasl_mechanism, r.security_protocol) for r in done} == {
        (principal, mechanism, "SASL_SSL")}


def test_replica_fetchers_authenticated(cluster: Cluster) -> None:
    new_topic(cluster, "replicated")      # 3 partitions, RF 3: every broker follows

    def fetchers() -> list[ConnectionSnapshot]:
        return [c for c in cluster.connections(include_replicas=True)
                if c.replica_id is not None]

    wait_for(lambda: {c.replica_id for c in fetchers()} == {0, 1, 2},
             "every broker's replica fetcher", state=fetchers)
    assert {(c.listener, c.principal, c.sasl_mechanism) for c in fetchers()} == {
        ("SASL_SSL", "User:admin", "SCRAM-SHA-512")}


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(cluster: Cluster, pki: Pki, mechanism: str) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic, client_id = new_topic(cluster, "ck"), f"ck-{mechanism}"
    common = {"bootstrap.servers": cluster.bootstrap("SASL_SSL"), "client.id": client_id,
              "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
              "sasl.username": "alice", "sasl.password": "alice-secret",
              "ssl.ca.location": str(pki.ca)}
    produce_consume_confluent(ck, common, topic)
    assert_registry(cluster, client_id, mechanism)


def produce_consume_confluent(ck: ModuleType, common: dict[str, object], topic: str) -> None:
    producer = ck.Producer({**common, "acks": "all"})
    for value in expected():
        producer.produce(topic, value.encode())
    assert producer.flush(30) == 0
    consumer = ck.Consumer({**common, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[str] = []
    try:
        for _ in range(300):
            if len(got) >= N:
                break
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value().decode())
    finally:
        consumer.close()
    assert sorted(got) == sorted(expected())


def test_confluent_kafka_oauthbearer(cluster: Cluster, pki: Pki) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(cluster, "ck-oauth")
    common = {"bootstrap.servers": cluster.bootstrap("SASL_SSL"), "client.id": "ck-oauth",
              "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
              "sasl.oauthbearer.config": "principal=alice",
              "enable.sasl.oauthbearer.unsecure.jwt": True, "ssl.ca.location": str(pki.ca)}
    produce_consume_confluent(ck, common, topic)
    assert_registry(cluster, "ck-oauth", "OAUTHBEARER")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(cluster: Cluster, pki: Pki, mechanism: str) -> None:
    kafka = pytest.importorskip("kafka")
    topic, client_id = new_topic(cluster, "kp"), f"kp-{mechanism}"
    common = {"bootstrap_servers": cluster.bootstrap("SASL_SSL"), "client_id": client_id,
              "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism,
              "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret",
              "ssl_cafile": str(pki.ca)}
    producer = kafka.KafkaProducer(acks="all", **common)
    for value in expected():
        producer.send(topic, value.encode())
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                                   consumer_timeout_ms=15000, **common)
    got: list[str] = []
    for msg in consumer:
        got.append(msg.value.decode())
        if len(got) >= N:
            break
    consumer.close()
    assert sorted(got) == sorted(expected())
    assert_registry(cluster, client_id, mechanism)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka(cluster: Cluster, pki: Pki, mechanism: str) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.helpers import create_ssl_context

    topic, client_id = new_topic(cluster, "aio"), f"aio-{mechanism}"

    async def main() -> list[str]:
        common = {"bootstrap_servers": cluster.bootstrap("SASL_SSL"), "client_id": client_id,
                  "security_protocol": "SASL_SSL", "sasl_mechanism": mechanism,
                  "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret",
                  "ssl_context": create_ssl_context(cafile=str(pki.ca))}
        producer = aiokafka.AIOKafkaProducer(acks="all", **common)
        await producer.start()
        try:
            for value in expected():
                await producer.send_and_wait(topic, value.encode())
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id=f"g-{topic}",
                                             auto_offset_reset="earliest", **common)
        await consumer.start()
        got: list[str] = []
        try:
            async with asyncio.timeout(30):
                async for msg in consumer:
                    got.append(msg.value.decode())
                    if len(got) >= N:
                        break
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(main())) == sorted(expected())
    assert_registry(cluster, client_id, mechanism)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat(cluster: Cluster, pki: Pki, mechanism: str) -> None:
    assert KCAT is not None
    topic, client_id = new_topic(cluster, "kcat"), f"kcat-{mechanism}"
    security = ["-X", "security.protocol=SASL_SSL", "-X", f"sasl.mechanism={mechanism}",
                "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret",
                "-X", f"ssl.ca.location={pki.ca}", "-X", f"client.id={client_id}"]
    bootstrap = ["-b", cluster.bootstrap("SASL_SSL")]
    subprocess.run([KCAT, *bootstrap, *security, "-P", "-t", topic],
                   input="\n".join(expected()) + "\n", text=True, check=True, timeout=60,
                   capture_output=True)
    out = subprocess.run([KCAT, *bootstrap, *security, "-X", "auto.offset.reset=earliest",
                          "-G", f"g-{topic}", "-c", str(N), "-f", "%s\n", topic],
                         text=True, timeout=60, capture_output=True)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.split()) == sorted(expected())
    assert_registry(cluster, client_id, mechanism)


@pytest.mark.skipif(NODE is None or not KAFKAJS.is_dir(),
                    reason="kafkajs is not installed (tools/ensure_kafkajs.sh)")
@pytest.mark.peer
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafkajs(cluster: Cluster, pki: Pki, mechanism: str) -> None:
    assert NODE is not None
    topic, client_id = new_topic(cluster, "kjs"), f"kjs-{mechanism}"
    spec = {"brokers": cluster.bootstrap("SASL_SSL"), "clientId": client_id, "topic": topic,
            "group": f"g-{topic}", "ca": str(pki.ca), "mechanism": mechanism.lower(),
            "username": "alice", "password": "alice-secret", "values": expected()}
    proc = subprocess.run([NODE, str(Path(__file__).parent / "kafkajs_sasl.js"),
                           json.dumps(spec)], text=True, timeout=90, capture_output=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])["consumed"]
    assert sorted(got) == sorted(expected())
    assert_registry(cluster, client_id, mechanism)


def test_transaction_markers_go_over_the_inter_broker_listener(cluster: Cluster,
                                                                pki: Pki) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = new_topic(cluster, "txn")
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap("SASL_SSL"),
                            "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                            "sasl.username": "alice", "sasl.password": "alice-secret",
                            "ssl.ca.location": str(pki.ca), "transactional.id": "sec-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for p in range(3):
        producer.produce(topic, b"in-txn", partition=p)
    producer.commit_transaction(30)

    def senders() -> list[ConnectionSnapshot]:
        return [c for c in cluster.connections(include_replicas=True)
                if "txn-marker-sender" in c.roles]

    wait_for(senders, "a marker sender connection", state=senders)
    assert {(c.listener, c.principal, c.sasl_mechanism) for c in senders()} == {
        ("SASL_SSL", "User:admin", "SCRAM-SHA-512")}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_kaflite_client(cluster: Cluster, pki: Pki, mechanism: str) -> None:
    from kaflite.client import Consumer, Producer

    topic, client_id = new_topic(cluster, "kaflite"), f"kaflite-{mechanism}"
    common: dict[str, object] = {
        "bootstrap.servers": cluster.bootstrap("SASL_SSL"), "client.id": client_id,
        "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
        "ssl.ca.location": str(pki.ca)}
    if mechanism == "OAUTHBEARER":
        common["sasl.oauthbearer.config"] = "principal=alice"
    else:
        common |= {"sasl.username": "alice", "sasl.password": "alice-secret"}

    async def main() -> list[str]:
        async with Producer(common) as producer:
            for value in expected():
                await producer.send(topic, value.encode())
        got: list[str] = []
        async with Consumer({**common, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest"}) as consumer:
            consumer.subscribe([topic])
            for _ in range(100):
                if len(got) >= N:
                    break
                got += [r.value.decode() for r in await consumer.poll(timeout_ms=200)]
        return got

    assert sorted(asyncio.run(main())) == sorted(expected())
    assert_registry(cluster, client_id, mechanism)
