"""The proxy in front of a broker that is not kaflite: Tansu (``tests/_tansu.py``).

confluent-kafka and kaflite's client produce and read back an exact count
through the proxy (kaflite's client in a consumer group), kaflite's client runs a transaction, the
registry names the roles (inferred from the traffic alone: nothing of Tansu's
own bookkeeping is used), and no answer a client got named Tansu's port.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from kaflite.proxy import Proxy
from tests._tansu import tansu_broker
from tests.proxy.conftest import AddressWatch

pytestmark = pytest.mark.interop


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
