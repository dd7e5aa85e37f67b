"""acks=all answers as Kafka's DelayedProduce: a write is acknowledged only when the
high watermark covers it *and* the ISR still holds ``min.insync.replicas`` replicas.

Found reading a librdkafka duplicate of the group soak (docs/reliability.md): kaflite
acknowledged an acks=all write as soon as the high watermark covered it, even when the
ISR had shrunk to the leader alone, which moves the high watermark to the leader's log
end at once. The write then lived on one replica while min.insync.replicas=2 had been
promised, and a crash of that broker lost it. Kafka's
``Partition.checkEnoughReplicasReachOffset`` answers NOT_ENOUGH_REPLICAS_AFTER_APPEND.
"""

from __future__ import annotations

import asyncio

from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import ProduceRequest, ProduceResponse
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch


def _produce(cluster: Cluster, node: int, topic: str) -> int:
    async def send() -> ProduceResponse:
        conn = await BrokerConnection("127.0.0.1", cluster.broker(node).port,
                                      client_id="acks-all").open()
        try:
            resp: ProduceResponse = await conn.request(ProduceRequest(
                acks=-1, timeout_ms=20000, topic_data=[pq.TopicProduceData(
                    name=topic, partition_data=[pq.PartitionProduceData(
                        0, encode_batch([b"v"], [b"k"]))])]), timeout=40)
            return resp
        finally:
            conn.close()
    return asyncio.run(send()).responses[0].partition_responses[0].error_code


def test_a_write_the_isr_shrank_under_is_not_acknowledged() -> None:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 500}) as cluster:
        cluster.create_topic("durable", 1, 3, configs={"min.insync.replicas": "2"})
        state = cluster.controller.partition("durable", 0)
        assert state is not None
        leader = state.leader
        assert _produce(cluster, leader, "durable") == 0          # whole ISR: acknowledged
        for follower in (r for r in state.replicas if r != leader):
            cluster.faults.isolate_replication(follower)
        # the followers stop fetching; the ISR shrinks to the leader, whose high
        # watermark then covers the write: still not enough replicas
        code = _produce(cluster, leader, "durable")
        assert code == errors.NotEnoughReplicasAfterAppendError.code, code
        after = cluster.controller.partition("durable", 0)
        assert after is not None and after.isr == [leader]
