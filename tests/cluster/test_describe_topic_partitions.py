"""DescribeTopicPartitions (key 75): topics' partitions a page at a time, by cursor.

Three topics of 3, 5 and 1 partitions. Pages of 4 partitions over every topic must
join up to exactly what Metadata reports, each page stopping inside a topic or at
its end with the cursor of what comes next; named topics are answered in name
order, an unknown one with UNKNOWN_TOPIC_OR_PARTITION; a cursor on a topic the
request does not name is INVALID_REQUEST.
"""

from __future__ import annotations

import asyncio

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    MetadataRequest,
)
from kaflite.protocol.messages import describe_topic_partitions_request as dtq

TOPICS = {"dtp-a": 3, "dtp-b": 5, "dtp-c": 1}


def request(names: list[str], limit: int, cursor: tuple[str, int] | None = None
            ) -> DescribeTopicPartitionsRequest:
    return DescribeTopicPartitionsRequest(
        topics=[dtq.TopicRequest(n) for n in names], response_partition_limit=limit,
        cursor=None if cursor is None else dtq.Cursor(*cursor))


def test_pages_of_every_topic_join_up_to_the_metadata() -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            for name, n in TOPICS.items():
                cluster.create_topic(name, partitions=n, replication_factor=2)
            conn = await BrokerConnection("127.0.0.1", cluster.broker(1).port).open()
            try:
                metadata = await conn.request(MetadataRequest(topics=None), version=12)
                expected = sorted(
                    (t.name, p.partition_index, p.leader_id, p.leader_epoch,
                     tuple(p.replica_nodes), tuple(p.isr_nodes))
                    for t in metadata.topics for p in t.partitions)
                pages: list[DescribeTopicPartitionsResponse] = []
                cursor: tuple[str, int] | None = None
                for _ in range(50):
                    page = await conn.request(request([], 4, cursor), version=0)
                    pages.append(page)
                    if page.next_cursor is None:
                        break
                    cursor = (page.next_cursor.topic_name, page.next_cursor.partition_index)
                got = [(t.name, p.partition_index, p.leader_id, p.leader_epoch,
                        tuple(p.replica_nodes), tuple(p.isr_nodes))
                       for page in pages for t in page.topics for p in t.partitions]
                assert got == expected       # in name order, each partition once
                assert all(sum(len(t.partitions) for t in page.topics) == 4
                           for page in pages[:-1])
                # the pages over the three topics alone: a cut inside dtp-b, then at its end
                first = await conn.request(request(list(TOPICS), 4), version=0)
                assert [(t.name, [p.partition_index for p in t.partitions])
                        for t in first.topics] == [("dtp-a", [0, 1, 2]), ("dtp-b", [0])]
                assert first.next_cursor is not None
                assert (first.next_cursor.topic_name, first.next_cursor.partition_index) \
                    == ("dtp-b", 1)
                second = await conn.request(request(list(TOPICS), 4, ("dtp-b", 1)), version=0)
                assert [(t.name, [p.partition_index for p in t.partitions])
                        for t in second.topics] == [("dtp-b", [1, 2, 3, 4])]
                assert second.next_cursor is not None
                assert (second.next_cursor.topic_name, second.next_cursor.partition_index) \
                    == ("dtp-c", 0)
                topic = second.topics[0]
                assert topic.topic_id == cluster.controller.topics["dtp-b"].topic_id
                assert not topic.is_internal
                assert topic.partitions[0].eligible_leader_replicas == []
                # named: name order, the unknown one answered as such
                named = await conn.request(request(["dtp-c", "nope", "dtp-a"], 2000),
                                           version=0)
                assert [(t.name, t.error_code, len(t.partitions)) for t in named.topics] == [
                    ("dtp-a", 0, 3), ("dtp-c", 0, 1),
                    ("nope", errors.UnknownTopicOrPartitionError.code, 0)]
                assert named.next_cursor is None
                # a cursor on a topic the request does not name
                bad = await conn.request(request(["dtp-a"], 10, ("dtp-b", 0)), version=0)
                assert [(t.name, t.error_code) for t in bad.topics] == [
                    ("dtp-a", errors.InvalidRequestError.code)]
            finally:
                conn.close()

    asyncio.run(main())
