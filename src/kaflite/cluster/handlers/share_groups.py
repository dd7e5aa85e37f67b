"""Share groups (KIP-932) on the group coordinator: ShareGroupHeartbeat (76) and
ShareGroupDescribe (77), in Kafka 4.2's versions (v1; v0 was Kafka 4.0's early
access and is served too, its fields being the same).

The heartbeat is answered by the group's coordinator shard
(``kaflite.cluster.groups._share``); a broker that does not coordinate the group
answers NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS while loading).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from kaflite.cluster import features
from kaflite.cluster.acl import NOT_REQUESTED
from kaflite.cluster.groups._share import ShareGroup
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers.groups import (
    client_host,
    describe_each,
    shard_for,
)
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kaflite.protocol.messages import share_group_describe_response as sgdr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.groups import CoordinatorShard
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "describe_share_group"]



async def handle_share_group_heartbeat(broker: Broker, conn: ServerConnection,
                                       header: RequestHeader, req: ShareGroupHeartbeatRequest
                                       ) -> ShareGroupHeartbeatResponse:
    try:
        features.require_share_groups(broker.controller)
        shard = shard_for(broker, conn, req.group_id, label=False)   # the registry labels it
    except errors.KafkaError as exc:
        return ShareGroupHeartbeatResponse(error_code=exc.code, error_message=exc.message)
    return await shard.share.heartbeat(header.client_id or "", client_host(conn), req)


def _assignment(shard: CoordinatorShard, group: ShareGroup,
                assignment: dict[uuid.UUID, frozenset[int]]) -> sgdr.Assignment:
    names = {t.topic_id: t.name for t in group.subscription_metadata.values()}

    def name_of(topic_id: uuid.UUID) -> str:
        return names.get(topic_id) or shard.consumer.topics.name_of(topic_id) or ""

    return sgdr.Assignment(topic_partitions=[
        sgdr.TopicPartitions(topic_id=t, topic_name=name_of(t), partitions=sorted(ps))
        for t, ps in sorted(assignment.items(), key=lambda kv: name_of(kv[0])) if ps])


def describe_share_group(shard: CoordinatorShard, group_id: str,
                         operations: int = NOT_REQUESTED) -> sgdr.DescribedGroup:
    """One group as ShareGroupDescribe answers it (also used by tools)."""
    try:
        group = shard.share.share_group(group_id)
    except errors.KafkaError as exc:
        return sgdr.DescribedGroup(error_code=exc.code, error_message=exc.message,
                                   group_id=group_id, authorized_operations=operations)
    return sgdr.DescribedGroup(
        error_code=0, group_id=group_id, group_state=group.state,
        group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
        assignor_name="simple", authorized_operations=operations,
        members=[sgdr.Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=list(m.subscribed_topic_names),
            assignment=_assignment(shard, group, dict(m.assigned)))
            for m in group.members.values()])


async def handle_share_group_describe(broker: Broker, conn: ServerConnection,
                                      header: RequestHeader, req: ShareGroupDescribeRequest
                                      ) -> ShareGroupDescribeResponse:
    try:
        features.require_share_groups(broker.controller)
    except errors.KafkaError as exc:
        return ShareGroupDescribeResponse(throttle_time_ms=0, groups=[
            sgdr.DescribedGroup(error_code=exc.code, error_message=exc.message, group_id=g)
            for g in req.group_ids])
    groups = describe_each(
        broker, conn, req.group_ids, req.include_authorized_operations,
        lambda code, gid, ops: sgdr.DescribedGroup(error_code=code, group_id=gid,
                                                  authorized_operations=ops),
        describe_share_group)
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)


HANDLERS = [
    Handler(ShareGroupHeartbeatRequest, 0, 1, handle_share_group_heartbeat),
    Handler(ShareGroupDescribeRequest, 0, 1, handle_share_group_describe),
]
