"""The brokers' request log: one record per served request, opt-in, bounded, no recursion."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client.sync import Admin
from kaflite.cluster import Cluster
from kaflite.cluster.observe import ConnectionRecord
from kaflite.cluster.request_log import (
    REQUEST_LOG_TOPIC,
    RequestBuffer,
    RequestRecord,
    build,
    pending,
)
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import FetchRequest, MetadataRequest, ProduceRequest
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import metadata_request as mq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch
from tests.cluster.request_log._reader import Reader

TOPIC = "logged"
ON = {"kaflite.request.log.enable": "true", "kaflite.request.log.flush.ms": "50"}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=2, config=ON) as c:
        c.create_topic(TOPIC, 2, 1, assignments=[[0], [1]])
        yield c


def _send(cluster: Cluster, broker: int, client_id: str, requests: list[Any]) -> list[Any]:
    port = cluster.broker(broker).port

    async def run() -> list[Any]:
        conn = await BrokerConnection("127.0.0.1", port, client_id=client_id).open()
        try:
            return [await conn.request(r) for r in requests]
        finally:
            conn.close()

    assert cluster._loop is not None
    return asyncio.run_coroutine_threadsafe(run(), cluster._loop).result(10)


def _produce(partition: int) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pq.TopicProduceData(
        name=TOPIC, partition_data=[pq.PartitionProduceData(partition, encode_batch([b"v"]))])])


def _fetch(cluster: Cluster, partition: int) -> FetchRequest:
    topic_id = cluster.controller.topics[TOPIC].topic_id
    return FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, topics=[
        fq.FetchTopic(topic=TOPIC, topic_id=topic_id, partitions=[
            fq.FetchPartition(partition=partition, fetch_offset=0,
                              partition_max_bytes=1 << 20)])])


def test_one_record_per_served_request_with_its_fields(cluster: Cluster) -> None:
    _send(cluster, 0, "logged-client", [
        MetadataRequest(topics=[mq.MetadataRequestTopic(name=TOPIC)]),
        _produce(0),
        _fetch(cluster, 0),
        _produce(1),   # broker 0 does not lead partition 1
    ])
    reader = Reader(cluster.bootstrap_servers)
    try:
        mine = [r for r in reader.wait(
            lambda rs: len([r for r in rs if r.client_id == "logged-client"]) >= 5,
            "the client's five requests") if r.client_id == "logged-client"]
    finally:
        reader.close()
    assert [r.api for r in mine] == ["ApiVersions", "Metadata", "Produce", "Fetch", "Produce"]
    assert all(r.source == "broker" and r.broker == 0 and r.listener == "PLAINTEXT"
               for r in mine)
    assert len({r.connection_id for r in mine}) == 1
    assert all(r.software_name == "kaflite" and r.principal == "User:ANONYMOUS" for r in mine)
    assert all(r.latency_ms >= 0 and r.throttle_ms == 0 for r in mine)
    versions, metadata, produce, fetch, failed = mine
    assert versions.roles == ["bootstrap"] and versions.topics == [] and not versions.errors
    assert metadata.topics == [TOPIC] and metadata.error_code == 0
    assert produce.partitions == [f"{TOPIC}-0"] and produce.roles == ["partition-leader"]
    assert produce.error_code == 0 and produce.version > 0
    assert fetch.api_key == 1 and fetch.partitions == [f"{TOPIC}-0"] and not fetch.errors
    assert failed.partitions == [f"{TOPIC}-1"]
    assert failed.error_code == 6 and failed.error == "NOT_LEADER_OR_FOLLOWER"
    assert failed.errors == {"NOT_LEADER_OR_FOLLOWER": 1}


def test_reading_the_log_does_not_log_itself(cluster: Cluster) -> None:
    """The readers' fetches of the log (they touch nothing else) leave no record."""
    reader = Reader(cluster.bootstrap_servers, client_id="self-reader")
    try:
        for _ in range(20):       # many fetches of the log, each answered with records
            reader.poll()
        _send(cluster, 1, "marker", [MetadataRequest(topics=[])])
        seen = reader.wait(lambda rs: any(r.client_id == "marker" for r in rs), "the marker")
    finally:
        reader.close()
    fetched = [r for r in seen if r.client_id == "self-reader"]
    assert fetched, "the reader's other requests (Metadata...) are logged"
    # its fetches, with records or empty (incremental, naming nothing), are not
    assert not [r for r in fetched if r.api in ("Fetch", "ListOffsets")]
    assert not [r for r in seen if r.api == "Fetch" and REQUEST_LOG_TOPIC in r.topics]


