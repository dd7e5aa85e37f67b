"""Spark tests: one local[2] SparkSession for the whole run, and one kaflite cluster.

The session is small on purpose (2 cores, 2 shuffle partitions, no UI): the
machines that run these tests are shared. Tests that need a Spark session
take the ``spark`` fixture; the pure unit tests (options, offsets, Arrow) do
not start a JVM.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client.sync import Admin, Producer
from kaflite.cluster import Cluster

_names = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{int(time.time() * 1000) % 100000}"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    import kaflite.spark

    try:
        session = kaflite.spark.local_session("kaflite-spark-tests")
    except kaflite.spark.NoJavaError as exc:
        pytest.skip(str(exc))
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka() -> Iterator[Cluster]:
    with Cluster(brokers=2) as c:
        yield c


@pytest.fixture(scope="session")
def servers(kafka: Cluster) -> str:
    return kafka.bootstrap_servers


def produce(servers: str, topic: str, records: list[dict[str, Any]], acks: int = -1) -> None:
    """Write records (dicts of value/key/partition/headers/timestamp) and wait for acks."""
    with Producer({"bootstrap.servers": servers, "linger.ms": 5, "acks": acks,
                   "enable.idempotence": acks == -1}) as p:
        for r in records:
            p.produce(topic, r["value"], key=r.get("key"), partition=r.get("partition"),
                      headers=r.get("headers"), timestamp=r.get("timestamp"))
        p.flush()


def admin(servers: str) -> Admin:
    return Admin({"bootstrap.servers": servers}).start()


def source(spark: Any, servers: str, stream: bool = False, **options: str) -> Any:
    reader = spark.readStream if stream else spark.read
    reader = reader.format("kaflite").option("kafka.bootstrap.servers", servers)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()
