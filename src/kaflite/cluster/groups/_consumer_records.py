"""KIP-848 records of ``__consumer_offsets`` and how each one changes a consumer group.

Kafka 4.0 writes a consumer group as six record types, told apart by their
key's version (the record type):

====  ===================================  =========================================
type  key (value)                           what it holds
====  ===================================  =========================================
3     ConsumerGroupMetadata                 the group epoch
4     ConsumerGroupPartitionMetadata        the subscribed topics: id, name, partitions
5     ConsumerGroupMemberMetadata           a member's subscription and client facts
6     ConsumerGroupTargetAssignmentMetadata the assignment epoch
7     ConsumerGroupTargetAssignmentMember   a member's target assignment
8     ConsumerGroupCurrentMemberAssignment  a member's epochs, state and partitions
====  ===================================  =========================================

A tombstone (null value) deletes what its key names. Values are written at
version 0, with the int16 version prefix of every coordinator record.

``replay`` is the only way a consumer group changes: the coordinator turns a
request into records, replays them, and writes them; the loader replays the
same records from the log. So a restart rebuilds exactly the served state.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace

from kaflite.cluster.groups._consumer_group import (
    Assignment,
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicMeta,
)
from kaflite.cluster.groups._group import ClassicGroup
from kaflite.cluster.groups._records import CoordinatorRecord
from kaflite.protocol.messages import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kaflite.protocol.messages import consumer_group_current_member_assignment_value as cmav
from kaflite.protocol.messages import consumer_group_member_metadata_value as mmv
from kaflite.protocol.messages import consumer_group_partition_metadata_value as pmv
from kaflite.protocol.messages import consumer_group_target_assignment_member_value as tamv

__all__ = [
    "CONSUMER_RECORD_TYPES",
    "ConsumerRecord",
    "current_assignment",
    "decode_consumer_record",
    "group_epoch",
    "member_metadata",
    "member_tombstones",
    "partition_metadata",
    "replay",
    "replay_consumer",
    "target_epoch",
    "target_member",
]

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 6, 7, 8
CONSUMER_RECORD_TYPES = frozenset(range(3, 9))


class ConsumerRecord(CoordinatorRecord):
    """A KIP-848 consumer-group record (types 3 to 8)."""

    KEYS = {
        GROUP_METADATA: ConsumerGroupMetadataKey,
        PARTITION_METADATA: ConsumerGroupPartitionMetadataKey,
        MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
        TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
        TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
        CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
    }
    VALUES = {
        GROUP_METADATA: ConsumerGroupMetadataValue,
        PARTITION_METADATA: ConsumerGroupPartitionMetadataValue,
        MEMBER_METADATA: ConsumerGroupMemberMetadataValue,
        TARGET_METADATA: ConsumerGroupTargetAssignmentMetadataValue,
        TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberValue,
        CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentValue,
    }


decode_consumer_record = ConsumerRecord.decode


# -- record builders ----------------------------------------------------------------------------
def group_epoch(group_id: str, epoch: int | None) -> ConsumerRecord:
    value = None if epoch is None else ConsumerGroupMetadataValue(epoch=epoch)
    return ConsumerRecord(GROUP_METADATA, group_id, None, value)


def partition_metadata(group_id: str, topics: Mapping[str, TopicMeta] | None) -> ConsumerRecord:
    value = None if topics is None else ConsumerGroupPartitionMetadataValue(topics=[
        pmv.TopicMetadata(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.partitions)
        for t in sorted(topics.values(), key=lambda t: t.name)])
    return ConsumerRecord(PARTITION_METADATA, group_id, None, value)


def member_metadata(group_id: str, m: ConsumerMember) -> ConsumerRecord:
    classic = None
    if m.classic is not None:
        classic = mmv.ClassicMemberMetadata(
            session_timeout_ms=m.classic.session_timeout_ms,
            supported_protocols=[mmv.ClassicProtocol(name=n, metadata=d)
                                 for n, d in m.classic.protocols])
    value = ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
        client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
        classic_member_metadata=classic)
    return ConsumerRecord(MEMBER_METADATA, group_id, m.member_id, value)


def target_epoch(group_id: str, epoch: int | None) -> ConsumerRecord:
    value = None if epoch is None else ConsumerGroupTargetAssignmentMetadataValue(
        assignment_epoch=epoch)
    return ConsumerRecord(TARGET_METADATA, group_id, None, value)


def target_member(group_id: str, member_id: str, assignment: Assignment | None
                  ) -> ConsumerRecord:
    value = None if assignment is None else ConsumerGroupTargetAssignmentMemberValue(
        topic_partitions=[tamv.TopicPartition(topic_id=t, partitions=sorted(ps))
                          for t, ps in sorted(assignment.items()) if ps])
    return ConsumerRecord(TARGET_MEMBER, group_id, member_id, value)


def current_assignment(group_id: str, m: ConsumerMember) -> ConsumerRecord:
    def tps(a: Assignment) -> list[cmav.TopicPartitions]:
        out = []
        for t, ps in sorted(a.items()):
            if ps:
                order = sorted(ps)
                out.append(cmav.TopicPartitions(
                    topic_id=t, partitions=order,
                    assignment_epochs=[m.given_at(t, p) for p in order]))
        return out

    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
        state=int(m.state), assigned_partitions=tps(m.assigned),
        partitions_pending_revocation=tps(m.pending_revocation))
    return ConsumerRecord(CURRENT_ASSIGNMENT, group_id, m.member_id, value)


def member_tombstones(group_id: str, member_id: str) -> list[ConsumerRecord]:
    """Kafka's ``removeMember``: current assignment, target, then metadata (order matters)."""
    return [ConsumerRecord(CURRENT_ASSIGNMENT, group_id, member_id, None),
            ConsumerRecord(TARGET_MEMBER, group_id, member_id, None),
            ConsumerRecord(MEMBER_METADATA, group_id, member_id, None)]


