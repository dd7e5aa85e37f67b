"""DescribeProducers (key 61): the producers a partition leader knows, as
``kafka-transactions describe-producers`` and ``Admin.describeProducers`` show them.

For each partition asked, from its log's producer state (``PartitionLog.producer_state``,
the same state that deduplicates and fences): each producer id with its epoch, last
sequence, last timestamp, coordinator epoch and the first offset of its open
transaction (-1 without one). As Kafka's ``ReplicaManager.activeProducerState``: only
the leader answers (a follower or a broker without the replica NOT_LEADER_OR_FOLLOWER,
a partition that does not exist UNKNOWN_TOPIC_OR_PARTITION); as ``KafkaApis``, the
caller needs READ on the topic, or gets TOPIC_AUTHORIZATION_FAILED on its partitions
(checked here, per topic, so ``kaflite.cluster.acl``'s table does not list it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.acl import allows
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import DescribeProducersRequest, DescribeProducersResponse
from kaflite.protocol.messages import describe_producers_response as dp
from kaflite.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]


def _partition(broker: Broker, topic: str, index: int) -> dp.PartitionResponse:
    p = broker.partitions.get((topic, index))
    if p is None or not p.is_leader:
        known = broker.controller.topics.get(topic)
        code = errors.NotLeaderOrFollowerError.code \
            if known is not None and 0 <= index < len(known.partitions) \
            else errors.UnknownTopicOrPartitionError.code
        return dp.PartitionResponse(partition_index=index, error_code=code)
    return dp.PartitionResponse(partition_index=index, error_code=0, active_producers=[
        dp.ProducerState(producer_id=s.producer_id, producer_epoch=s.producer_epoch,
                         last_sequence=s.last_sequence, last_timestamp=s.last_timestamp,
                         coordinator_epoch=s.coordinator_epoch,
                         current_txn_start_offset=s.current_txn_start_offset)
        for s in p.log.producer_state()])


async def handle_describe_producers(broker: Broker, conn: ServerConnection,
                                    header: RequestHeader,
                                    req: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = []
    for t in req.topics:
        if allows(broker, conn, AclOperation.READ, ResourceType.TOPIC, t.name):
            parts = [_partition(broker, t.name, i) for i in t.partition_indexes]
        else:
            parts = [dp.PartitionResponse(
                partition_index=i, error_code=errors.TopicAuthorizationFailedError.code)
                for i in t.partition_indexes]
        topics.append(dp.TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)


HANDLERS = [Handler(DescribeProducersRequest, 0, 0, handle_describe_producers)]
