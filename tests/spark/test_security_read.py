"""The Spark source and sink over SASL_SSL, configured as Spark's kafka format is."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client.sync import Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.security.certs import Pki, write_test_pki
from tests.spark.conftest import unique

JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="spark" password="spark-secret";')


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Pki]]:
    pki = write_test_pki(tmp_path_factory.mktemp("spark-pki"))
    config = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
              "sasl.users": "spark:spark-secret", **pki.broker_properties()}
    with Cluster(brokers=1, listeners="PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                 config=config) as cluster:
        yield cluster, pki


def test_source_and_sink_over_sasl_ssl(spark: Any, secured: tuple[Cluster, Pki]) -> None:
    cluster, pki = secured
    servers = cluster.bootstrap("SASL_SSL")
    java = {"kafka.bootstrap.servers": servers, "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": JAAS,
            "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(pki.ca)}
    client = {"bootstrap.servers": servers, "security.protocol": "SASL_SSL",
              "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "spark",
              "sasl.password": "spark-secret", "ssl.ca.location": str(pki.ca)}
    source, sink = unique("sec-in"), unique("sec-out")
    cluster.create_topic(source, 2)
    cluster.create_topic(sink, 1)
    with Producer(client) as p:
        for i in range(20):
            p.produce(source, f"v{i}".encode(), partition=i % 2)
        p.flush()
    reader = spark.read.format("kaflite")
    for k, v in java.items():
        reader = reader.option(k, v)
    df = reader.option("subscribe", source).load()
    values = sorted(bytes(r.value) for r in df.select("value").collect())
    assert values == sorted(f"v{i}".encode() for i in range(20))
    writer = df.select("value").write.format("kaflite").option("topic", sink)
    for k, v in java.items():
        writer = writer.option(k, v)
    writer.mode("append").save()
    got: list[bytes] = []
    with Consumer(client, auto_offset_reset="earliest") as c:
        c.assign([(sink, 0)])
        for _ in range(50):
            got += [r.value for r in c.poll(timeout_ms=200)]
            if len(got) >= 20:
                break
    assert sorted(got) == values
    principals = {(c.listener, c.principal) for c in cluster.connections(include_closed=True)
                  if c.listener == "SASL_SSL"}
    assert principals == {("SASL_SSL", "User:spark")}
