"""Recovery-table errors of the group protocol, against real consumers.

| error                        | what the consumer must do                         |
|------------------------------|---------------------------------------------------|
| NOT_COORDINATOR              | re-run FindCoordinator, carry on                  |
| COORDINATOR_LOAD_IN_PROGRESS | back off and retry; do not re-discover            |
| ILLEGAL_GENERATION           | re-join the group                                 |
| UNKNOWN_MEMBER_ID            | re-join the group (as a new member)               |
| FENCED_INSTANCE_ID           | an application error: no automatic recovery       |

"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from tests.cluster.faults.conftest import errors, requests
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")

TOPIC = "group-faults"
_ids = itertools.count()


@pytest.fixture(scope="module")
def cluster(chaos_cluster: Cluster) -> Cluster:
    if TOPIC not in chaos_cluster.controller.topics:
        chaos_cluster.create_topic(TOPIC, 3, 3)
    return chaos_cluster


class Member:
    """A subscribed confluent-kafka consumer, polled from the test thread."""

    def __init__(self, cluster: Cluster, group: str, client_id: str, **extra: Any) -> None:
        self.cluster, self.group, self.client_id = cluster, group, client_id
        self.errors: list[Any] = []
        self.values: list[bytes] = []
        self.assigned: list[Any] = []
        self.consumer = ck.Consumer({
            "bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "client.id": client_id, "auto.offset.reset": "earliest",
            "heartbeat.interval.ms": 200, "session.timeout.ms": 6000,
            "fetch.wait.max.ms": 100, "enable.auto.commit": True,
            "auto.commit.interval.ms": 300, **extra})
        self.consumer.subscribe([TOPIC], on_assign=lambda c, ps: self.assigned.extend(ps))

    def poll_until(self, cond: Callable[[], bool], timeout: float = 20, what: str = "") -> None:
        def step() -> bool:
            msg = self.consumer.poll(0.05)
            if msg is not None:
                if msg.error() is not None:
                    self.errors.append(msg.error())
                else:
                    self.values.append(msg.value())
            return cond()

        wait_for(step, what or "the condition", timeout)

    def count(self, api: str) -> int:
        return requests(self.cluster, self.client_id, api)

    def coordinator(self) -> list[int]:
        return [c.broker for c in self.cluster.connections(client_id=self.client_id)
                if self.group in c.groups]

    def close(self) -> None:
        self.consumer.close()


def produce(cluster: Cluster, value: bytes) -> None:
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    p.produce(TOPIC, value, partition=0)
    assert p.flush(10) == 0


@pytest.fixture
def member(cluster: Cluster) -> Iterator[Member]:
    n = next(_ids)
    m = Member(cluster, f"faults-group-{n}", f"group-member-{n}")
    produce(cluster, b"before")
    m.poll_until(lambda: b"before" in m.values and bool(m.coordinator())
                 and m.count("Heartbeat") >= 2, timeout=60, what="a stable member")
    yield m
    m.close()


def keeps_consuming(m: Member, cluster: Cluster, tag: bytes) -> None:
    produce(cluster, tag)
    m.poll_until(lambda: tag in m.values, what=f"record {tag!r} after the fault")


def test_not_coordinator_rediscovers(cluster: Cluster, member: Member) -> None:
    finds = member.count("FindCoordinator")
    cluster.faults.inject_error("Heartbeat", "NOT_COORDINATOR", 1, group=member.group)
    member.poll_until(lambda: member.count("FindCoordinator") > finds,
                      what="FindCoordinator after NOT_COORDINATOR")
    assert errors(cluster, member.client_id, "Heartbeat") == {"NOT_COORDINATOR": 1}
    beats = member.count("Heartbeat")
    member.poll_until(lambda: member.count("Heartbeat") > beats + 2, what="heartbeats again")
    keeps_consuming(member, cluster, b"after-not-coordinator")
    assert member.errors == []


def test_coordinator_move_is_followed(cluster: Cluster, member: Member) -> None:
    _, _, old = cluster.faults.coordinator_of(member.group)
    assert member.coordinator() == [old]
    new = cluster.faults.move_coordinator(member.group)
    assert new != old
    member.poll_until(lambda: member.coordinator() == [new], timeout=30,
                      what="the group-coordinator role on the new coordinator")
    keeps_consuming(member, cluster, b"after-move")
    assert member.errors == []


def test_coordinator_load_in_progress_retries_without_rediscovery(
        cluster: Cluster, member: Member) -> None:
    finds = member.count("FindCoordinator")
    rule = cluster.faults.inject_error("Heartbeat", "COORDINATOR_LOAD_IN_PROGRESS", 2,
                                       group=member.group)
    member.poll_until(lambda: rule.remaining == 0, what="two loading answers")
    beats = member.count("Heartbeat")
    member.poll_until(lambda: member.count("Heartbeat") > beats + 2, what="heartbeats again")
    assert errors(cluster, member.client_id, "Heartbeat") == {"COORDINATOR_LOAD_IN_PROGRESS": 2}
    assert member.count("FindCoordinator") == finds  # no re-discovery
    keeps_consuming(member, cluster, b"after-loading")


def test_illegal_generation_rejoins(cluster: Cluster, member: Member) -> None:
    joins = member.count("JoinGroup")
    cluster.faults.inject_error("Heartbeat", "ILLEGAL_GENERATION", 1, group=member.group)
    member.poll_until(lambda: member.count("JoinGroup") > joins, what="a JoinGroup")
    assert errors(cluster, member.client_id, "Heartbeat") == {"ILLEGAL_GENERATION": 1}
    keeps_consuming(member, cluster, b"after-illegal-generation")
    assert member.errors == []


def test_forgotten_member_gets_unknown_member_id_and_rejoins(cluster: Cluster,
                                                            member: Member) -> None:
    old_id = member.consumer.memberid()
    assert old_id
    assert cluster.faults.forget_member(member.group, old_id)
    member.poll_until(lambda: "UNKNOWN_MEMBER_ID" in errors(cluster, member.client_id,
                                                            "Heartbeat")
                      or "UNKNOWN_MEMBER_ID" in errors(cluster, member.client_id,
                                                       "OffsetCommit"),
                      what="UNKNOWN_MEMBER_ID from the coordinator")
    member.poll_until(lambda: member.consumer.memberid() not in ("", old_id),
                      what="a new member id")
    keeps_consuming(member, cluster, b"after-forget")


def is_fatal_fencing(error: Any) -> bool:
    """librdkafka raises FENCED_INSTANCE_ID as a fatal error (_FATAL), for the app to handle."""
    return error.code() == ck.KafkaError._FATAL and "fenced" in error.str().lower()


def test_fenced_instance_id_is_fatal_for_the_application(cluster: Cluster) -> None:
    n = next(_ids)
    group = f"static-group-{n}"
    first = Member(cluster, group, f"static-a-{n}", **{"group.instance.id": "instance-1"})
    second: Member | None = None
    try:
        produce(cluster, b"static")
        first.poll_until(lambda: bool(first.assigned) and first.count("Heartbeat") >= 2,
                         what="a stable static member")
        # A second process with the same group.instance.id takes the slot; the
        # coordinator fences the first one on its next request.
        second = Member(cluster, group, f"static-b-{n}", **{"group.instance.id": "instance-1"})
        second.poll_until(lambda: bool(second.assigned), what="the new instance joined")
        first.poll_until(lambda: any(is_fatal_fencing(e) for e in first.errors),
                         what="a fatal fencing error")
        fenced = sum(errors(cluster, first.client_id, api).get("FENCED_INSTANCE_ID", 0)
                     for api in ("Heartbeat", "OffsetCommit", "SyncGroup", "JoinGroup"))
        assert fenced >= 1
    finally:
        first.close()
        if second is not None:
            second.close()


def test_injected_fenced_instance_id(cluster: Cluster) -> None:
    n = next(_ids)
    m = Member(cluster, f"static-inj-{n}", f"static-inj-{n}", **{"group.instance.id": "i"})
    try:
        m.poll_until(lambda: bool(m.assigned) and m.count("Heartbeat") >= 2,
                     what="a stable static member")
        cluster.faults.inject_error("Heartbeat", "FENCED_INSTANCE_ID", 1, group=m.group)
        m.poll_until(lambda: any(is_fatal_fencing(e) for e in m.errors), what="a fatal error")
        assert errors(cluster, m.client_id, "Heartbeat") == {"FENCED_INSTANCE_ID": 1}
    finally:
        m.close()
