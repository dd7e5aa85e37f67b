"""KIP-848 consumer groups under ACLs, with confluent-kafka (``group.protocol=consumer``).

ConsumerGroupHeartbeat needs READ on the group and DESCRIBE on every topic subscribed
by name; a regular expression stands only for the topics the member may DESCRIBE;
DescribeConfigs and IncrementalAlterConfigs of a GROUP resource need DESCRIBE_CONFIGS
and ALTER_CONFIGS on the group; ConsumerGroupDescribe needs DESCRIBE on the group (and on the topics of its
assignments), and reports the operations the ACLs allow on it when asked to.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.security.acl import AclOperation, ResourceType
from tests.cluster.acl.test_enforced import CONFIG as ACL_CONFIG
from tests.cluster.acl.test_enforced import LISTENERS, admin_call, allow, props
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")
Op, RT = AclOperation, ResourceType
CONFIG = {**ACL_CONFIG, "offsets.topic.num.partitions": 2,
          "group.consumer.heartbeat.interval.ms": 200,
          "group.consumer.min.heartbeat.interval.ms": 100}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1, listeners=LISTENERS, config=CONFIG) as c:
        c.create_topic("open", 2, 1)
        c.create_topic("hidden", 1, 1)
        admin_call(c, "create_acls", [
            allow("User:bob", Op.READ, "open"), allow("User:bob", Op.READ, "shared", RT.GROUP),
            allow("User:alice", Op.DESCRIBE, "shared", RT.GROUP)])
        yield c


def first_error(consumer: Any, rounds: int = 100) -> int | None:
    """Poll until the consumer reports an error or gets an assignment (None)."""
    for _ in range(rounds):
        msg = consumer.poll(0.1)
        if msg is not None and msg.error():
            return int(msg.error().code())
        if consumer.assignment():
            return None
    raise AssertionError("neither an error nor an assignment")


def member(cluster: Cluster, user: str, group: str, topics: list[str]) -> Any:
    c = ck.Consumer(props(cluster, user, **{"group.id": group, "group.protocol": "consumer",
                                            "auto.offset.reset": "earliest"}))
    c.subscribe(topics)
    return c


def test_heartbeat_needs_read_on_the_group_and_describe_on_its_topics(cluster: Cluster) -> None:
    ok = member(cluster, "bob", "shared", ["open"])
    try:
        assert first_error(ok) is None
        assert {tp.topic for tp in ok.assignment()} == {"open"}
        # No READ on this group: GROUP_AUTHORIZATION_FAILED.
        other = member(cluster, "bob", "elsewhere", ["open"])
        try:
            assert first_error(other) == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
        finally:
            other.close()
        # READ on the group but a subscribed topic it may not describe.
        hidden = member(cluster, "bob", "shared", ["open", "hidden"])
        try:
            assert first_error(hidden) == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        finally:
            hidden.close()
    finally:
        ok.close()


def test_a_regex_gets_only_the_topics_the_member_may_describe(cluster: Cluster) -> None:
    c = member(cluster, "bob", "shared", ["^(open|hidden)$"])
    try:
        assert first_error(c) is None
        assert {tp.topic for tp in c.assignment()} == {"open"}     # not "hidden"
        described = admin_call(cluster, "describe_consumer_groups", ["shared"])["shared"]
        [m] = described.members
        assert "^(open|hidden)$" in (m.subscribed_topic_regex or "")   # librdkafka wraps it
        assert {tp.topic for tp in m.target_assignment} == {"open"}
    finally:
        c.close()


def test_group_configs_need_the_groups_config_acls(cluster: Cluster) -> None:
    from kaflite.client import Admin
    from kaflite.client.admin import ConfigResource
    from kaflite.protocol import errors
    from tests.cluster.acl.test_enforced import run

    res = ConfigResource(32, "cfg-group")

    async def as_alice() -> None:
        async with Admin(props(cluster, "alice")) as admin:
            with pytest.raises(errors.GroupAuthorizationFailedError):
                await admin.describe_config_entries([res])
            with pytest.raises(errors.GroupAuthorizationFailedError):
                await admin.alter_configs({res: {"consumer.session.timeout.ms": "50000"}})
    run(as_alice())
    admin_call(cluster, "create_acls", [allow("User:alice", Op.DESCRIBE_CONFIGS, "cfg-group",
                                              RT.GROUP)])

    async def described() -> int:
        async with Admin(props(cluster, "alice")) as admin:
            return len((await admin.describe_config_entries([res]))[res])
    wait_for(lambda: _succeeds(lambda: run(described())), "alice may describe", 20)


def _succeeds(fn: Any) -> bool:
    try:
        fn()
    except Exception:
        return False
    return True


def test_describe_needs_describe_and_reports_the_allowed_operations(cluster: Cluster) -> None:
    from confluent_kafka.admin import AclOperation as CkOp
    from confluent_kafka.admin import AdminClient

    c = member(cluster, "bob", "shared", ["open"])
    try:
        assert first_error(c) is None

        admins = {u: AdminClient(props(cluster, u)) for u in ("admin", "alice", "bob")}

        def describe(user: str) -> Any:
            return admins[user].describe_consumer_groups(
                ["shared"], include_authorized_operations=True)["shared"]

        desc = describe("admin").result(10)
        assert desc.type.name == "CONSUMER"
        # a super user: every operation Kafka's AclEntry supports on a group
        assert set(desc.authorized_operations) == {CkOp.READ, CkOp.DELETE, CkOp.DESCRIBE,
                                                   CkOp.DESCRIBE_CONFIGS, CkOp.ALTER_CONFIGS}
        # alice may only DESCRIBE the group (and not the topic its members read).
        with pytest.raises(ck.KafkaException) as denied:
            describe("alice").result(10)
        assert denied.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        admin_call(cluster, "create_acls", [allow("User:alice", Op.DESCRIBE, "open")])
        wait_for(lambda: _ops(describe("alice")) == {CkOp.DESCRIBE}, "alice's view", 20)
        # bob may READ (which implies DESCRIBE) but not delete.
        assert _ops(describe("bob")) == {CkOp.READ, CkOp.DESCRIBE}
    finally:
        c.close()


def _ops(fut: Any) -> set[Any] | None:
    try:
        return set(fut.result(10).authorized_operations)
    except ck.KafkaException:
        return None
