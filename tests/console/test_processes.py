"""The console of a multi-process cluster (``kaflite up --processes``): its chart series
come from the broker processes' own counters (their /metrics families); a share group's
in-flight records from the share-partition of the broker process leading the partition."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from kaflite.client import ShareConsumer
from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi
from tests.client.share.conftest import join, produce

ck = pytest.importorskip("confluent_kafka")

TOPIC, RECORDS = "charted", 40
SHARED, WORKERS = "shared", "process-workers"
CONFIG = {"group.share.record.lock.duration.ms": "60000",   # no lock expires in a test
          "group.share.heartbeat.interval.ms": "200",
          "group.share.min.heartbeat.interval.ms": "100"}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, httpx.Client]]:
    with Cluster(brokers=2, processes=True, config=CONFIG) as cluster:
        cluster.create_topic(TOPIC, 2, 2)
        cluster.create_topic(SHARED, 1, 2)
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


def test_share_group_in_flight_records_from_the_leader_process(
        served: tuple[Cluster, httpx.Client]) -> None:
    cluster, c = served
    servers = cluster.bootstrap_servers

    async def hold() -> tuple[str, dict[str, object]]:
        consumer = ShareConsumer({"bootstrap.servers": servers, "group.id": WORKERS,
                                  "share.acknowledgement.mode": "explicit"})
        try:
            await consumer.start()
            consumer.subscribe([SHARED])
            await join([consumer], partitions=1)
            await produce(servers, SHARED, 2, partitions=1)
            got: list[object] = []
            deadline = time.monotonic() + 15
            while len(got) < 2 and time.monotonic() < deadline:
                got.extend(await consumer.poll(200))
            assert len(got) == 2
            async with httpx.AsyncClient(base_url=str(c.base_url), timeout=30) as http:
                r = await http.get(f"/api/groups/{WORKERS}/share-partitions")
            assert r.status_code == 200, r.text
            return consumer.member_id, r.json()
        finally:
            await consumer.close()

    member, body = asyncio.run(hold())
    assert body["in_flight_shown"] is True
    [row] = body["partitions"]
    assert row["error"] is None, row
    flight = row["in_flight"]
    assert flight["live"] is True and flight["counts"]["acquired"] == 2
    assert [(r["offset"], r["state"], r["delivery_count"], r["member_id"])
            for r in flight["records"]] == [(0, "acquired", 1, member), (1, "acquired", 1, member)]
