"""DescribeQuorum (key 55): the metadata quorum as kafka-metadata-quorum shows it.

One voter, the controller that Metadata names (the lowest live broker), leading at
the metadata log's epoch, its high watermark the log's next offset, which grows
with each metadata change; the other live brokers are observers at that offset.
The same from a broker process, which learns the offset from its controller.
"""

from __future__ import annotations

import asyncio

from kaflite.client import sync
from kaflite.cluster import Cluster
from kaflite.cluster.handlers.quorum import METADATA_TOPIC
from kaflite.cluster.metalog import LEADER_EPOCH
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse
from kaflite.protocol.messages import describe_quorum_request as dqr


def request(topic: str = METADATA_TOPIC, partition: int = 0) -> DescribeQuorumRequest:
    return DescribeQuorumRequest(topics=[dqr.TopicData(topic, [dqr.PartitionData(partition)])])


async def ask(port: int, req: DescribeQuorumRequest, version: int) -> DescribeQuorumResponse:
    conn = await BrokerConnection("127.0.0.1", port).open()
    try:
        return await conn.request(req, version=version)
    finally:
        conn.close()


def check_quorum(resp: DescribeQuorumResponse, brokers: list[int], offset: int,
                 version: int) -> None:
    assert resp.error_code == 0
    ((topic, (p,)),) = [(t.topic_name, t.partitions) for t in resp.topics]
    assert topic == METADATA_TOPIC and p.partition_index == 0 and p.error_code == 0
    assert (p.leader_id, p.leader_epoch, p.high_watermark) == (min(brokers), LEADER_EPOCH,
                                                               offset)
    assert [(v.replica_id, v.log_end_offset) for v in p.current_voters] == [(min(brokers),
                                                                            offset)]
    assert sorted((o.replica_id, o.log_end_offset) for o in p.observers) == \
        [(b, offset) for b in sorted(brokers) if b != min(brokers)]
    if version >= 1:
        assert all(r.last_fetch_timestamp > 0 and r.last_caught_up_timestamp > 0
                   for r in [*p.current_voters, *p.observers])
    if version >= 2:
        assert [n.node_id for n in resp.nodes] == [min(brokers)]
        assert resp.nodes[0].listeners[0].port > 0


def test_the_quorum_is_the_controller_and_its_log_end_grows_with_each_change() -> None:
    async def main() -> None:
        async with Cluster(brokers=3) as cluster:
            port = cluster.broker(2).port
            before = cluster.controller.metadata_offset
            assert before > 0        # the brokers' registrations, the features
            for version in (0, 1, 2):
                check_quorum(await ask(port, request(), version), [0, 1, 2], before, version)
            cluster.create_topic("quorum-grows", partitions=2, replication_factor=3)
            after = cluster.controller.metadata_offset
            assert after > before
            check_quorum(await ask(port, request(), 2), [0, 1, 2], after, 2)
            # anything but partition 0 of the metadata topic: unknown, on what was named
            for wrong in (request("quorum-grows"), request(partition=1)):
                resp = await ask(port, wrong, 2)
                assert [(p.partition_index, p.error_code) for t in resp.topics
                        for p in t.partitions] == [
                    (wrong.topics[0].partitions[0].partition_index,
                     errors.UnknownTopicOrPartitionError.code)]

    asyncio.run(main())


def test_each_broker_process_reports_its_controllers_offset() -> None:
    with Cluster(brokers=2, processes=True) as cluster:
        cluster.create_topic("quorum-remote", partitions=1, replication_factor=2)
        offset = cluster.controller.metadata_offset
        for address in cluster.bootstrap_servers.split(","):
            port = int(address.rsplit(":", 1)[1])
            check_quorum(asyncio.run(ask(port, request(), 2)), [0, 1], offset, 2)


def test_kaflites_admin_describes_the_metadata_quorum() -> None:
    with Cluster(brokers=3) as cluster, \
            sync.Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        info = admin.describe_metadata_quorum()
        assert (info.leader_id, info.leader_epoch) == (0, LEADER_EPOCH)
        assert info.high_watermark == cluster.controller.metadata_offset > 0
        assert [(v.replica_id, v.log_end_offset) for v in info.voters] == \
            [(0, info.high_watermark)]
        assert sorted(o.replica_id for o in info.observers) == [1, 2]
        assert all(o.last_fetch_timestamp > 0 for o in info.observers)
