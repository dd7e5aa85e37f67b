"""Share groups under ACLs, as Kafka's KafkaApis checks them: ShareGroupHeartbeat READ on
the group and DESCRIBE on the subscribed topics; ShareFetch and ShareAcknowledge READ on
the group, then READ on each topic (per partition)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from kaflite.client import Admin
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareFetchRequest,
    ShareGroupHeartbeatRequest,
)
from kaflite.protocol.messages import share_acknowledge_request as saq
from kaflite.protocol.messages import share_fetch_request as sfq
from kaflite.security.acl import AclOperation, ResourceType
from tests.cluster.acl.test_enforced import CONFIG, LISTENERS, admin_call, allow, props

pytest.importorskip("confluent_kafka")
Op, RT = AclOperation, ResourceType


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1, listeners=LISTENERS, config=CONFIG) as c:
        c.create_topic("open", 1, 1)
        c.create_topic("hidden", 1, 1)
        admin_call(c, "create_acls", [
            allow("User:bob", Op.READ, "open"), allow("User:bob", Op.READ, "shared", RT.GROUP)])
        yield c


def test_share_apis_check_group_and_topic_acls(cluster: Cluster) -> None:
    open_id = cluster.controller.topics["open"].topic_id
    hidden_id = cluster.controller.topics["hidden"].topic_id

    async def main() -> None:
        async with Admin(props(cluster, "bob")) as admin:
            node = await admin._coordinator("shared")

            async def heartbeat(group: str, topics: list[str]) -> int:
                resp = await admin._request(node, ShareGroupHeartbeatRequest(
                    group_id=group, member_id="m", member_epoch=0,
                    subscribed_topic_names=topics))
                return resp.error_code

            assert await heartbeat("elsewhere", ["open"]) == \
                errors.GroupAuthorizationFailedError.code
            assert await heartbeat("shared", ["open", "hidden"]) == \
                errors.TopicAuthorizationFailedError.code
            assert await heartbeat("shared", ["open"]) == 0

            def fetch(group: str) -> ShareFetchRequest:
                return ShareFetchRequest(
                    group_id=group, member_id="m", share_session_epoch=0, max_wait_ms=0,
                    min_bytes=1, max_bytes=1 << 20, max_records=10, batch_size=10, topics=[
                        sfq.FetchTopic(open_id, [sfq.FetchPartition(partition_index=0)]),
                        sfq.FetchTopic(hidden_id, [sfq.FetchPartition(partition_index=0)])])

            denied = await admin._request(0, fetch("elsewhere"))
            assert denied.error_code == errors.GroupAuthorizationFailedError.code
            fetched = await admin._request(0, fetch("shared"))
            codes = {t.topic_id: t.partitions[0].error_code for t in fetched.responses}
            assert codes == {hidden_id: errors.TopicAuthorizationFailedError.code}
            acked = await admin._request(0, ShareAcknowledgeRequest(
                group_id="elsewhere", member_id="m", share_session_epoch=1, topics=[
                    saq.AcknowledgeTopic(open_id, [saq.AcknowledgePartition(0, [])])]))
            assert acked.error_code == errors.GroupAuthorizationFailedError.code

    asyncio.run(main())
