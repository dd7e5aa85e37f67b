"""The authorized-operations fields without an authorizer: every operation Kafka's
``AclEntry.supportedOperations`` lists for the resource, as Kafka's
``AuthHelper.authorizedOperations`` answers when no authorizer is configured. Found by
the Java Admin driver (tests/interop/java/AdminDriver.java): kaflite answered "not
requested" (-2^31) for topics and the cluster, and left the config operations out of a
group's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    Struct,
)
from kaflite.protocol.messages import describe_topic_partitions_request as dtq
from kaflite.security.acl import AclOperation as Op

TOPIC_OPS = {Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
             Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
GROUP_OPS = {Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}
CLUSTER_OPS = {Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
               Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}
NOT_ASKED = -(1 << 31)


def bits(ops: set[Op]) -> int:
    return sum(1 << int(op) for op in ops)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1) as c:
        c.create_topic("ops", partitions=1, replication_factor=1)
        yield c


def ask(cluster: Cluster, req: Struct, version: int) -> Struct:
    async def go() -> Struct:
        conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
        try:
            return await conn.request(req, version=version)
        finally:
            conn.close()
    return asyncio.run(asyncio.wait_for(go(), 30))


def test_topics_and_the_cluster(cluster: Cluster) -> None:
    for include in (True, False):
        meta = ask(cluster, MetadataRequest(
            topics=[MetadataRequestTopic(name="ops")], allow_auto_topic_creation=False,
            include_cluster_authorized_operations=include,
            include_topic_authorized_operations=include), version=10)
        assert isinstance(meta, MetadataResponse)
        assert meta.topics[0].topic_authorized_operations == \
            (bits(TOPIC_OPS) if include else NOT_ASKED)
        assert meta.cluster_authorized_operations == (bits(CLUSTER_OPS) if include else NOT_ASKED)
        described = ask(cluster, DescribeClusterRequest(
            include_cluster_authorized_operations=include), version=1)
        assert isinstance(described, DescribeClusterResponse)
        assert described.cluster_authorized_operations == \
            (bits(CLUSTER_OPS) if include else NOT_ASKED)
    # v11 dropped the cluster's field from Metadata
    meta = ask(cluster, MetadataRequest(topics=[MetadataRequestTopic(name="ops")],
                                        include_topic_authorized_operations=True), version=12)
    assert isinstance(meta, MetadataResponse)
    assert meta.topics[0].topic_authorized_operations == bits(TOPIC_OPS)
    assert meta.cluster_authorized_operations == NOT_ASKED
    pages = ask(cluster, DescribeTopicPartitionsRequest(
        topics=[dtq.TopicRequest("ops"), dtq.TopicRequest("none")]), version=0)
    assert isinstance(pages, DescribeTopicPartitionsResponse)
    assert {t.name: t.topic_authorized_operations for t in pages.topics} == {
        "ops": bits(TOPIC_OPS), "none": bits(TOPIC_OPS)}


def test_groups(cluster: Cluster) -> None:
    described = ask(cluster, DescribeGroupsRequest(groups=["g"],
                                                   include_authorized_operations=True), version=5)
    assert isinstance(described, DescribeGroupsResponse)
    assert described.groups[0].authorized_operations == bits(GROUP_OPS)
