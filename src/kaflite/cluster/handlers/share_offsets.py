"""The share-group offset admin APIs, on the group coordinator:
DescribeShareGroupOffsets (90, v0-v1), AlterShareGroupOffsets (91) and
DeleteShareGroupOffsets (92), in Kafka 4.2's versions.

A share group's "offset" on a partition is its share-partition start offset
(SPSO), kept by the share coordinator in ``__share_group_state``; the group
coordinator reads it with ReadShareGroupStateSummary. Without topics, Describe
covers the partitions the group has state for (its ShareGroupStatePartitionMetadata).
v1 adds the lag: the records from the SPSO to the high watermark not yet
acknowledged or archived (-1 where this broker has no replica to tell the high
watermark). As Kafka's, Describe does not look for the group: a group id with no
share group answers no partitions (all of them asked) or the share coordinator's
summaries (named ones), without an error.

Alter and Delete need an empty group (NON_EMPTY_GROUP otherwise); Alter makes the
group if there is none, as Kafka does (a group of another type is GROUP_ID_NOT_FOUND). Alter starts
the partition over at the given offset under a new state epoch
(InitializeShareGroupState); a partition leader still caching the old state is
fenced (FENCED_STATE_EPOCH) on its next write and reloads. Delete removes the
state of whole topics (DeleteShareGroupState).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster import features
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers.groups import shard_for
from kaflite.cluster.share._partition import RecordState
from kaflite.cluster.share._persister import PersistedState
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from kaflite.protocol.messages import alter_share_group_offsets_response as asr
from kaflite.protocol.messages import delete_share_group_offsets_response as dlr
from kaflite.protocol.messages import describe_share_group_offsets_response as dsr
from kaflite.protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.groups import CoordinatorShard
    from kaflite.cluster.groups._share_group import ShareGroup
    from kaflite.cluster.network import ServerConnection
    from kaflite.cluster.share import SharePartitionManager

__all__ = ["HANDLERS", "lag"]


def lag(broker: Broker, topic: str, index: int, state: PersistedState) -> int:
    """Records from the SPSO to the high watermark that are not done with (-1: unknown)."""
    p = broker.partitions.get((topic, index))
    if p is None:
        return -1
    hw = p.high_watermark
    done = sum(min(b.last + 1, hw) - max(b.first, state.start_offset)
               for b in state.batches
               if b.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
               and b.last >= state.start_offset and b.first < hw)
    return max(hw - state.start_offset - done, 0)


def _share_group(broker: Broker, conn: ServerConnection, group_id: str, create: bool = False
                 ) -> tuple[CoordinatorShard, ShareGroup, SharePartitionManager]:
    shard = shard_for(broker, conn, group_id, label=False)
    if broker.share is None:
        raise errors.CoordinatorNotAvailableError("share groups are not running")
    return shard, shard.share.share_group(group_id, create), broker.share


def _empty_share_group(broker: Broker, conn: ServerConnection, group_id: str,
                       create: bool = False
                       ) -> tuple[CoordinatorShard, ShareGroup, SharePartitionManager]:
    """A share group whose offsets may change: Kafka refuses while it has members."""
    features.require_share_groups(broker.controller)
    found = _share_group(broker, conn, group_id, create)
    if found[1].members:
        raise errors.NonEmptyGroupError(f"Share group {group_id} is not empty.")
    return found


async def handle_describe(broker: Broker, conn: ServerConnection, header: RequestHeader,
                          req: DescribeShareGroupOffsetsRequest
                          ) -> DescribeShareGroupOffsetsResponse:
    version = header.request_api_version
    out = []
    for g in req.groups:
        row = dsr.DescribeShareGroupOffsetsResponseGroup(group_id=g.group_id)
        try:
            features.require_share_groups(broker.controller)
            shard = shard_for(broker, conn, g.group_id, label=False)
            if broker.share is None:
                raise errors.CoordinatorNotAvailableError("share groups are not running")
        except errors.KafkaError as exc:
            row.error_code, row.error_message = exc.code, exc.message
            out.append(row)
            continue
        mgr = broker.share
        # As Kafka's GroupCoordinatorService: no check that the group exists (or is a
        # share group); one without state has no partitions to list.
        group = shard.share.groups.get(g.group_id)
        if g.topics is None:
            wanted = []
            initialized = group.initialized if group is not None else {}
            for topic_id, ps in sorted(initialized.items(), key=lambda kv: str(kv[0])):
                topic = broker.controller.topics_by_id.get(topic_id)
                if topic is not None:
                    wanted.append((topic.name, sorted(ps)))
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
        for name, partitions in wanted:
            topic = broker.controller.topics.get(name)
            trow = dsr.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=topic.topic_id if topic is not None else
                ZERO_UUID)
            for index in partitions:
                prow = dsr.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=index, start_offset=-1, leader_epoch=-1)
                if topic is None or not 0 <= index < len(topic.partitions):
                    prow.error_code = errors.UnknownTopicOrPartitionError.code
                else:
                    try:
                        state = await mgr.persister.summary(g.group_id, topic.topic_id, index)
                    except errors.KafkaError as exc:
                        prow.error_code, prow.error_message = exc.code, exc.message
                        state = None
                    if state is not None:
                        prow.start_offset = state.start_offset
                        prow.leader_epoch = state.leader_epoch
                        if version >= 1:
                            prow.lag = lag(broker, name, index, state)
                trow.partitions.append(prow)
            row.topics.append(trow)
        out.append(row)
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=out)


async def handle_alter(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    try:   # the group is made if there is none (Kafka 4.4's alterShareGroupOffsets)
        shard, group, mgr = _empty_share_group(broker, conn, req.group_id, create=True)
    except errors.KafkaError as exc:
        return AlterShareGroupOffsetsResponse(error_code=exc.code, error_message=exc.message)
    responses = []
    grown = False
    for t in req.topics:
        topic = broker.controller.topics.get(t.topic_name)
        trow = asr.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=topic.topic_id if topic is not None
            else ZERO_UUID)
        for p in t.partitions:
            prow = asr.AlterShareGroupOffsetsResponsePartition(partition_index=p.partition_index)
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                prow.error_code = errors.UnknownTopicOrPartitionError.code
            elif p.start_offset < 0:
                prow.error_code = errors.InvalidRequestError.code
                prow.error_message = "The start offset must not be negative."
            else:
                try:
                    old = await mgr.persister.summary(req.group_id, topic.topic_id,
                                                      p.partition_index)
                    epoch = 0 if old is None else old.state_epoch + 1
                    prow.error_code = await mgr.persister.initialize(
                        req.group_id, topic.topic_id, p.partition_index, epoch, p.start_offset)
                except errors.KafkaError as exc:
                    prow.error_code, prow.error_message = exc.code, exc.message
                if not prow.error_code:
                    have = group.initialized.setdefault(topic.topic_id, set())
                    grown = grown or p.partition_index not in have
                    have.add(p.partition_index)
            trow.partitions.append(prow)
        responses.append(trow)
    if grown:
        await shard.share.record_initialized(group)
    else:
        shard.share.drop_if_blank(req.group_id)
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, responses=responses)


async def handle_delete(broker: Broker, conn: ServerConnection, header: RequestHeader,
                        req: DeleteShareGroupOffsetsRequest) -> DeleteShareGroupOffsetsResponse:
    try:
        shard, group, mgr = _empty_share_group(broker, conn, req.group_id)
    except errors.KafkaError as exc:
        return DeleteShareGroupOffsetsResponse(error_code=exc.code, error_message=exc.message)
    responses = []
    for t in req.topics:
        topic = broker.controller.topics.get(t.topic_name)
        row = dlr.DeleteShareGroupOffsetsResponseTopic(topic_name=t.topic_name)
        if topic is None:
            row.error_code = errors.UnknownTopicOrPartitionError.code
            responses.append(row)
            continue
        row.topic_id = topic.topic_id
        for index in sorted(group.initialized.get(topic.topic_id, set())):
            code = await mgr.forget(req.group_id, topic.topic_id, index)
            row.error_code = row.error_code or code
        if not row.error_code:
            group.initialized.pop(topic.topic_id, None)
        responses.append(row)
    await shard.share.record_initialized(group)
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, responses=responses)


HANDLERS = [
    Handler(DescribeShareGroupOffsetsRequest, 0, 1, handle_describe),
    Handler(AlterShareGroupOffsetsRequest, 0, 0, handle_alter),
    Handler(DeleteShareGroupOffsetsRequest, 0, 0, handle_delete),
]
