"""``kaflite doctor`` on a real cluster's request log: a healthy producer and consumer
give no finding; a producer behind a round-robin VIP (kaflite's naive proxy) gives
``vip-bootstrap``, and the same producer through the aware proxy, or direct, none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from kaflite.cli import app
from kaflite.client.sync import Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.proxy import Proxy
from tests.doctor._traffic import logged, produce_through, storm_behind_vip

ON = {"kaflite.request.log.enable": "true", "kaflite.request.log.flush.ms": "50"}
runner = CliRunner()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=ON) as c:
        yield c


def doctor_report(bootstrap: str) -> dict[str, Any]:
    result = runner.invoke(app, ["doctor", "-b", bootstrap, "--json", "--minutes", "0"])
    assert result.exit_code == 0, (result.output, result.exception)
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_a_healthy_producer_and_consumer_give_no_finding(cluster: Cluster) -> None:
    cluster.create_topic("healthy", 6, 3)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                   "client.id": "healthy-producer", "acks": "all"}) as producer:
        for i in range(200):
            producer.send("healthy", f"v{i}".encode(), key=f"k{i}".encode())
        producer.flush()
    got = 0
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                   "client.id": "healthy-consumer", "group.id": "healthy",
                   "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(["healthy"])
        for _ in range(100):
            if got >= 200:
                break
            got += sum(len(r) for r in consumer.getmany(timeout_ms=500).values())
        consumer.commit()
    assert got == 200
    logged(cluster, "the consumer's last commit",
           lambda r: r.client_id == "healthy-consumer" and r.api == "OffsetCommit")
    report = doctor_report(cluster.bootstrap_servers)
    assert report["findings"] == []
    clients = {c["client_id"]: c for c in report["clients"]}
    producer_health, consumer_health = clients["healthy-producer"], clients["healthy-consumer"]
    assert set(producer_health["by_role"]["partition-leader"]) == {"0", "1", "2"}
    assert producer_health["metadata"]["reasons"].get("startup") == 1
    assert producer_health["errors"] == {}
    group = consumer_health["groups"][0]
    assert group["group"] == "healthy" and group["rebalances"] >= 1
    assert "group-coordinator" in consumer_health["by_role"]
    assert report["brokers"] == [0, 1, 2]
    # --follow prints a report each --interval, and stops after --reports
    followed = runner.invoke(app, ["doctor", "-b", cluster.bootstrap_servers, "--json",
                                   "--minutes", "0", "-f", "--interval", "1",
                                   "--reports", "2"])
    assert followed.exit_code == 0, (followed.output, followed.exception)
    lines = followed.stdout.splitlines()
    assert len(lines) == 2 and all("findings" in json.loads(line) for line in lines)


def test_the_vip_is_found_and_the_real_proxy_or_direct_is_not(cluster: Cluster) -> None:
    pytest.importorskip("confluent_kafka")
    from confluent_kafka import Producer as RdProducer

    cluster.create_topic("vip", 6, 3)
    stormer = storm_behind_vip(cluster, "vip")
    assert stormer is not None
    with Proxy(cluster.bootstrap_servers) as aware:
        assert produce_through(aware, "through-proxy", "vip") == 0
    direct = RdProducer({"bootstrap.servers": cluster.bootstrap_servers,
                         "client.id": "direct", "linger.ms": 5, "log_level": 0})
    for i in range(300):
        direct.produce("vip", f"d-{i}".encode(), key=str(i).encode())
    assert direct.flush(20) == 0
    for client_id in ("through-proxy", "direct"):
        logged(cluster, f"{client_id}'s produce",
               lambda r, c=client_id: r.client_id == c and r.api == "Produce")
    report = doctor_report(cluster.bootstrap_servers)
    found = {(f["name"], f["client_id"]) for f in report["findings"]}
    assert ("vip-bootstrap", stormer) in found
    assert not {f for f in found if f[1] in ("through-proxy", "direct")}
    vip = next(f for f in report["findings"]
               if f["name"] == "vip-bootstrap" and f["client_id"] == stormer)
    assert vip["counts"]["not_leader_or_follower"] >= 20 and vip["records"]


def test_no_request_log_says_how_to_turn_it_on() -> None:
    with Cluster(brokers=1) as plain:
        result = runner.invoke(app, ["doctor", "-b", plain.bootstrap_servers])
    assert result.exit_code == 1
    assert "__kaflite_requests does not exist" in result.output
    assert "kaflite up --request-log" in result.output
