"""KIP-368 with librdkafka: with connections.max.reauth.ms at 2 s, confluent-kafka
re-authenticates its connections and keeps producing and consuming, losing nothing."""

from __future__ import annotations

import time

import pytest

from kaflite.cluster import Cluster
from kaflite.security.certs import Pki
from tests.cluster.security.conftest import security_config


def test_confluent_kafka_keeps_consuming_across_reauthentications(
        pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> None:
    ck = pytest.importorskip("confluent_kafka")
    config = security_config(pki)
    config["listener.name.sasl_ssl.connections.max.reauth.ms"] = "2000"
    with Cluster(brokers=1, listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                 config=config) as cluster:
        cluster.create_topic("reauth", partitions=2)
        common = {"bootstrap.servers": cluster.bootstrap("SASL_SSL"),
                  "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
                  "sasl.username": "alice", "sasl.password": "alice-secret",
                  "ssl.ca.location": str(pki.ca)}
        producer = ck.Producer({**common, "client.id": "reauth-producer", "acks": "all"})
        consumer = ck.Consumer({**common, "client.id": "reauth-consumer",
                                "group.id": "reauth-group", "auto.offset.reset": "earliest"})
        consumer.subscribe(["reauth"])
        sent: list[str] = []
        got: list[str] = []

        def reauths(client_id: str) -> int:
            return max((c.reauthentications for c in cluster.connections(client_id=client_id)),
                       default=0)

        try:
            deadline = time.monotonic() + 30
            i = 0
            # until both re-authenticated three times (each about every 2 s)
            while time.monotonic() < deadline and not (
                    reauths("reauth-consumer") >= 3 and reauths("reauth-producer") >= 3):
                i += 1
                value = f"m{i}"
                producer.produce("reauth", value.encode())
                sent.append(value)
                producer.poll(0)
                msg = consumer.poll(0.02)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append(msg.value().decode())
                else:
                    time.sleep(0.01)
            assert producer.flush(30) == 0
            deadline = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < deadline:
                msg = consumer.poll(0.1)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append(msg.value().decode())
        finally:
            consumer.close()
        assert reauths("reauth-producer") >= 3
        assert sorted(got) == sorted(sent)    # nothing lost (nor duplicated)
        rows = cluster.connections(client_id="reauth-consumer", include_closed=True)
        assert all(r.principal == "User:alice" for r in rows)
        assert any(r.reauthentications >= 3 for r in rows)
