"""The coordinator's removals of members, as events (``kaflite.cluster.groups.removals``).

``kaflite.verify`` judges "every member the coordinator expired was told" from these
events, so each kind of removal must produce one, with the client id that names the
member's process: a KIP-848 member whose session expired, a classic one whose
session expired, and one forgotten on request. A member that leaves by itself is not
a removal.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaflite.client import GroupMembershipOperation
from kaflite.client.sync import Admin, Consumer
from kaflite.cluster import Cluster
from kaflite.cluster.groups.removals import install_sink, remove_sink
from tests.conftest import wait_for

TOPIC = "removals"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    config = {"group.min.session.timeout.ms": 500, "group.consumer.session.timeout.ms": 1500,
              "group.consumer.min.session.timeout.ms": 500,
              "group.consumer.heartbeat.interval.ms": 200,
              "group.consumer.min.heartbeat.interval.ms": 100,
              "group.initial.rebalance.delay.ms": 0}
    with Cluster(brokers=1, config=config) as c:
        c.create_topic(TOPIC, 2, 1)
        yield c


@pytest.fixture()
def sink(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "removals.jsonl"
    install_sink(path)
    try:
        yield path
    finally:
        remove_sink(path)


def events(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def joined(cluster: Cluster, group: str, client_id: str, protocol: str,
           instance_id: str | None = None) -> Consumer:
    conf: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                            "client.id": client_id, "auto.offset.reset": "earliest"}
    if instance_id is not None:
        conf["group.instance.id"] = instance_id
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 1500, "heartbeat.interval.ms": 200})
    c = Consumer(conf).start()
    c.subscribe([TOPIC])
    wait_for(lambda: (c.poll(100), bool(c.assignment()))[1], "an assignment", 30)
    return c


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_member_cut_off_past_its_session_is_removed_once(
        cluster: Cluster, sink: Path, protocol: str) -> None:
    group, cid = f"expiry-{protocol}", f"cut-{protocol}.0"
    c = joined(cluster, group, cid, protocol)
    rule = cluster.faults.drop_requests(None, None, client_id=cid)   # every request, for ever
    try:
        wait_for(lambda: any(e["client_id"] == cid for e in events(sink)),
                 "the coordinator to remove the member", 20, state=lambda: events(sink))
    finally:
        cluster.faults.remove(rule.id)
        c.close()
    (event,) = [e for e in events(sink) if e["client_id"] == cid]
    assert event["group"] == group and event["protocol"] == protocol
    assert event["member_id"] and "expired" in event["cause"]
    assert event["monotonic"] > 0 and event["wall"] > 0


def test_a_forgotten_member_is_a_removal_and_one_that_leaves_is_not(
        cluster: Cluster, sink: Path) -> None:
    joined(cluster, "leave", "leaving.0", "classic").close()     # LeaveGroup: no event
    forgotten = joined(cluster, "forget", "forgotten.0", "classic")
    try:
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            members = admin.describe_groups(["forget"])["forget"].members
        (member_id,) = [m.member_id for m in members if m.client_id == "forgotten.0"]
        assert cluster.faults.forget_member("forget", member_id)
        wait_for(lambda: events(sink), "the removal event", 10)
    finally:
        forgotten.close()
    (event,) = events(sink)
    assert (event["client_id"], event["member_id"], event["protocol"]) == \
        ("forgotten.0", member_id, "classic")
    assert "forgotten on request" in event["cause"]


def test_an_abandoned_confluent_member_says_no_goodbye(cluster: Cluster, sink: Path) -> None:
    """verify's member crash abandons a librdkafka consumer (destroyed without a consumer
    close: no leave, no rebalance callback, whose assign can hang while holding the GIL,
    librdkafka#4884). The coordinator must then expire it, which a clean close would
    pre-empt with a leave."""
    from kaflite.verify.clients._confluent import _Consumer

    cid = "abandoned.0"
    member = _Consumer(cluster.bootstrap_servers, cid, "abandon", "read_committed", None,
                       "consumer")
    member.subscribe([TOPIC])
    wait_for(lambda: (member.poll(0.1), bool(member.c.assignment()))[1], "an assignment", 30)
    member.abandon()
    assert not hasattr(member, "c")
    wait_for(lambda: any(e["client_id"] == cid for e in events(sink)),
             "the coordinator to expire the abandoned member", 20, state=lambda: events(sink))
    (event,) = [e for e in events(sink) if e["client_id"] == cid]
    assert event["protocol"] == "consumer" and "expired" in event["cause"]


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_member_closed_remaining_in_group_is_expired(
        cluster: Cluster, sink: Path, protocol: str) -> None:
    """KIP-1092's REMAIN_IN_GROUP: the close says nothing to the coordinator, which
    finds the member gone only when its session expires."""
    group, cid = f"remain-{protocol}", f"remain-{protocol}.0"
    joined(cluster, group, cid, protocol).close(GroupMembershipOperation.REMAIN_IN_GROUP)
    wait_for(lambda: any(e["client_id"] == cid for e in events(sink)),
             "the coordinator to expire the member", 20, state=lambda: events(sink))
    (event,) = [e for e in events(sink) if e["client_id"] == cid]
    assert event["group"] == group and "expired" in event["cause"]


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_static_member_closed_with_leave_group_leaves_at_once(
        cluster: Cluster, sink: Path, protocol: str) -> None:
    """KIP-1092's LEAVE_GROUP: a static member, which by default stays in the group when
    it closes, leaves (classic LeaveGroup by instance id, KIP-848 epoch -1, not -2)."""
    group, cid = f"static-leave-{protocol}", f"static-{protocol}.0"
    c = joined(cluster, group, cid, protocol, instance_id=f"instance-{protocol}")
    c.close(GroupMembershipOperation.LEAVE_GROUP)
    assert members(cluster, group, protocol) == []
    assert not [e for e in events(sink) if e["client_id"] == cid]


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_static_member_closed_by_default_stays(
        cluster: Cluster, sink: Path, protocol: str) -> None:
    group, cid = f"static-stay-{protocol}", f"stay-{protocol}.0"
    joined(cluster, group, cid, protocol, instance_id=f"stay-{protocol}").close()
    assert members(cluster, group, protocol) == [cid]


def members(cluster: Cluster, group: str, protocol: str) -> list[str]:
    """The client ids of the group's members, as its coordinator lists them."""
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        if protocol == "consumer":
            return [m.client_id for m in admin.describe_consumer_groups([group])[group].members]
        return [m.client_id for m in admin.describe_groups([group])[group].members]


def test_an_injected_unknown_member_id_drops_the_member(cluster: Cluster, sink: Path) -> None:
    """Kafka answers UNKNOWN_MEMBER_ID only for a member it dropped; an injected one that
    left the member in the group made the client join anew and leave its old id behind,
    which the next rebalance then waited on (aiokafka's 34.5 s unowned interval in the
    group soak). The coordinator now drops the member the error names."""
    group, cid = "injected-unknown", "injected.0"
    c = joined(cluster, group, cid, "classic")
    rule = cluster.faults.inject_error("Heartbeat", "UNKNOWN_MEMBER_ID", 1, group=group)
    try:
        wait_for(lambda: any(e["client_id"] == cid for e in events(sink)),
                 "the coordinator to drop the member", 20, state=lambda: events(sink))
        # it joins again under a new id, and no old one lingers
        wait_for(lambda: (c.poll(100), members(cluster, group, "classic") == [cid])[1],
                 "one member, the rejoined one", 20,
                 state=lambda: members(cluster, group, "classic"))
    finally:
        cluster.faults.remove(rule.id)
        c.close()
    (event,) = [e for e in events(sink) if e["client_id"] == cid]
    assert "forgotten" in event["cause"]
