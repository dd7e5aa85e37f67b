"""The connection registry: stats, error codes at every level, roles, cadences, idle close."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.observe import ApiStats, ConnectionRecord, summarize
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import MetadataRequest, ProduceRequest
from kaflite.protocol.messages import metadata_request as mq
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch
from tests.conftest import wait_for

TOPIC = "registry"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3) as c:
        c.create_topic(TOPIC, 3, 2, assignments=[[0, 1], [1, 2], [2, 0]])
        yield c


def _session(cluster: Cluster, broker: int, client_id: str,
             requests: list[Any]) -> list[Any]:
    """Open a kaflite client connection to ``broker``, send ``requests``, keep it open."""
    port = cluster.broker(broker).port

    async def run() -> list[Any]:
        conn = await BrokerConnection("127.0.0.1", port, client_id=client_id).open()
        out = [await conn.request(r) for r in requests]
        _OPEN.append(conn)
        return out

    return asyncio.run_coroutine_threadsafe(run(), _loop(cluster)).result(10)


_OPEN: list[BrokerConnection] = []


def _loop(cluster: Cluster) -> asyncio.AbstractEventLoop:
    assert cluster._loop is not None
    return cluster._loop


def _produce(topic: str, partition: int) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[pq.TopicProduceData(
        name=topic, partition_data=[pq.PartitionProduceData(partition, encode_batch([b"v"]))])])


def test_bootstrap_role_and_client_software(cluster: Cluster) -> None:
    _session(cluster, 0, "boot-only", [MetadataRequest(topics=None)])
    [conn] = cluster.connections(client_id="boot-only")
    assert conn.roles == ["bootstrap"]
    assert conn.broker == 0
    assert set(conn.apis) == {"ApiVersions", "Metadata"}
    assert conn.software_name == "kaflite" and conn.software_version == "0.1.0"
    assert conn.principal == "User:ANONYMOUS"
    assert conn.bytes_in > 0 and conn.bytes_out > 0
    assert conn.opened_at <= conn.last_activity <= time.time()
    stats = conn.apis["Metadata"]
    assert stats.count == 1 and 0 <= stats.mean_ms <= stats.max_ms


def test_partition_errors_and_topic_errors_are_counted(cluster: Cluster) -> None:
    # Broker 0 leads partition 0 only: partition 1 answers NOT_LEADER_OR_FOLLOWER
    # inside the Produce response, and an unknown topic is a topic-level error.
    responses = _session(cluster, 0, "nested-errors", [
        _produce(TOPIC, 0), _produce(TOPIC, 1),
        MetadataRequest(topics=[mq.MetadataRequestTopic(name="no-such-topic")],
                        allow_auto_topic_creation=False),
    ])
    assert responses[1].responses[0].partition_responses[0].error_code == 6
    [conn] = cluster.connections(client_id="nested-errors")
    assert conn.apis["Produce"].count == 2
    assert conn.apis["Produce"].errors == {"NOT_LEADER_OR_FOLLOWER": 1}
    assert conn.apis["Metadata"].errors == {"UNKNOWN_TOPIC_OR_PARTITION": 1}
    assert conn.roles == ["partition-leader"]
    assert conn.partitions == [f"{TOPIC}-0"]  # not the partition it was refused


def test_replica_fetchers_are_listed_only_on_request(cluster: Cluster) -> None:
    def replicas() -> list[Any]:
        return [c for c in cluster.connections(include_replicas=True)
                if "replica-fetcher" in c.roles]

    wait_for(lambda: len(replicas()) >= 3, "three replica fetcher connections")
    # Kafka's convention (ReplicaFetcherManager): broker-<id>-fetcher-<fetcher id>
    assert all(c.client_id == f"broker-{c.replica_id}-fetcher-0" for c in replicas())
    assert not [c for c in cluster.connections() if "replica-fetcher" in c.roles]


@pytest.mark.parametrize("client_id", ["broker-7-fetcher-0", "broker-7-fetcher-3",
                                       "replica-fetcher-7"])
def test_a_replica_fetcher_is_one_from_its_first_request(cluster: Cluster,
                                                         client_id: str) -> None:
    # A follower's ApiVersions and Metadata come before its first Fetch (the one that
    # carries the replica id): its client id, Kafka's or kaflite's older one, tells.
    _session(cluster, 1, client_id, [MetadataRequest(topics=None)])
    [conn] = cluster.connections(client_id=client_id, include_replicas=True)
    assert conn.roles == ["replica-fetcher"]
    assert not cluster.connections(client_id=client_id)
    assert client_id not in {c.client_id for c in cluster.clients()}
    conn_ = _OPEN.pop()
    conn_.close()
    wait_for(lambda: not cluster.connections(client_id=client_id, include_replicas=True),
             "the connection closed")
    # ... and once closed, kept in the history as what it was
    [closed] = cluster.connections(client_id=client_id, include_replicas=True,
                                   include_closed=True)
    assert closed.roles == ["replica-fetcher"] and closed.closed_at is not None
    assert client_id not in {c.client_id for c in cluster.clients(include_closed=True)}


def test_other_broker_channels_are_named_from_their_first_request(cluster: Cluster) -> None:
    _session(cluster, 2, "broker-5-txn-marker-sender", [MetadataRequest(topics=None)])
    _session(cluster, 2, "Persister-client-5", [MetadataRequest(topics=None)])
    roles = {c.client_id: c.roles for c in cluster.connections(include_replicas=True)}
    assert roles["broker-5-txn-marker-sender"] == ["txn-marker-sender"]
    assert roles["Persister-client-5"] == ["inter-broker"]
    # brokers are not clients
    assert not {"broker-5-txn-marker-sender", "Persister-client-5"} & {
        c.client_id for c in cluster.clients()}
    assert not {"broker-5-txn-marker-sender", "Persister-client-5"} & {
        c.client_id for c in cluster.connections()}


def test_leadership_move_moves_the_partition_role(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
                         "client.id": "mover", "fetch.wait.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000})
    try:
        consumer.assign([TopicPartition(TOPIC, 2, 0)])

        def leader_conn_of(broker: int) -> bool:
            consumer.poll(0.05)
            return any(f"{TOPIC}-2" in c.partitions and c.broker == broker
                       for c in cluster.connections(client_id="mover"))

        wait_for(lambda: leader_conn_of(2), "a Fetch connection to the leader, broker 2")
        assert cluster.faults.move_leader(TOPIC, 2, to=0) == 0
        wait_for(lambda: leader_conn_of(0), "a Fetch connection to the new leader, broker 0")
        # The old leader's connection lost the role when it answered NOT_LEADER_OR_FOLLOWER.
        old = [c for c in cluster.connections(client_id="mover") if c.broker == 2]
        assert all(f"{TOPIC}-2" not in c.partitions for c in old)

        def fetching() -> bool:
            # a rate needs two Fetch requests on the client's open connections: the
            # new leader may have answered only one so far
            consumer.poll(0.05)
            clients[:] = [c for c in cluster.clients() if c.client_id == "mover"]
            return len(clients) == 1 and clients[0].fetch_rate is not None

        clients: list[Any] = []
        wait_for(fetching, "a fetch rate on the consumer's connections")
        assert clients[0].fetch_rate > 1  # long polls of 100 ms, continuous
        assert clients[0].fan_out.get(0, 0) >= 1
    finally:
        consumer.close()
        cluster.faults.move_leader(TOPIC, 2, to=2)


def test_idle_connections_close() -> None:
    with Cluster(brokers=1, config={"connections.max.idle.ms": 400}) as c:
        _session(c, 0, "idler", [MetadataRequest(topics=None)])
        assert len(c.connections(client_id="idler")) == 1
        wait_for(lambda: not c.connections(client_id="idler"), "the idle connection to close")
        conn = _OPEN.pop()
        wait_for(lambda: not conn.connected, "the client to see the close")


def _info(client: str, broker: int, peer_port: int, stamps: dict[int, list[float]]
          ) -> ConnectionRecord:
    info = ConnectionRecord(peer_port, broker, f"10.0.0.1:{peer_port}", client_id=client)
    for key, times in stamps.items():
        stats = info.apis[key] = ApiStats(count=len(times))
        stats.recent.extend(times)
    return info


def test_cadences_are_measured_across_a_clients_connections() -> None:
    now = 1000.0
    heartbeats = [now - 30 + 3 * i for i in range(10)]          # every 3 s
    commits = [now - 25 + 5 * i for i in range(5)]              # every 5 s
    fetches_a = [now - 10 + 0.5 * i for i in range(20)]         # 2/s to broker 0
    fetches_b = [now - 10 + 0.5 * i + 0.25 for i in range(20)]  # 2/s to broker 1
    infos = [
        _info("app", 0, 1, {1: fetches_a}),
        _info("app", 1, 2, {1: fetches_b}),
        _info("app", 2, 3, {12: heartbeats[:5], 8: commits}),
        _info("app", 2, 4, {12: heartbeats[5:]}),              # a reconnect: same cadence
        _info("other", 0, 5, {18: [now]}),
    ]
    infos[0].partitions.add(("t", 0))
    infos[1].partitions.add(("t", 1))
    infos[2].groups.add("g")
    infos[3].groups.add("g")
    infos[0].throttled(100)
    infos[3].throttled(250)
    [app, other] = summarize(infos, now=now)
    assert (app.throttles, app.throttled_ms_total) == (2, 350)
    assert (other.throttles, other.throttled_ms_total) == (0, 0)
    assert app.client_id == "app" and app.host == "10.0.0.1"
    assert app.connections == 4 and app.fan_out == {0: 1, 1: 1, 2: 2}
    assert app.roles == {"group-coordinator": 2, "partition-leader": 2}
    assert app.groups == ["g"] and app.partitions == ["t-0", "t-1"]
    assert app.heartbeat_interval_ms == pytest.approx(3000)
    assert app.commit_interval_ms == pytest.approx(5000)
    assert app.fetch_rate == pytest.approx(4.0, rel=0.1)
    assert other.heartbeat_interval_ms is None and other.fetch_rate is None


def test_live_cadences_of_a_group_consumer(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer

    # librdkafka commits only offsets that moved: keep records coming.
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                         "group.id": "cadence-group", "client.id": "cadence",
                         # librdkafka's group timer ticks every 500 ms: ask for a multiple.
                         "heartbeat.interval.ms": 500, "session.timeout.ms": 6000,
                         "enable.auto.commit": True, "auto.commit.interval.ms": 500,
                         "fetch.wait.max.ms": 100})
    consumer.subscribe([TOPIC])

    def summary() -> Any:
        producer.produce(TOPIC, b"tick", partition=0)
        producer.poll(0)
        consumer.poll(0.05)
        return next((c for c in cluster.clients() if c.client_id == "cadence"), None)

    try:
        wait_for(lambda: (s := summary()) is not None and s.groups == ["cadence-group"]
                 and s.requests.get("Heartbeat", 0) >= 8
                 and s.requests.get("OffsetCommit", 0) >= 5,
                 "8 heartbeats and 5 commits of the cadence group")
        s = summary()
        assert s is not None
        # Measured from live traffic (the arithmetic is checked above on fixed times;
        # the live values depend on the machine's speed, so no bounds here).
        assert s.heartbeat_interval_ms is not None and s.heartbeat_interval_ms > 0
        assert s.commit_interval_ms is not None and s.commit_interval_ms > 0
        assert s.fetch_rate is not None and s.fetch_rate > 0
        assert s.roles.get("group-coordinator") == 1
        assert s.fan_out and sum(s.fan_out.values()) == s.connections
    finally:
        consumer.close()
        producer.flush(5)


def test_offset_fetch_is_a_read_not_a_coordinator_role() -> None:
    """An admin reading a group's offsets (a console's lag, kafka-consumer-groups
    --describe) is not a member's coordinator connection; a member's commit is, and a
    NOT_COORDINATOR answer to either read drops the group."""
    from kaflite.cluster.observe import record_request
    from kaflite.protocol import errors
    from kaflite.protocol.messages import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
    )
    from kaflite.protocol.messages import offset_fetch_request as ofq
    from kaflite.protocol.messages import offset_fetch_response as ofr

    def fetch(code: int) -> tuple[OffsetFetchRequest, OffsetFetchResponse]:
        return (OffsetFetchRequest(groups=[ofq.OffsetFetchRequestGroup(group_id="g")]),
                OffsetFetchResponse(groups=[ofr.OffsetFetchResponseGroup("g", error_code=code)]))

    info = ConnectionRecord(1, 0, "10.0.0.1:1", client_id="admin")
    record_request(info, 9, 8, *fetch(0), 1.0)
    assert info.groups == set() and "group-coordinator" not in info.roles
    record_request(info, 8, 8, OffsetCommitRequest(group_id="g"), OffsetCommitResponse(), 1.0)
    assert info.groups == {"g"} and "group-coordinator" in info.roles
    record_request(info, 9, 8, *fetch(errors.NotCoordinatorError.code), 1.0)
    assert info.groups == set() and "group-coordinator" not in info.roles


def test_an_admin_clients_connection_has_the_admin_role() -> None:
    """Issue 40: the console's own connections (ListGroups to every broker) showed as
    "other"; an admin request with no other role makes the connection an admin's, and
    an idempotent producer's InitProducerId stays "other"."""
    from kaflite.cluster.observe import record_request
    from kaflite.protocol.messages import (
        InitProducerIdRequest,
        InitProducerIdResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )

    console = ConnectionRecord(1, 0, "10.0.0.1:1", client_id="kaflite-console")
    record_request(console, 18, 3, *_api_versions(), 1.0)
    assert console.roles == ["bootstrap"]
    record_request(console, 16, 5, ListGroupsRequest(), ListGroupsResponse(), 1.0)
    assert console.roles == ["admin"]
    producer = ConnectionRecord(2, 0, "10.0.0.1:2", client_id="producer")
    record_request(producer, 22, 5, InitProducerIdRequest(), InitProducerIdResponse(), 1.0)
    assert producer.roles == ["other"]


def _api_versions() -> tuple[Any, Any]:
    from kaflite.protocol.messages import ApiVersionsRequest, ApiVersionsResponse

    return ApiVersionsRequest(), ApiVersionsResponse()
