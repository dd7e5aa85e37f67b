"""Recovery-table errors on the data path, injected against real clients.

| error                      | what the client must do                            |
|----------------------------|----------------------------------------------------|
| NOT_LEADER_OR_FOLLOWER     | refresh Metadata, send to the leader: delivered    |
| LEADER_NOT_AVAILABLE       | back off and retry: delivered                      |
| OFFSET_OUT_OF_RANGE        | apply auto.offset.reset (or surface it: "error")   |
| TOPIC_AUTHORIZATION_FAILED | surface it to the application, no auto-recovery    |

plus the mechanical faults: delayed responses, dropped connections, throttling.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from kaflite.cluster import Cluster
from tests.cluster.faults.conftest import errors, requests
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")


def make_topic(cluster: Cluster, name: str, partitions: int = 3) -> str:
    cluster.create_topic(name, partitions, 3)
    return name


def producer(cluster: Cluster, client_id: str, **extra: Any) -> Any:
    return ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "client.id": client_id,
                        "linger.ms": 0, "retry.backoff.ms": 50, **extra})


def deliver(p: Any, topic: str, value: bytes, partition: int, timeout: float = 20
            ) -> tuple[Any, Any]:
    result: list[tuple[Any, Any]] = []
    p.produce(topic, value, partition=partition,
              on_delivery=lambda err, msg: result.append((err, msg)))
    p.flush(timeout)
    assert result, "no delivery report"
    return result[0]


def read_partition(cluster: Cluster, topic: str, partition: int, count: int) -> list[bytes]:
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reader",
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, partition, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + 15
    while len(out) < count and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is not None and msg.error() is None:
            out.append(msg.value())
    # one more short poll: nothing beyond ``count`` (no duplicate)
    extra = c.poll(0.5)
    if extra is not None and extra.error() is None:
        out.append(extra.value())
    c.close()
    return out


def test_not_leader_on_produce_refreshes_metadata_and_delivers_once(
        chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "nl-produce")
    p = producer(cluster, "nl-producer")
    err, _ = deliver(p, topic, b"warm-up", 1)
    assert err is None
    metadata_before = requests(cluster, "nl-producer", "Metadata")
    rule = cluster.faults.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", 1,
                                       topic=topic, partition=0)
    err, msg = deliver(p, topic, b"moved", 0)
    assert err is None and msg.partition() == 0
    assert rule.hits == 1 and cluster.faults.rules() == []
    assert errors(cluster, "nl-producer", "Produce") == {"NOT_LEADER_OR_FOLLOWER": 1}
    wait_for(lambda: requests(cluster, "nl-producer", "Metadata") > metadata_before,
             what="a Metadata refresh after NOT_LEADER_OR_FOLLOWER")
    assert read_partition(cluster, topic, 0, 1) == [b"moved"]  # delivered exactly once


def test_real_leader_move_under_a_producer(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "nl-move", 1)
    p = producer(cluster, "move-producer")
    assert deliver(p, topic, b"a", 0)[0] is None
    old = cluster.controller.topics[topic].partitions[0].leader
    new = cluster.faults.move_leader(topic, 0)
    assert new != old
    assert deliver(p, topic, b"b", 0)[0] is None
    assert read_partition(cluster, topic, 0, 2) == [b"a", b"b"]
    assert any(f"{topic}-0" in c.partitions and c.broker == new
               for c in cluster.connections(client_id="move-producer"))


def test_leader_not_available_backs_off_and_succeeds(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "lna-produce")
    p = producer(cluster, "lna-producer")
    assert deliver(p, topic, b"warm-up", 0)[0] is None
    cluster.faults.inject_error("Produce", "LEADER_NOT_AVAILABLE", 3, topic=topic)
    started = time.monotonic()
    err, _ = deliver(p, topic, b"after-election", 0)
    assert err is None
    assert errors(cluster, "lna-producer", "Produce") == {"LEADER_NOT_AVAILABLE": 3}
    assert time.monotonic() - started >= 0.1  # three retries, each after a back-off
    assert read_partition(cluster, topic, 0, 2) == [b"warm-up", b"after-election"]


def test_leader_not_available_in_metadata_for_a_consumer(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "lna-metadata", 1)
    p = producer(cluster, "lna-md-producer")
    assert deliver(p, topic, b"x", 0)[0] is None
    cluster.faults.inject_error("Metadata", "LEADER_NOT_AVAILABLE", 2, topic=topic, partition=0)
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "lna-md",
                     "client.id": "lna-md-consumer", "enable.auto.commit": False,
                     "topic.metadata.refresh.fast.interval.ms": 50})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"x"]
        assert errors(cluster, "lna-md-consumer", "Metadata") == {"LEADER_NOT_AVAILABLE": 2}
    finally:
        c.close()


def _consume_from(cluster: Cluster, topic: str, client_id: str, reset: str, start: int,
                  want: int) -> tuple[list[int], list[Any]]:
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": client_id,
                     "client.id": client_id, "enable.auto.commit": False,
                     "auto.offset.reset": reset})
    offsets: list[int] = []
    errs: list[Any] = []
    try:
        c.assign([ck.TopicPartition(topic, 0, start)])
        deadline = time.monotonic() + 15
        while len(offsets) < want and not errs and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error() is not None:
                errs.append(msg.error())
            else:
                offsets.append(msg.offset())
    finally:
        c.close()
    return offsets, errs


def test_offset_out_of_range_applies_auto_offset_reset(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "oor", 1)
    p = producer(cluster, "oor-producer")
    for i in range(10):
        p.produce(topic, f"r{i}".encode(), partition=0)
    assert p.flush(10) == 0
    # DeleteRecords moves the log start past where the consumer will start.
    assert cluster.faults.delete_records(topic, 0, 6) == 6
    offsets, errs = _consume_from(cluster, topic, "oor-earliest", "earliest", 2, 4)
    assert errs == [] and offsets == [6, 7, 8, 9]
    assert errors(cluster, "oor-earliest", "Fetch") == {"OFFSET_OUT_OF_RANGE": 1}
    # With auto.offset.reset=error the application sees it.
    offsets, errs = _consume_from(cluster, topic, "oor-error", "error", 2, 1)
    assert offsets == [] and errs
    assert errs[0].code() == ck.KafkaError._AUTO_OFFSET_RESET


def test_topic_authorization_failed_reaches_the_application(chaos_cluster: Cluster) -> None:
    from confluent_kafka.admin import AdminClient

    cluster = chaos_cluster
    topic = make_topic(cluster, "denied", 1)
    p = producer(cluster, "acl-producer", **{"message.timeout.ms": 5000})
    assert deliver(p, topic, b"allowed", 0)[0] is None
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "acl",
                     "client.id": "acl-consumer", "enable.auto.commit": False,
                     "fetch.wait.max.ms": 100})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        first = None
        deadline = time.monotonic() + 15
        while first is None and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                first = msg.value()
        assert first == b"allowed"
        rule = cluster.faults.deny_topic(topic)
        # The producer's Produce gets it per partition: the delivery fails with it.
        err, _ = deliver(p, topic, b"denied", 0)
        assert err is not None and err.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert errors(cluster, "acl-producer", "Produce") == {"TOPIC_AUTHORIZATION_FAILED": 1}
        # The consumer's Fetch gets it per partition, surfaced from poll().
        seen = None
        deadline = time.monotonic() + 15
        while seen is None and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None:
                assert msg.error() is not None, "a record leaked through the ACL"
                seen = msg.error()
        assert seen is not None and seen.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert "TOPIC_AUTHORIZATION_FAILED" in errors(cluster, "acl-consumer", "Fetch")
    finally:
        c.close()
    # An explicit Metadata request reports it as the topic's error.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    md = admin.list_topics(topic, timeout=10)
    assert md.topics[topic].error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert rule in cluster.faults.rules()  # no auto-recovery: the denial stays
    # The client keeps the error until its metadata changes; once the rule is
    # removed, a new producer is allowed again.
    cluster.faults.remove(rule.id)
    assert deliver(producer(cluster, "acl-producer-2"), topic, b"again", 0)[0] is None


def test_delayed_responses(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "delayed", 1)
    p = producer(cluster, "slow-producer")
    assert deliver(p, topic, b"warm", 0)[0] is None
    cluster.faults.delay("Produce", 400, count=1, client_id="slow-producer")
    started = time.monotonic()
    assert deliver(p, topic, b"slow", 0)[0] is None
    assert time.monotonic() - started >= 0.4
    [conn] = [c for c in cluster.connections(client_id="slow-producer") if "Produce" in c.apis]
    assert conn.apis["Produce"].max_ms >= 400


def test_dropped_connection_is_reopened_and_the_record_delivered(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "dropped", 1)
    p = producer(cluster, "drop-producer")
    assert deliver(p, topic, b"warm", 0)[0] is None
    leader = cluster.controller.topics[topic].partitions[0].leader
    before = {c.connection_id for c in cluster.connections(client_id="drop-producer",
                                                            broker=leader)}
    cluster.faults.drop_requests("Produce", 1, client_id="drop-producer")
    assert deliver(p, topic, b"after-drop", 0)[0] is None
    after = {c.connection_id for c in cluster.connections(client_id="drop-producer",
                                                           broker=leader)}
    assert after - before, "the client did not open a new connection"
    assert read_partition(cluster, topic, 0, 2) == [b"warm", b"after-drop"]
    # Closing every connection of a client at once: it reconnects too.
    assert cluster.faults.drop_connections(client_id="drop-producer") >= 1
    assert deliver(p, topic, b"again", 0)[0] is None


def test_throttle_is_reported_to_the_client(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    topic = make_topic(cluster, "throttled", 1)
    events: list[Any] = []
    p = producer(cluster, "throttled-producer", throttle_cb=events.append)
    assert deliver(p, topic, b"warm", 0)[0] is None
    cluster.faults.throttle(300, "Produce", count=1, client_id="throttled-producer")
    assert deliver(p, topic, b"throttled", 0)[0] is None
    wait_for(lambda: (p.poll(0.05), bool(events))[1], what="a throttle event")
    assert events[0].throttle_time == pytest.approx(0.3)
