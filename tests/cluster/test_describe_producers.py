"""DescribeProducers (key 61): the producers a partition's leader knows.

An idempotent producer writes 5 records one at a time; a transactional one writes 3
and leaves its transaction open. The leader reports both: epochs, last sequences,
the open transaction's first offset (and -1 for the idempotent one). A follower
answers NOT_LEADER_OR_FOLLOWER, a partition that does not exist
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import asyncio

from kaflite.client import Producer
from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from kaflite.protocol.messages import describe_producers_request as dpq


async def describe(port: int, topic: str, partitions: list[int]) -> DescribeProducersResponse:
    conn = await BrokerConnection("127.0.0.1", port).open()
    try:
        return await conn.request(DescribeProducersRequest(
            topics=[dpq.TopicRequest(topic, partitions)]), version=0)
    finally:
        conn.close()


def test_the_leader_reports_idempotent_and_transactional_producers() -> None:
    async def main() -> None:
        async with Cluster(brokers=2) as cluster:
            cluster.create_topic("described", partitions=1, replication_factor=2)
            state = cluster.controller.topics["described"].partitions[0]
            leader, follower = state.leader, next(r for r in state.replicas
                                                  if r != state.leader)
            servers = cluster.bootstrap_servers
            async with Producer({"bootstrap.servers": servers, "linger.ms": 0,
                                 "enable.idempotence": True}) as plain, \
                    Producer({"bootstrap.servers": servers, "linger.ms": 0,
                              "transactional.id": "described-txn"}) as txn:
                for i in range(5):
                    await plain.send("described", b"%d" % i, partition=0)
                await txn.init_transactions()
                txn.begin_transaction()
                for i in range(3):
                    await txn.send("described", b"t%d" % i, partition=0)
                resp = await describe(cluster.broker(leader).port, "described", [0, 5])
                ((topic, (p, missing)),) = [(t.name, t.partitions) for t in resp.topics]
                assert topic == "described" and p.error_code == 0
                assert missing.partition_index == 5 and \
                    missing.error_code == errors.UnknownTopicOrPartitionError.code
                by_id = {s.producer_id: s for s in p.active_producers}
                assert len(by_id) == 2
                idem = next(s for s in by_id.values() if s.current_txn_start_offset == -1)
                open_txn = next(s for s in by_id.values() if s.current_txn_start_offset >= 0)
                assert (idem.last_sequence, open_txn.last_sequence) == (4, 2)
                assert open_txn.current_txn_start_offset == 5   # after the 5 plain records
                assert idem.last_timestamp > 0 and open_txn.producer_epoch >= 0
                other = await describe(cluster.broker(follower).port, "described", [0])
                assert other.topics[0].partitions[0].error_code == \
                    errors.NotLeaderOrFollowerError.code
                await txn.abort_transaction()

    asyncio.run(main())