def group_tombstones(group: ConsumerGroup) -> list[ConsumerRecord]:
    """Kafka's ``createGroupTombstoneRecords``: every member, then the group's own records."""
    gid = group.group_id
    out = [ConsumerRecord(CURRENT_ASSIGNMENT, gid, m, None) for m in group.members]
    out += [ConsumerRecord(TARGET_MEMBER, gid, m, None) for m in group.members]
    out.append(target_epoch(gid, None))
    out += [ConsumerRecord(MEMBER_METADATA, gid, m, None) for m in group.members]
    out += [partition_metadata(gid, None), group_epoch(gid, None)]
    return out


def _assignment_epochs(*lists: list[cmav.TopicPartitions]) -> dict[tuple[uuid.UUID, int], int]:
    """The AssignmentEpochs a record carries (Kafka 4.4); older records carry none."""
    return {(tp.topic_id, p): e for tps in lists for tp in tps
            if len(tp.assignment_epochs) == len(tp.partitions)
            for p, e in zip(tp.partitions, tp.assignment_epochs, strict=True)}


# -- replay -------------------------------------------------------------------------------------
def _assignment(tps: list[cmav.TopicPartitions] | list[tamv.TopicPartition]
                ) -> dict[uuid.UUID, frozenset[int]]:
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in tps:
        if tp.partitions:
            out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def replay_consumer(groups: dict[str, ConsumerGroup], classic: dict[str, ClassicGroup],
                    rec: ConsumerRecord) -> None:
    """Replay while loading: a consumer-group record for an id that was a classic group
    means that group was converted (its tombstone came first, or it was a simple group)."""
    if rec.value is not None:
        classic.pop(rec.group_id, None)
    replay(groups, rec)


def replay(groups: dict[str, ConsumerGroup], rec: ConsumerRecord) -> None:
    """Apply one record to the shard's consumer groups."""
    gid, mid, value = rec.group_id, rec.member_id, rec.value
    group = groups.get(gid)
    if value is None:
        if group is None:
            return
        if rec.kind == GROUP_METADATA:
            del groups[gid]
            group.dead = True
        elif rec.kind == PARTITION_METADATA:
            group.subscription_metadata = {}
        elif rec.kind == MEMBER_METADATA and mid is not None:
            group.remove_member(mid)
        elif rec.kind == TARGET_MEMBER and mid is not None:
            group.target.pop(mid, None)
        elif rec.kind == CURRENT_ASSIGNMENT and mid is not None:
            old = group.members.get(mid)
            if old is not None:
                group.put_member(replace(old, member_epoch=-1, previous_member_epoch=-1,
                                         state=MemberState.STABLE, assigned={},
                                         pending_revocation={}))
        return
    if group is None:
        group = groups[gid] = ConsumerGroup(gid)
    if isinstance(value, ConsumerGroupMetadataValue):
        group.group_epoch = value.epoch
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        group.subscription_metadata = {
            t.topic_name: TopicMeta(t.topic_id, t.topic_name, t.num_partitions)
            for t in value.topics}
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        group.assignment_epoch = value.assignment_epoch
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue) and mid is not None:
        group.target[mid] = _assignment(value.topic_partitions)
    elif isinstance(value, ConsumerGroupMemberMetadataValue) and mid is not None:
        old = group.members.get(mid) or ConsumerMember(mid)
        c = value.classic_member_metadata
        classic = None if c is None else ClassicInfo(
            c.session_timeout_ms, tuple((p.name, bytes(p.metadata)) for p in c.supported_protocols))
        group.put_member(replace(
            old, instance_id=value.instance_id or None, rack_id=value.rack_id or None,
            client_id=value.client_id, client_host=value.client_host,
            subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex or None,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor or None, classic=classic))
    elif isinstance(value, ConsumerGroupCurrentMemberAssignmentValue) and mid is not None:
        old = group.members.get(mid) or ConsumerMember(mid)
        try:
            state = MemberState(value.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.put_member(replace(
            old, member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch, state=state,
            assigned=_assignment(value.assigned_partitions),
            pending_revocation=_assignment(value.partitions_pending_revocation),
            epochs=_assignment_epochs(value.assigned_partitions,
                                      value.partitions_pending_revocation)))
