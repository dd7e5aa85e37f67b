"""Share groups in ``__consumer_offsets``, in Kafka's record formats.

Kafka's coordinator writes a share group as records keyed by type: 9
ShareGroupPartitionMetadata, 10 ShareGroupMemberMetadata, 11 ShareGroupMetadata
(the group epoch), 12 and 13 the target assignment, 14
ShareGroupCurrentMemberAssignment and 15 ShareGroupStatePartitionMetadata (the
partitions whose share state is initialized). kaflite writes 10, 11, 14 and 15
(what is needed to load a group back: its epoch, its members with their
subscriptions and assignments, and its initialized partitions); the target
assignment is computed again from those when the group is loaded. Every
record goes through ``replay``, live and when loading alike.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import replace

from kaflite.cluster.groups._records import CoordinatorRecord
from kaflite.cluster.groups._share_group import ShareGroup, ShareMember
from kaflite.protocol.messages import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
)
from kaflite.protocol.messages import share_group_current_member_assignment_value as scav
from kaflite.protocol.messages import share_group_state_partition_metadata_value as sspm

__all__ = ["SHARE_RECORD_TYPES", "ShareRecord", "decode_share_record", "replay_share"]

MEMBER_METADATA, GROUP_METADATA, CURRENT_ASSIGNMENT, STATE_PARTITIONS = 10, 11, 14, 15
SHARE_RECORD_TYPES = frozenset({MEMBER_METADATA, GROUP_METADATA, CURRENT_ASSIGNMENT,
                                STATE_PARTITIONS})


class ShareRecord(CoordinatorRecord):
    """A share-group record (types 10, 11, 14 and 15)."""

    KEYS = {
        GROUP_METADATA: ShareGroupMetadataKey, MEMBER_METADATA: ShareGroupMemberMetadataKey,
        CURRENT_ASSIGNMENT: ShareGroupCurrentMemberAssignmentKey,
        STATE_PARTITIONS: ShareGroupStatePartitionMetadataKey,
    }
    VALUES = {
        GROUP_METADATA: ShareGroupMetadataValue, MEMBER_METADATA: ShareGroupMemberMetadataValue,
        CURRENT_ASSIGNMENT: ShareGroupCurrentMemberAssignmentValue,
        STATE_PARTITIONS: ShareGroupStatePartitionMetadataValue,
    }
    # Kafka 4.0's layouts (as kaflite wrote them before): 4.1 added MetadataHash after
    # the epoch, and InitializingTopics ahead of the initialized ones.
    UPGRADES = {
        GROUP_METADATA: lambda body: bytes(body[:4]) + bytes(8) + bytes(body[4:]),
        STATE_PARTITIONS: lambda body: b"\x01" + bytes(body),   # an empty compact array
    }


decode_share_record = ShareRecord.decode


# -- builders ---------------------------------------------------------------------------------
def group_epoch(group_id: str, epoch: int | None) -> ShareRecord:
    return ShareRecord(GROUP_METADATA, group_id, None,
                       None if epoch is None else ShareGroupMetadataValue(epoch=epoch,
                                                                          metadata_hash=0))


def member_metadata(group_id: str, m: ShareMember) -> ShareRecord:
    return ShareRecord(MEMBER_METADATA, group_id, m.member_id, ShareGroupMemberMetadataValue(
        rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names)))


def current_assignment(group_id: str, m: ShareMember) -> ShareRecord:
    return ShareRecord(CURRENT_ASSIGNMENT, group_id, m.member_id,
                       ShareGroupCurrentMemberAssignmentValue(
                           member_epoch=m.member_epoch,
                           previous_member_epoch=m.previous_member_epoch, state=0,
                           assigned_partitions=[scav.TopicPartitions(t, sorted(ps))
                                                for t, ps in sorted(m.assigned.items()) if ps]))


def member_tombstones(group_id: str, member_id: str) -> list[ShareRecord]:
    return [ShareRecord(CURRENT_ASSIGNMENT, group_id, member_id, None),
            ShareRecord(MEMBER_METADATA, group_id, member_id, None)]


def state_partitions(group_id: str, initialized: Mapping[uuid.UUID, set[int]] | None,
                     names: Mapping[uuid.UUID, str]) -> ShareRecord:
    if initialized is None:
        return ShareRecord(STATE_PARTITIONS, group_id, None, None)
    return ShareRecord(STATE_PARTITIONS, group_id, None, ShareGroupStatePartitionMetadataValue(
        initializing_topics=[],
        initialized_topics=[sspm.TopicPartitionsInfo(t, names.get(t, ""), sorted(ps))
                            for t, ps in sorted(initialized.items()) if ps],
        deleting_topics=[]))


# -- replay -----------------------------------------------------------------------------------
def replay_share(groups: dict[str, ShareGroup], rec: ShareRecord) -> None:
    gid = rec.group_id
    group = groups.get(gid)
    if rec.kind == GROUP_METADATA:
        if rec.value is None:
            groups.pop(gid, None)
            return
        assert isinstance(rec.value, ShareGroupMetadataValue)
        group = groups.setdefault(gid, ShareGroup(gid))
        group.group_epoch = rec.value.epoch
        return
    if group is None:
        if rec.value is None:
            return
        group = groups[gid] = ShareGroup(gid)
    mid = rec.member_id or ""
    if rec.kind == MEMBER_METADATA:
        if rec.value is None:
            group.members.pop(mid, None)
            return
        v = rec.value
        assert isinstance(v, ShareGroupMemberMetadataValue)
        old = group.members.get(mid) or ShareMember(mid)
        group.members[mid] = replace(old, rack_id=v.rack_id, client_id=v.client_id,
                                     client_host=v.client_host,
                                     subscribed_topic_names=tuple(v.subscribed_topic_names))
    elif rec.kind == CURRENT_ASSIGNMENT:
        if rec.value is None:
            return
        a = rec.value
        assert isinstance(a, ShareGroupCurrentMemberAssignmentValue)
        old = group.members.get(mid) or ShareMember(mid)
        group.members[mid] = replace(
            old, member_epoch=a.member_epoch, previous_member_epoch=a.previous_member_epoch,
            assigned={t.topic_id: frozenset(t.partitions) for t in a.assigned_partitions})
    elif rec.kind == STATE_PARTITIONS:
        if rec.value is None:
            group.initialized.clear()
            return
        s = rec.value
        assert isinstance(s, ShareGroupStatePartitionMetadataValue)
        group.initialized = {t.topic_id: set(t.partitions) for t in s.initialized_topics}
