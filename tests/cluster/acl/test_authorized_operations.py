"""The operations a principal holds, as Metadata, DescribeCluster and
DescribeTopicPartitions report them when asked (issue 38 §5).

Without an authorizer Kafka 4.4.0 answers 8096 for the cluster (7 operations) and
3576 for a topic (8), and Integer.MIN_VALUE when not asked; Metadata v11 dropped the
cluster's field. With ACLs, each principal gets its own: read here through
confluent-kafka's admin client, as an application would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client.admin import Admin
from kaflite.cluster import Cluster
from kaflite.protocol.messages import (
    DescribeClusterRequest,
    DescribeTopicPartitionsRequest,
    MetadataRequest,
)
from kaflite.protocol.messages import describe_topic_partitions_request as dtq
from kaflite.protocol.messages import metadata_request as mq
from kaflite.security.acl import AclOperation, ResourceType
from tests.cluster.acl.test_enforced import CONFIG as ACL_CONFIG
from tests.cluster.acl.test_enforced import LISTENERS, admin_call, allow, props
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")
Op, RT = AclOperation, ResourceType
CLUSTER_ALL, TOPIC_ALL, NOT_ASKED = 8096, 3576, -(1 << 31)


def test_without_an_authorizer_every_operation_as_kafka_answers() -> None:
    with Cluster(brokers=1) as cluster:
        cluster.create_topic("t", 1, 1)

        async def ask() -> list[Any]:
            async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
                await admin.start()
                conn = await admin.pool.get(0, "data")
                topic = [mq.MetadataRequestTopic(name="t")]
                out: list[Any] = []
                for version in (8, 12):
                    md = await conn.request(MetadataRequest(
                        topics=topic, allow_auto_topic_creation=False,
                        include_cluster_authorized_operations=version <= 10,
                        include_topic_authorized_operations=True), version=version)
                    out.append((getattr(md, "cluster_authorized_operations", None),
                                md.topics[0].topic_authorized_operations))
                md = await conn.request(MetadataRequest(topics=topic,
                                                        allow_auto_topic_creation=False))
                out.append(md.topics[0].topic_authorized_operations)
                for include in (True, False):
                    dc = await conn.request(DescribeClusterRequest(
                        include_cluster_authorized_operations=include))
                    out.append(dc.cluster_authorized_operations)
                dtp = await conn.request(DescribeTopicPartitionsRequest(
                    topics=[dtq.TopicRequest(name="t")], response_partition_limit=10))
                out.append(dtp.topics[0].topic_authorized_operations)
                return out
        assert asyncio.run(ask()) == [(CLUSTER_ALL, TOPIC_ALL), (NOT_ASKED, TOPIC_ALL), NOT_ASKED,
                                      CLUSTER_ALL, NOT_ASKED, TOPIC_ALL]


@pytest.fixture(scope="module")
def secured() -> Iterator[Cluster]:
    with Cluster(brokers=1, listeners=LISTENERS, config=ACL_CONFIG) as c:
        c.create_topic("events", 1, 1)
        admin_call(c, "create_acls", [
            allow("User:bob", Op.READ, "events"),
            allow("User:bob", Op.DESCRIBE_CONFIGS, "events"),
            allow("User:bob", Op.IDEMPOTENT_WRITE, "kafka-cluster", RT.CLUSTER)])
        yield c


def test_each_principal_gets_its_own_operations(secured: Cluster) -> None:
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as CkOp
    from confluent_kafka.admin import AdminClient

    admins = {u: AdminClient(props(secured, u)) for u in ("admin", "bob")}   # alive until done

    def topic_ops(user: str) -> set[Any] | None:
        futures = admins[user].describe_topics(
            TopicCollection(["events"]), include_authorized_operations=True)
        try:
            return set(futures["events"].result(10).authorized_operations)
        except ck.KafkaException:
            return None

    def cluster_ops(user: str) -> set[Any]:
        described = admins[user].describe_cluster(
            include_authorized_operations=True).result(10)
        return set(described.authorized_operations)

    admin_ops = {CkOp.READ, CkOp.WRITE, CkOp.CREATE, CkOp.DELETE, CkOp.ALTER, CkOp.DESCRIBE,
                 CkOp.DESCRIBE_CONFIGS, CkOp.ALTER_CONFIGS}
    assert topic_ops("admin") == admin_ops
    # READ implies DESCRIBE, as in Kafka's authorizer
    wait_for(lambda: topic_ops("bob") == {CkOp.READ, CkOp.DESCRIBE, CkOp.DESCRIBE_CONFIGS},
             "bob's operations on the topic", 20)
    assert cluster_ops("admin") == {CkOp.CREATE, CkOp.ALTER, CkOp.DESCRIBE, CkOp.CLUSTER_ACTION,
                                    CkOp.DESCRIBE_CONFIGS, CkOp.ALTER_CONFIGS,
                                    CkOp.IDEMPOTENT_WRITE}
    assert cluster_ops("bob") == {CkOp.IDEMPOTENT_WRITE}
