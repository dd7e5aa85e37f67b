"""The same recovery-table errors against kafka-python (a Java-client lookalike)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kaflite.cluster import Cluster
from tests.cluster.faults.conftest import errors, requests
from tests.conftest import wait_for

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.errors import TopicAuthorizationFailedError  # noqa: E402


def make_producer(cluster: Cluster, client_id: str, **extra: Any) -> Any:
    return KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, client_id=client_id,
                         retries=5, retry_backoff_ms=50, linger_ms=0, **extra)


def read_all(cluster: Cluster, topic: str, client_id: str, start: int | None = None,
             reset: str = "earliest", want: int = 1) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, client_id=client_id,
                             auto_offset_reset=reset, enable_auto_commit=False,
                             fetch_max_wait_ms=100)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    if start is not None:
        consumer.seek(tp, start)
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 15
    while len(out) < want and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            out.extend((r.offset, r.value) for r in records)
    consumer.close()
    return out


def test_not_leader_on_produce(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    cluster.create_topic("kp-nl", 1, 3)
    p = make_producer(cluster, "kp-nl-producer")
    p.send("kp-nl", b"warm", partition=0).get(15)
    metadata_before = requests(cluster, "kp-nl-producer", "Metadata")
    cluster.faults.inject_error("Produce", "NOT_LEADER_OR_FOLLOWER", 1, topic="kp-nl")
    meta = p.send("kp-nl", b"moved", partition=0).get(15)
    assert meta.offset == 1
    assert errors(cluster, "kp-nl-producer", "Produce") == {"NOT_LEADER_OR_FOLLOWER": 1}
    wait_for(lambda: requests(cluster, "kp-nl-producer", "Metadata") > metadata_before,
             what="a Metadata refresh")
    p.close()
    assert read_all(cluster, "kp-nl", "kp-nl-reader", want=2) == [(0, b"warm"), (1, b"moved")]


def test_offset_out_of_range_resets(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    cluster.create_topic("kp-oor", 1, 3)
    p = make_producer(cluster, "kp-oor-producer")
    for i in range(8):
        p.send("kp-oor", f"r{i}".encode(), partition=0)
    p.flush(15)
    p.close()
    cluster.faults.delete_records("kp-oor", 0, 5)
    got = read_all(cluster, "kp-oor", "kp-oor-reader", start=1, reset="earliest", want=3)
    assert [o for o, _ in got] == [5, 6, 7]
    assert errors(cluster, "kp-oor-reader", "Fetch") == {"OFFSET_OUT_OF_RANGE": 1}


def test_topic_authorization_failed_is_raised(chaos_cluster: Cluster) -> None:
    cluster = chaos_cluster
    cluster.create_topic("kp-denied", 1, 3)
    p = make_producer(cluster, "kp-acl-producer", max_block_ms=5000)
    p.send("kp-denied", b"ok", partition=0).get(15)
    cluster.faults.deny_topic("kp-denied")
    with pytest.raises(TopicAuthorizationFailedError):
        p.send("kp-denied", b"denied", partition=0).get(15)
    p.close(timeout=5)


def _group_member(cluster: Cluster, topic: str, group: str, client_id: str) -> Any:
    if topic not in cluster.controller.topics:
        cluster.create_topic(topic, 2, 3)
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                             client_id=client_id, auto_offset_reset="earliest",
                             heartbeat_interval_ms=200, session_timeout_ms=6000,
                             fetch_max_wait_ms=100, retry_backoff_ms=50)
    # Subscribe, then fetch metadata, so the member knows the topic's partitions before
    # it first joins. Otherwise the group leader sees them only after that join and
    # joins again to reassign. If that second join is still pending when poll() gives
    # up, kafka-python 3.0.12 never turns its heartbeat back on: the member keeps its
    # partitions, sends no heartbeat, and the session expires. The first polls reproduce
    # this on a loaded machine.
    consumer.subscribe([topic])
    assert topic in consumer.topics()
    return consumer


def _poll_until(consumer: Any, cond: Any, what: str, timeout: float = 15.0) -> None:
    wait_for(lambda: (consumer.poll(timeout_ms=50), cond())[1], what, timeout)


@pytest.mark.parametrize(("error", "api", "recovery"), [
    ("NOT_COORDINATOR", "FindCoordinator", "re-discovers the coordinator"),
    ("ILLEGAL_GENERATION", "JoinGroup", "re-joins the group"),
])
def test_group_errors(chaos_cluster: Cluster, error: str, api: str, recovery: str) -> None:
    cluster = chaos_cluster
    client_id = f"kp-group-{error.lower()}"
    group = f"kp-group-{error.lower()}"
    consumer = _group_member(cluster, "kp-group", group, client_id)
    try:
        _poll_until(consumer, lambda: bool(consumer.assignment())
                    and requests(cluster, client_id, "Heartbeat") >= 2, "a stable member",
                    # joining is not what is tested
                    timeout=60)
        before = requests(cluster, client_id, api)
        cluster.faults.inject_error("Heartbeat", error, 1, group=group)
        _poll_until(consumer, lambda: requests(cluster, client_id, api) > before, recovery)
        assert errors(cluster, client_id, "Heartbeat") == {error: 1}
        beats = requests(cluster, client_id, "Heartbeat")
        _poll_until(consumer, lambda: bool(consumer.assignment())
                    and requests(cluster, client_id, "Heartbeat") > beats + 2,
                    "heartbeats in the group again")
    finally:
        consumer.close()
