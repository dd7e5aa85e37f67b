"""A client that closes its connection right after sending still gets what it sent done.

Kafka's request handlers finish every request its socket server has read, after the
client has gone (the response is dropped). librdkafka leaves a KIP-848 group that way on
close: a heartbeat with epoch -1, and the socket closes. kaflite used to clear the
connection's unhandled requests and cancel the one in progress when the peer closed.

Here one connection carries a Fetch that long-polls an empty partition for a second,
then an OffsetCommit, and closes at once. The commit must be applied.
"""

from __future__ import annotations

import asyncio

from kaflite.client import Admin, TopicPartition
from kaflite.cluster import Cluster
from kaflite.protocol import encode_request
from kaflite.protocol.messages import FetchRequest, OffsetCommitRequest
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import offset_commit_request as ocq


def _requests(topic: str) -> bytes:
    fetch = FetchRequest(max_wait_ms=1000, min_bytes=1 << 20, topics=[
        fq.FetchTopic(topic=topic, partitions=[fq.FetchPartition(partition=0, fetch_offset=0,
                                                              partition_max_bytes=1 << 20)])])
    commit = OffsetCommitRequest(group_id="gone", topics=[ocq.OffsetCommitRequestTopic(
        name=topic, partitions=[ocq.OffsetCommitRequestPartition(0, committed_offset=7)])])
    return b"".join([*encode_request(1, 4, 1, "gone", fetch),
                     *encode_request(8, 8, 2, "gone", commit)])


def test_requests_read_before_the_peer_closed_are_still_handled() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("closing", partitions=1, replication_factor=1)
            broker = cluster.broker(cluster.controller.topics["closing"].partitions[0].leader)
            _, writer = await asyncio.open_connection("127.0.0.1", broker.port)
            writer.write(_requests("closing"))
            await writer.drain()
            writer.close()
            await writer.wait_closed()
            async with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
                committed: dict[TopicPartition, int] = {}
                for _ in range(50):         # the Fetch waits 1 s before the commit is read
                    await asyncio.sleep(0.1)
                    committed = {tp: o.offset for tp, o in
                                 (await admin.list_group_offsets("gone")).items()}
                    if committed:
                        break
                assert committed == {TopicPartition("closing", 0): 7}
            assert not broker.draining      # the connection let go once both were done

    asyncio.run(main())
