"""The console of a multi-process cluster (``kaflite up --processes``): its chart series
come from the broker processes' own counters (their /metrics families)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi

ck = pytest.importorskip("confluent_kafka")

TOPIC, RECORDS = "charted", 40


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, httpx.Client]]:
    with Cluster(brokers=2, processes=True) as cluster:
        cluster.create_topic(TOPIC, 2, 2)
        api = cluster.call(HttpApi(cluster).start())
        try:
            with httpx.Client(base_url=api.url, timeout=30) as client:
                yield cluster, client
        finally:
            cluster.call(api.stop())


def _samples(c: httpx.Client) -> list[dict[str, object]]:
    resp = c.get("/api/series")
    assert resp.status_code == 200, resp.text
    samples = resp.json()["samples"]
    assert isinstance(samples, list)
    return samples


def test_series_integrate_to_what_was_produced(served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    for _ in range(100):                   # a first sample, before anything is produced
        if _samples(c):
            break
        time.sleep(0.1)
    first = _samples(c)
    assert first
    since = first[-1]["t"]
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                            "client.id": "charted-producer", "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(TOPIC, b"value-%d" % i, partition=i % 2)
    assert producer.flush(15) == 0
    # per-second rates times their intervals add up to the records produced
    total, produces, brokers = 0.0, 0.0, set()
    for _ in range(150):
        samples = _samples(c)
        total, produces, brokers, prev = 0.0, 0.0, set(), since
        for s in samples:
            t = s["t"]
            assert isinstance(t, float) and isinstance(prev, float)
            if t <= prev:
                continue
            dt, prev = t - prev, t
            topics = s["topics"]
            apis = s["apis"]
            assert isinstance(topics, dict) and isinstance(apis, dict)
            total += topics.get(TOPIC, {}).get("messages_in", 0.0) * dt
            produces += apis.get("Produce", {}).get("requests", 0.0) * dt
            by_broker = s["brokers"]
            assert isinstance(by_broker, dict)
            brokers |= {b for b, row in by_broker.items() if row["bytes_in"] > 0}
        if total >= RECORDS - 0.5:
            break
        time.sleep(0.2)
    assert abs(total - RECORDS) < 0.5, (total, samples)
    assert round(produces) >= 2 and brokers == {"0", "1"}    # rates x intervals: rounded
