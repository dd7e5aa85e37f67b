"""``kaflite.proxy.Proxy`` in front of each three-broker target, Apache Kafka included:
kaflite's client, through it only, creates a replicated topic, produces with acks=all
(idempotent and in a transaction) and reads everything back in a consumer group. The
proxy's registry names every connection's roles from the traffic alone, reaches all
three brokers, and no answer a client got named a broker's own port. ``kaflite doctor``,
on the request log the proxy writes, finds on Apache Kafka what it finds on kaflite."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer
from kaflite.client.sync import Consumer as SyncConsumer
from kaflite.proxy import Proxy
from kaflite.testing import ClusterUnderTest
from tests.doctor._traffic import produce_through
from tests.interop._clients import create_topic, run, uid
from tests.proxy.conftest import AddressWatch

pytestmark = pytest.mark.interop

PARTITIONS = 3
RECORDS = 300
DOCTORED = 400


@pytest.fixture
def watched_proxy(target3: ClusterUnderTest) -> Iterator[tuple[Proxy, AddressWatch]]:
    watch = AddressWatch()
    with Proxy(target3.bootstrap_servers, filters=[watch]) as proxy:
        yield proxy, watch


def test_kaflite_client_through_the_proxy(target3: ClusterUnderTest,
                                          watched_proxy: tuple[Proxy, AddressWatch]) -> None:
    proxy, watch = watched_proxy
    topic, group = uid("proxied"), uid("proxied-group")
    servers = proxy.bootstrap_servers

    async def main() -> list[bytes]:
        await create_topic(servers, topic, PARTITIONS, 3)
        async with Producer(bootstrap_servers=servers, acks="all", enable_idempotence=True,
                            client_id="px-producer") as p:
            for i in range(RECORDS):
                p.produce(topic, f"p{i}".encode(), partition=i % PARTITIONS)
            await p.flush()
        async with Producer(bootstrap_servers=servers, transactional_id=uid("px-tid"),
                            client_id="px-txn") as t:
            await t.init_transactions()
            t.begin_transaction()
            await t.send(topic, b"txn", partition=0)
            await t.commit_transaction()
        got: list[bytes] = []
        async with Consumer(bootstrap_servers=servers, group_id=group, client_id="px-consumer",
                            auto_offset_reset="earliest",
                            isolation_level="read_committed") as c:
            c.subscribe([topic])
            for _ in range(300):
                got += [r.value or b"" for r in await c.poll(200)]
                if len(got) >= RECORDS + 1:
                    break
        return got

    got = run(main(), timeout=120)
    assert sorted(got) == sorted([f"p{i}".encode() for i in range(RECORDS)] + [b"txn"])
    conns = proxy.connections(include_closed=True)
    roles = {r for c in conns for r in c.roles}
    assert {"partition-leader", "group-coordinator", "txn-coordinator"} <= roles, roles
    assert {c.broker for c in conns if c.broker is not None and c.broker >= 0} \
        >= set(target3.node_ids)
    upstream = {int(a.rsplit(":", 1)[1]) for a in target3.bootstrap_servers.split(",")}
    assert watch.answers > 0 and watch.ports
    assert not watch.ports & upstream
    assert watch.ports <= set(proxy.node_ports.values()) | {proxy.port}


def _doctor_report(bootstrap: str) -> dict[str, Any]:
    """``kaflite doctor --json`` over the whole request log on ``bootstrap``."""
    from typer.testing import CliRunner

    from kaflite.cli import app

    result = CliRunner().invoke(app, ["doctor", "-b", bootstrap, "--json", "--minutes", "0"])
    assert result.exit_code == 0, (result.output, result.exception)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def _healthy_through(proxy: Proxy, target: ClusterUnderTest, topic: str, group: str) -> int:
    """A librdkafka producer through ``proxy`` with partition 0's leader moved under it
    half-way (a recoverable fault), then a kaflite consumer group reading it all; the
    broker that leads partition 0 after the move."""
    from confluent_kafka import Producer as RdProducer

    producer = RdProducer({"bootstrap.servers": proxy.bootstrap_servers,
                           "client.id": "doctored-producer", "acks": "all", "linger.ms": 5,
                           "log_level": 0})
    for half in range(2):
        for i in range(DOCTORED // 2):
            producer.produce(topic, f"{half}-{i}".encode(), partition=i % PARTITIONS)
            producer.poll(0)
        assert producer.flush(30) == 0
        if half == 0:
            moved_to = target.move_leader(topic, 0)
    got = 0
    with SyncConsumer({"bootstrap.servers": proxy.bootstrap_servers,
                       "client.id": "doctored-consumer", "group.id": group,
                       "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe([topic])
        for _ in range(120):
            if got >= DOCTORED:
                break
            got += sum(len(r) for r in consumer.getmany(timeout_ms=500).values())
        consumer.commit()
    assert got == DOCTORED
    return moved_to


def test_the_doctor_through_the_proxy(target3: ClusterUnderTest) -> None:
    """``kaflite doctor`` on the request log the proxy writes (``request_log=True``) for
    the traffic it carries: against Apache Kafka, which logs no requests itself, it finds
    what it finds on kaflite. A producer and a consumer group through the proxy, with a
    leader moved under them, give no finding and the producer's recovery; producers
    behind the naive proxy (a round-robin VIP) give ``vip-bootstrap``."""
    pytest.importorskip("confluent_kafka")
    topic, group = uid("doctored"), uid("doctored-group")
    run(create_topic(target3.bootstrap_servers, topic, PARTITIONS, 3))
    with Proxy(target3.bootstrap_servers, request_log=True) as aware:
        moved_to = _healthy_through(aware, target3, topic, group)
    with Proxy(target3.bootstrap_servers, naive=True, request_log=True) as naive:
        stormer = next((f"doctored-vip-{n}" for n in range(5)
                        if produce_through(naive, f"doctored-vip-{n}", topic) > 0), None)
    assert stormer is not None, "five producers behind the VIP and no refusal"
    report = _doctor_report(target3.bootstrap_servers)
    found = {(f["name"], f["client_id"]) for f in report["findings"]}
    assert ("vip-bootstrap", stormer) in found, found
    assert not {f for f in found if f[1] in ("doctored-producer", "doctored-consumer")}
    clients = {c["client_id"]: c for c in report["clients"]}
    producer, consumer = clients["doctored-producer"], clients["doctored-consumer"]
    assert producer["source"] == consumer["source"] == "proxy"
    assert report["brokers"] == sorted(target3.node_ids)
    # the proxy's records name the upstream broker each connection goes to; the old
    # leader of partition 0 refused it, so that connection lost the role
    leaders = set(producer["by_role"]["partition-leader"])
    assert str(moved_to) in leaders <= {str(n) for n in target3.node_ids}, leaders
    # the old leader refused partition 0 once, and the producer found the new one
    recovery = producer["recovery"]
    assert set(recovery["by_error"]) == {"NOT_LEADER_OR_FOLLOWER"}, recovery
    assert recovery["recovered"] >= 1 and recovery["unrecovered"] == 0, recovery
    [membership] = consumer["groups"]
    assert membership["group"] == group and membership["rebalances"] >= 1
    assert "group-coordinator" in consumer["by_role"]