def test_a_replica_fetchers_first_requests_are_not_logged(cluster: Cluster) -> None:
    """A follower's ApiVersions and Metadata, before the Fetch that carries its replica
    id, are a replica fetcher's already (its client id says so): not logged as a
    client's. A transaction coordinator's marker channel is logged, as what it is."""
    _send(cluster, 0, "broker-1-fetcher-0", [MetadataRequest(topics=[])])
    _send(cluster, 0, "broker-1-txn-marker-sender", [MetadataRequest(topics=[])])
    _send(cluster, 0, "after-the-fetcher", [MetadataRequest(topics=[])])
    reader = Reader(cluster.bootstrap_servers)
    try:
        seen = reader.wait(lambda rs: any(r.client_id == "after-the-fetcher" for r in rs),
                           "the client after the fetcher")
    finally:
        reader.close()
    assert not [r for r in seen if r.client_id == "broker-1-fetcher-0"]
    assert not [r for r in seen if "replica-fetcher" in r.roles]
    markers = [r for r in seen if r.client_id == "broker-1-txn-marker-sender"]
    assert [r.api for r in markers] == ["ApiVersions", "Metadata"]
    assert all(r.roles == ["txn-marker-sender"] for r in markers)


def test_the_buffer_is_bounded_drops_and_counts() -> None:
    buffer = RequestBuffer(3)
    info = ConnectionRecord(1, 0, "127.0.0.1:1", client_id="c")
    records = [pending(info, 3, 12, 1.0, 0, [("t", None, 0)]) for _ in range(5)]
    assert [buffer.add(r) for r in records] == [True, True, True, False, False]
    assert len(buffer) == 3 and buffer.dropped == 2 and buffer.added == 3
    taken = buffer.drain(2)
    assert taken == records[:2] and len(buffer) == 1
    buffer.put_back([*taken, records[3]])    # room for two of the three
    assert len(buffer) == 3 and buffer.dropped == 3
    assert buffer.drain() == [records[0], records[1], records[2]]


def test_a_broker_buffer_drops_when_full() -> None:
    with Cluster(brokers=1, config={**ON, "kaflite.request.log.buffer.records": "2",
                                    "kaflite.request.log.flush.ms": "3600000"}) as c:
        c.create_topic(TOPIC, 1, 1)
        _send(c, 0, "flood", [MetadataRequest(topics=[]) for _ in range(5)])
        log = c.broker(0).request_log
        assert log is not None
        stats = log.buffer.stats()
        assert stats["buffered"] == 2 and stats["dropped"] >= 4   # ApiVersions + 5 Metadata


def test_the_log_is_written_where_the_cluster_asks_for_two_in_sync_replicas() -> None:
    # The soak's clusters set min.insync.replicas=2; the request log (one replica by
    # default) refused every write with NOT_ENOUGH_REPLICAS and stayed empty.
    with Cluster(brokers=2, config={**ON, "min.insync.replicas": "2"}) as c:
        _send(c, 0, "two-isr", [MetadataRequest(topics=[])])
        reader = Reader(c.bootstrap_servers)
        try:
            reader.wait(lambda seen: any(r.client_id == "two-isr" for r in seen),
                        "the request in the log", timeout=10)
        finally:
            reader.consumer.close()
        assert c.controller.topics[REQUEST_LOG_TOPIC].configs["min.insync.replicas"] == "1"


def test_a_record_round_trips() -> None:
    info = ConnectionRecord(7, 2, "10.0.0.1:5", client_id=None, software_name="librdkafka",
                            software_version="2.5", listener="SSL")
    record = build(pending(info, 0, 11, 3.25, 40, [(None, None, 0), ("a", None, 0),
                                                   ("a", 1, 6), ("a", 2, 0)]))
    key, value = record.encode()
    assert key == b"connection-7"
    back = RequestRecord.decode(value)
    assert back == record
    assert back.partitions == ["a-1", "a-2"] and back.topics == ["a"]
    assert back.error_code == 6 and back.throttle_ms == 40 and back.listener == "SSL"
    assert RequestRecord.decode(value.replace(b"{", b'{"future_field":1,', 1)) == record


def test_off_by_default_no_topic() -> None:
    with Cluster(brokers=1) as c:
        assert c.broker(0).request_log is None
        with Admin({"bootstrap.servers": c.bootstrap_servers}) as admin:
            admin.list_topics(internal=True)
            assert REQUEST_LOG_TOPIC not in admin.list_topics(internal=True)
        assert REQUEST_LOG_TOPIC not in c.controller.topics
