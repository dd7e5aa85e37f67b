"""Kafka 4.4's newer group versions, in raw requests at the exact version (issue 38).

* OffsetCommit v10 and OffsetFetch v10 name topics by id: an id that names no topic
  gets UNKNOWN_TOPIC_ID for each partition; a fetch of every topic leaves out one
  that no longer exists.
* DescribeGroups v6 (KIP-1043) answers GROUP_ID_NOT_FOUND with Kafka's message for a
  group that is not a classic group; v5 says Dead with no error.
* DeleteGroups v3 carries an error message (null where Kafka's shard gives none).
* ConsumerGroupDescribe v1 (KIP-1099) tells each member's protocol.
"""

from __future__ import annotations

import asyncio
import uuid

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kaflite.protocol.messages import delete_topics_request as dtq
from kaflite.protocol.messages import offset_commit_request as ocq
from kaflite.protocol.messages import offset_fetch_request as ofq

UNKNOWN_ID = uuid.UUID("00000000-0000-0000-0000-00000000abcd")


async def _coordinated(conn: BrokerConnection, group: str) -> None:
    """Wait until this (single) broker coordinates ``group``: __consumer_offsets is up."""
    for _ in range(200):
        resp = await conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
        if resp.coordinators[0].error_code == 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no group coordinator")


def _commit(group: str, topics: list[ocq.OffsetCommitRequestTopic]) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               topics=topics)


def _by_id(topic_id: uuid.UUID, offsets: dict[int, int]) -> ocq.OffsetCommitRequestTopic:
    return ocq.OffsetCommitRequestTopic(topic_id=topic_id, partitions=[
        ocq.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
        for p, o in offsets.items()])


def test_offset_commit_and_fetch_v10_name_topics_by_id() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            orders = cluster.create_topic("orders", 2, 1).topic_id
            gone = cluster.create_topic("gone", 1, 1).topic_id
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                await _coordinated(conn, "g10")
                resp = await conn.request(_commit("g10", [
                    _by_id(orders, {0: 5, 1: 7}), _by_id(UNKNOWN_ID, {0: 1}),
                    _by_id(gone, {0: 3})]), version=10)
                codes = {(t.topic_id, p.partition_index): p.error_code
                         for t in resp.topics for p in t.partitions}
                assert codes == {(orders, 0): 0, (orders, 1): 0, (gone, 0): 0,
                                 (UNKNOWN_ID, 0): errors.UnknownTopicIdError.code}
                assert all(t.name == "" for t in resp.topics)     # (v10 answers ids only)

                # v9 reads by name what v10 committed by id
                v9 = await conn.request(OffsetFetchRequest(groups=[ofq.OffsetFetchRequestGroup(
                    group_id="g10", topics=[ofq.OffsetFetchRequestTopics(
                        name="orders", partition_indexes=[0, 1])])]), version=9)
                assert [(p.partition_index, p.committed_offset)
                        for p in v9.groups[0].topics[0].partitions] == [(0, 5), (1, 7)]

                async def fetch(topics: list[ofq.OffsetFetchRequestTopics] | None
                                ) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
                    resp = await conn.request(OffsetFetchRequest(groups=[
                        ofq.OffsetFetchRequestGroup(group_id="g10", topics=topics)]), version=10)
                    (g,) = resp.groups
                    assert g.error_code == 0
                    return {(t.topic_id, p.partition_index): (p.error_code, p.committed_offset)
                            for t in g.topics for p in t.partitions}

                assert await fetch([
                    ofq.OffsetFetchRequestTopics(topic_id=orders, partition_indexes=[1]),
                    ofq.OffsetFetchRequestTopics(topic_id=UNKNOWN_ID, partition_indexes=[0, 2]),
                ]) == {(orders, 1): (0, 7),
                       (UNKNOWN_ID, 0): (errors.UnknownTopicIdError.code, -1),
                       (UNKNOWN_ID, 2): (errors.UnknownTopicIdError.code, -1)}
                assert await fetch(None) == {(orders, 0): (0, 5), (orders, 1): (0, 7),
                                             (gone, 0): (0, 3)}
                # a deleted topic has no id any more: every topic's fetch leaves it out
                deleted = await conn.request(DeleteTopicsRequest(
                    topics=[dtq.DeleteTopicState(name="gone")], timeout_ms=10_000))
                assert deleted.responses[0].error_code == 0
                for _ in range(100):
                    if "gone" not in cluster.controller.topics:
                        break
                    await asyncio.sleep(0.05)
                assert await fetch(None) == {(orders, 0): (0, 5), (orders, 1): (0, 7)}
            finally:
                conn.close()

    asyncio.run(main())


def test_describe_groups_v6_and_delete_groups_v3() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            topic_id = cluster.create_topic("dg", 1, 1).topic_id
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                await _coordinated(conn, "simple")
                # a commit without members makes an empty classic group, as in Kafka
                done = await conn.request(_commit("simple", [_by_id(topic_id, {0: 1})]),
                                          version=10)
                assert done.topics[0].partitions[0].error_code == 0
                # a KIP-848 group: not a classic group for DescribeGroups
                joined = await conn.request(ConsumerGroupHeartbeatRequest(
                    group_id="modern", member_id=str(uuid.uuid4()), member_epoch=0,
                    rebalance_timeout_ms=30_000, subscribed_topic_names=["dg"],
                    topic_partitions=[]), version=1)
                assert joined.error_code == 0

                v6 = await conn.request(DescribeGroupsRequest(
                    groups=["simple", "absent", "modern"]), version=6)
                found = {g.group_id: (g.error_code, g.group_state, g.error_message)
                         for g in v6.groups}
                assert found == {
                    "simple": (0, "Empty", None),
                    "absent": (errors.GroupIdNotFoundError.code, "Dead", "Group absent not found."),
                    "modern": (errors.GroupIdNotFoundError.code, "Dead",
                               "Group modern is not a classic group."),
                }
                v5 = await conn.request(DescribeGroupsRequest(groups=["absent"]), version=5)
                assert (v5.groups[0].error_code, v5.groups[0].group_state) == (0, "Dead")

                deleted = await conn.request(DeleteGroupsRequest(
                    groups_names=["simple", "absent", "modern"]), version=3)
                results = {r.group_id: (r.error_code, r.error_message) for r in deleted.results}
                assert results == {
                    "simple": (0, None),
                    "absent": (errors.GroupIdNotFoundError.code, None),
                    "modern": (errors.NonEmptyGroupError.code, None),
                }
            finally:
                conn.close()

    asyncio.run(main())


def test_consumer_group_describe_v1_tells_the_member_type() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("cgd", 2, 1)
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                await _coordinated(conn, "cg")
                member = str(uuid.uuid4())
                joined = await conn.request(ConsumerGroupHeartbeatRequest(
                    group_id="cg", member_id=member, member_epoch=0,
                    rebalance_timeout_ms=30_000, subscribed_topic_names=["cgd"],
                    topic_partitions=[]), version=1)
                assert joined.error_code == 0
                v1 = await conn.request(ConsumerGroupDescribeRequest(group_ids=["cg"]),
                                        version=1)
                assert [(m.member_id, m.member_type) for m in v1.groups[0].members] == \
                    [(member, 1)]                                # a consumer-protocol member
                v0 = await conn.request(ConsumerGroupDescribeRequest(group_ids=["cg"]),
                                        version=0)
                assert [m.member_type for m in v0.groups[0].members] == [-1]   # not on the wire
            finally:
                conn.close()

    asyncio.run(main())
