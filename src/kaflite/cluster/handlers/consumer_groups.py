"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69).

The heartbeat is answered by the group's coordinator shard
(``kaflite.cluster.groups._consumer``) once the records it produced are
committed to ``__consumer_offsets``. A request that reaches a broker which does
not coordinate the group gets NOT_COORDINATOR, or COORDINATOR_LOAD_IN_PROGRESS
while the shard still loads, as Kafka answers, and the client looks for the
coordinator again.

Versions are Kafka 4.0's: ConsumerGroupHeartbeat v0-v1 (v1 adds
``SubscribedTopicRegex`` and requires a client-generated member id, KIP-1082),
ConsumerGroupDescribe v0. ``group.coordinator.rebalance.protocols`` without
``consumer`` turns the heartbeat off (UNSUPPORTED_VERSION).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kaflite.cluster import features
from kaflite.cluster.acl import NOT_REQUESTED, allows
from kaflite.cluster.groups._consumer_group import Assignment, ConsumerGroup
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers.groups import (
    client_host,
    describe_each,
    shard_for,
)
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kaflite.protocol.messages import consumer_group_describe_response as cgdr
from kaflite.security.acl import AclOperation, ResourceType

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.groups import CoordinatorShard
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "describe_consumer_group"]



async def handle_consumer_group_heartbeat(broker: Broker, conn: ServerConnection,
                                          header: RequestHeader,
                                          req: ConsumerGroupHeartbeatRequest
                                          ) -> ConsumerGroupHeartbeatResponse:
    version = header.request_api_version
    try:
        shard = shard_for(broker, conn, req.group_id)
    except errors.KafkaError as exc:
        return ConsumerGroupHeartbeatResponse(error_code=exc.code, error_message=exc.message)
    if not shard.config.consumer.protocol_enabled \
            or features.level(broker.controller, "group.version") < 1:
        return ConsumerGroupHeartbeatResponse(
            error_code=errors.UnsupportedVersionError.code,
            error_message="The new consumer group protocol is not enabled.")
    def may_describe(topic: str) -> bool:
        return allows(broker, conn, AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    return await shard.consumer.heartbeat(header.client_id or "", client_host(conn), req, version,
                                          may_describe)


def _assignment(shard: CoordinatorShard, group: ConsumerGroup,
                assignment: Assignment) -> cgdr.Assignment:
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}

    def name_of(topic_id: uuid.UUID) -> str:
        return names.get(topic_id) or shard.consumer.topics.name_of(topic_id) or ""

    return cgdr.Assignment(topic_partitions=[
        cgdr.TopicPartitions(topic_id=t, topic_name=name_of(t), partitions=sorted(ps))
        for t, ps in sorted(assignment.items(), key=lambda kv: name_of(kv[0])) if ps])


def describe_consumer_group(shard: CoordinatorShard, group_id: str,
                            operations: int = NOT_REQUESTED) -> cgdr.DescribedGroup:
    """One group as ConsumerGroupDescribe answers it (also used by tools)."""
    try:
        group = shard.consumer.consumer_group(group_id)
    except errors.KafkaError as exc:
        return cgdr.DescribedGroup(error_code=exc.code, error_message=exc.message, group_id=group_id,
                                   authorized_operations=operations)
    cfg = shard.config.consumer
    assignor = group.preferred_assignor(cfg.assignors[0])
    return cgdr.DescribedGroup(
        error_code=0, group_id=group_id, group_state=str(group.state),
        group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
        assignor_name=assignor if assignor in cfg.assignors else cfg.assignors[0],
        authorized_operations=operations,
        members=[cgdr.Member(
            member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
            member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            subscribed_topic_regex=m.subscribed_topic_regex,
            assignment=_assignment(shard, group, m.assigned),
            target_assignment=_assignment(shard, group, group.target.get(m.member_id, {})),
            # v1 (KIP-1099): 0 for a member on the classic protocol, 1 for a consumer one
            member_type=0 if m.uses_classic_protocol else 1)
            for m in group.members.values()])


async def handle_consumer_group_describe(broker: Broker, conn: ServerConnection,
                                         header: RequestHeader,
                                         req: ConsumerGroupDescribeRequest
                                         ) -> ConsumerGroupDescribeResponse:
    groups = describe_each(
        broker, conn, req.group_ids, req.include_authorized_operations,
        lambda code, gid, ops: cgdr.DescribedGroup(error_code=code, group_id=gid,
                                                  authorized_operations=ops),
        describe_consumer_group)
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)


HANDLERS = [
    Handler(ConsumerGroupHeartbeatRequest, 0, 1, handle_consumer_group_heartbeat),
    Handler(ConsumerGroupDescribeRequest, 0, 1, handle_consumer_group_describe),
]
