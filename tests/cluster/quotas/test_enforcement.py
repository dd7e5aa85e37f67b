"""Quota enforcement beyond byte rates: controller mutations (KIP-599), a client
that ignores its throttle, the sync consumer's fetches, and quotas across a restart."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from kaflite.client._quotas import ClientQuotaAlteration as Alter
from kaflite.client.sync import Admin, Consumer, Producer
from kaflite.cluster import Cluster, network
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ProduceRequest,
    Request,
    Struct,
)
from kaflite.protocol.messages import create_partitions_request as cpq
from kaflite.protocol.messages import create_topics_request as ctq
from kaflite.protocol.messages import delete_topics_request as dtq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch
from tests.cluster.security._wire import Wire

CLIENT = "security-test"        # the client id the bare wire client sends
R = TypeVar("R", bound=Struct)
THROTTLED = errors.ThrottlingQuotaExceededError.code


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    # two windows of 1 s: throttle times stay short
    with Cluster(brokers=1, config={"quota.window.num": "2"}) as c:
        yield c


def _admin(cluster: Cluster) -> Admin:
    return Admin({"bootstrap.servers": cluster.bootstrap_servers})


def _create(name: str, partitions: int) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[ctq.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1)], timeout_ms=5000)


def test_controller_mutation_rate_counts_partitions_strictly_or_permissively(
        cluster: Cluster) -> None:
    with _admin(cluster) as admin:
        # 10 partitions/s: a burst of 10 * 2 windows = 20
        admin.alter_client_quotas([Alter({"client-id": CLIENT}, {"controller_mutation_rate": 10})])

    async def ask(body: Request[R], version: int) -> R:
        wire = await Wire.open(cluster.broker(0).port)   # a fresh, unmuted connection
        try:
            return await wire.request(body, version)
        finally:
            wire.close()

    async def run() -> None:
        # 25 partitions with 20 tokens left: allowed, the bucket goes 5 under
        first = await ask(_create("mut-a", 25), 7)
        assert first.topics[0].error_code == 0
        assert 300 <= first.throttle_time_ms <= 500          # 5 / 10 per second
        # strict versions refuse while the bucket is below zero, and create nothing
        strict = await ask(_create("mut-b", 1), 6)
        assert strict.topics[0].error_code == THROTTLED and strict.throttle_time_ms > 0
        more = await ask(CreatePartitionsRequest(topics=[cpq.CreatePartitionsTopic(
            name="mut-a", count=26, assignments=None)], timeout_ms=5000), 3)
        assert more.results[0].error_code == THROTTLED
        gone = await ask(DeleteTopicsRequest(topics=[dtq.DeleteTopicState(name="mut-a")],
                                             timeout_ms=5000), 6)
        assert gone.responses[0].error_code == THROTTLED
        assert "mut-b" not in cluster.controller.topics
        assert len(cluster.controller.topics["mut-a"].partitions) == 25
        # older versions go ahead, and are told how long to wait
        old = await ask(_create("mut-c", 1), 5)
        assert old.topics[0].error_code == 0 and old.throttle_time_ms > 0
        old_more = await ask(CreatePartitionsRequest(topics=[cpq.CreatePartitionsTopic(
            name="mut-c", count=2, assignments=None)], timeout_ms=5000), 2)
        assert old_more.results[0].error_code == 0 and old_more.throttle_time_ms > 0
        old_gone = await ask(DeleteTopicsRequest(topic_names=["mut-c"], timeout_ms=5000), 4)
        assert old_gone.responses[0].error_code == 0 and old_gone.throttle_time_ms > 0
        assert "mut-c" not in cluster.controller.topics
        # validate_only mutates nothing and is not refused
        check = _create("mut-e", 1)
        check.validate_only = True
        assert (await ask(check, 7)).topics[0].error_code == 0

    asyncio.run(run())
    with _admin(cluster) as admin:
        admin.alter_client_quotas([Alter({"client-id": CLIENT},
                                         {"controller_mutation_rate": None})])
        admin.delete_topics(["mut-a"])   # no quota left: kaflite's admin is not throttled


def test_a_client_that_ignores_its_throttle_is_counted(cluster: Cluster) -> None:
    """kaflite's 0 in ``requests_while_muted`` means something: a client that sends
    while it was told to wait shows up there."""
    cluster.create_topic("ignore-throttle")
    with _admin(cluster) as admin:
        admin.alter_client_quotas([Alter({"client-id": CLIENT}, {"producer_byte_rate": 100_000})])
    batch = encode_batch([b"x" * 50_000] * 3)    # 150 KB at 100 KB/s, over a 1 s window: 500 ms

    def produce() -> ProduceRequest:
        return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pq.TopicProduceData(
            name="ignore-throttle", partition_data=[pq.PartitionProduceData(0, batch)])])

    async def run() -> list[int]:
        wire = await Wire.open(cluster.broker(0).port)
        throttles = []
        try:
            for _ in range(2):
                resp = await wire.request(produce(), 9)
                assert resp.responses[0].partition_responses[0].error_code == 0
                throttles.append(resp.throttle_time_ms)
                await asyncio.sleep(0.1)           # far less than it was told to wait
        finally:
            wire.close()
        return throttles

    throttles = asyncio.run(run())
    assert all(t > 100 for t in throttles), throttles
    rows = [c for c in cluster.connections(include_closed=True) if c.client_id == CLIENT
            and c.quotas.get("producer_byte_rate")]
    assert rows and max(r.requests_while_muted for r in rows) >= 1
    with _admin(cluster) as admin:
        admin.alter_client_quotas([Alter({"client-id": CLIENT}, {"producer_byte_rate": None})])


def test_the_sync_consumer_waits_out_fetch_throttles(cluster: Cluster,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # No grace: a fetch sent the moment the throttled response was read would
    # arrive inside the mute, and count. (A client waiting out its throttle sends
    # after the broker's mute is over: it started waiting later than the broker.)
    monkeypatch.setattr(network, "MUTE_GRACE", 0.0)
    cluster.create_topic("sync-throttle")
    # Batches of one record: with two 1 s windows of 200 kB/s, a batch larger than a
    # window's worth (200 kB) could never be served, as in Kafka.
    with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                   "batch.size": 16384}) as p:
        for _ in range(60):
            p.produce("sync-throttle", b"y" * 10_000)
        p.flush()
    with _admin(cluster) as admin:
        admin.alter_client_quotas([Alter({"client-id": "sync-reader"},
                                         {"consumer_byte_rate": 200_000})])
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": "sync-reader",
                   "auto.offset.reset": "earliest", "max.partition.fetch.bytes": 65536}) as consumer:
        consumer.assign([("sync-throttle", 0)])
        got = 0
        deadline = time.monotonic() + 30
        while got < 60 and time.monotonic() < deadline:
            got += len(consumer.poll(500))
        events = [str(e) for e in consumer.events("throttle")]
    assert got == 60
    assert any("throttled Fetch" in e for e in events), events
    rows = [c for c in cluster.connections(include_closed=True) if c.client_id == "sync-reader"
            and c.quotas.get("consumer_byte_rate")]
    assert rows and sum(r.throttles for r in rows) > 0
    assert all(r.requests_while_muted == 0 for r in rows)
    with _admin(cluster) as admin:
        admin.alter_client_quotas([Alter({"client-id": "sync-reader"},
                                         {"consumer_byte_rate": None})])


def test_quotas_survive_a_restart(tmp_path: Path) -> None:
    with Cluster(brokers=1, data_dir=tmp_path) as cluster, _admin(cluster) as admin:
        admin.alter_client_quotas([
            Alter({"user": "alice"}, {"producer_byte_rate": 1024}),
            Alter({"user": None, "client-id": None}, {"consumer_byte_rate": 2048.0}),
            Alter({"client-id": "app"}, {"controller_mutation_rate": 0.5})])
        before = admin.describe_client_quotas()
    with Cluster(brokers=1, data_dir=tmp_path) as cluster, _admin(cluster) as admin:
        assert admin.describe_client_quotas() == before
        assert len(before) == 3
        # and they are enforced again: the restarted broker resolves them
        resolved = cluster.broker(0).quotas.resolve("producer_byte_rate", "User:alice", "x")
        assert resolved is not None and resolved.limit == 1024
