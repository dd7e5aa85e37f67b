"""DescribeTopicPartitions (key 75, KIP-966): topics' partitions a page at a time.

What Kafka 4's ``Admin.describeTopics`` (and so ``kafka-topics --describe``) sends
when a broker offers it, instead of Metadata: the topics named, or every topic when
none is, sorted by name, from the request's cursor (a topic, and the partition to
start at) for at most ``response_partition_limit`` partitions, capped by the
broker's ``max.request.partition.size.limit`` (2,000). A page that stops inside a
topic, or at the end of one with more to come, answers the cursor of the next
partition. Each partition as Metadata reports it (``metadata.topic_metadata``:
leader, epoch, replicas, ISR, offline replicas, LEADER_NOT_AVAILABLE without a
leader); kaflite has no eligible leader replicas (KIP-966's ELR), so those lists
are empty. As Kafka's ``DescribeTopicPartitionsRequestHandler``: a cursor naming a
topic the request does not list is INVALID_REQUEST; a named topic that does not
exist is UNKNOWN_TOPIC_OR_PARTITION and one the caller may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED, while a request for every topic leaves both kinds out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.acl import NOT_REQUESTED, allows, authorized_operations
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers.metadata import topic_metadata
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kaflite.protocol.messages import describe_topic_partitions_response as dtp
from kaflite.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "PARTITION_LIMIT"]

PARTITION_LIMIT = 2000      # Kafka's max.request.partition.size.limit default


def _topic(broker: Broker, conn: ServerConnection, name: str, start: int, room: int
           ) -> tuple[dtp.DescribeTopicPartitionsResponseTopic, int]:
    """The topic's partitions from ``start``, at most ``room``; and how many it had."""
    md = topic_metadata(broker, broker.controller.topics[name])
    parts = [dtp.DescribeTopicPartitionsResponsePartition(
        error_code=p.error_code, partition_index=p.partition_index, leader_id=p.leader_id,
        leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes,
        eligible_leader_replicas=[], last_known_elr=[], offline_replicas=p.offline_replicas)
        for p in md.partitions[start:start + room]]
    return dtp.DescribeTopicPartitionsResponseTopic(
        error_code=0, name=name, topic_id=md.topic_id, is_internal=md.is_internal,
        partitions=parts, topic_authorized_operations=authorized_operations(
            broker, conn, ResourceType.TOPIC, name)), len(md.partitions)


async def handle_describe_topic_partitions(
        broker: Broker, conn: ServerConnection, header: RequestHeader,
        req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    named = sorted({t.name for t in req.topics})
    every = not named
    cursor = req.cursor
    if cursor is not None and not every and cursor.topic_name not in named:
        # as Kafka's error response to the InvalidRequestException it throws
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[
            dtp.DescribeTopicPartitionsResponseTopic(
                error_code=errors.InvalidRequestError.code, name=name, partitions=[],
                topic_authorized_operations=NOT_REQUESTED) for name in named])
    known = broker.controller.topics
    after = cursor.topic_name if cursor is not None else ""
    names = [n for n in (sorted(known) if every else named) if n >= after]
    room = min(req.response_partition_limit, PARTITION_LIMIT)
    out: list[dtp.DescribeTopicPartitionsResponseTopic] = []
    next_cursor = None
    for name in names:
        described = allows(broker, conn, AclOperation.DESCRIBE, ResourceType.TOPIC, name)
        if name not in known or not described:
            if not every:
                code = errors.UnknownTopicOrPartitionError.code if described \
                    else errors.TopicAuthorizationFailedError.code
                out.append(dtp.DescribeTopicPartitionsResponseTopic(
                    error_code=code, name=name, partitions=[],
                    topic_authorized_operations=NOT_REQUESTED))
            continue
        if room <= 0:
            next_cursor = dtp.Cursor(name, 0)
            break
        start = cursor.partition_index if cursor is not None and name == after else 0
        topic, total = _topic(broker, conn, name, start, room)
        out.append(topic)
        room -= len(topic.partitions)
        if start + len(topic.partitions) < total:
            next_cursor = dtp.Cursor(name, start + len(topic.partitions))
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=out,
                                           next_cursor=next_cursor)


HANDLERS = [Handler(DescribeTopicPartitionsRequest, 0, 0, handle_describe_topic_partitions)]
