"""Committed offsets, and the lifecycle of whole groups: delete and expire.

Theory of operation
-------------------
An OffsetCommit becomes one ``OffsetCommit`` record per partition, appended to
the group's ``__consumer_offsets`` partition in a single batch. The offsets
become visible to OffsetFetch only once that batch is committed (the high
watermark passed it), which is also when the client is answered: an offset a
client was told is committed survives the loss of the coordinator.

Deletions go the other way round, as Kafka's timeline does: a deleted offset
or group disappears from memory at once, so no request sees it half-deleted,
and the tombstones are written afterwards; should the write fail, whatever was
not recreated meanwhile is put back.

Validation follows Kafka 4.0's ``ClassicGroup.validateOffsetCommit``: members
commit with their member id and generation; a "simple" consumer (no group
management) commits with member id "" and generation -1, which is allowed
only while the group has no members, and creates the group if needed.

Expiry (``offsets.retention.minutes``, KIP-211): an Empty group's offsets
expire once the group has been Empty for the retention period; a simple
group's, once each offset is that old; a Stable consumer group's, for topics
it no longer subscribes to. A group left with no offsets and no members is
deleted (a GroupMetadata tombstone).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kaflite.cluster.groups._classic import ClassicGroupManager, Record
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._consumer import ConsumerGroupManager
from kaflite.cluster.groups._consumer_checks import PartitionCheck, refused_code
from kaflite.cluster.groups._consumer_group import ConsumerGroup
from kaflite.cluster.groups._group import ClassicGroup, GroupState
from kaflite.cluster.groups._records import (
    OffsetAndMetadata,
    encode_group_key,
    encode_offset_key,
    encode_offset_value,
)
from kaflite.cluster.groups._timer import Timer
from kaflite.protocol import errors
from kaflite.protocol.messages import OffsetCommitRequest

__all__ = ["GroupOffsets", "OffsetManager", "validate_offset_commit"]

S = GroupState
NONE = 0

TopicPartition = tuple[str, int]
GroupOffsets = dict[TopicPartition, OffsetAndMetadata]


def validate_offset_commit(group: ClassicGroup, member_id: str, instance_id: str | None,
                           generation_id: int, transactional: bool = False) -> None:
    """Kafka's checks of a commit's member and generation. A transactional commit
    (TxnOffsetCommit) without them is accepted whatever the group's state: its
    versions 0-2 have no member fields, and the group's state is not enforced."""
    if group.is_in(S.DEAD):
        raise errors.CoordinatorNotAvailableError(group.group_id)
    if generation_id < 0 and group.is_in(S.EMPTY):
        return  # a simple consumer or the admin client; allowed while nobody is a member
    if generation_id >= 0 or member_id or instance_id is not None:
        group.validate_member(member_id, instance_id)
        if generation_id != group.generation_id:
            raise errors.IllegalGenerationError(
                f"generation {generation_id}, group is at {group.generation_id}")
    elif not transactional and not group.is_in(S.EMPTY):
        raise errors.UnknownMemberIdError("a group with members takes commits from members only")
    if not transactional and group.is_in(S.COMPLETING_REBALANCE):
        # The member knows the new generation but has no assignment yet.
        raise errors.RebalanceInProgressError(group.group_id)


class OffsetManager:
    def __init__(self, groups: dict[str, ClassicGroup], offsets: dict[str, GroupOffsets],
                 classic: ClassicGroupManager, timer: Timer, config: GroupConfig,
                 write: Callable[[list[Record]], asyncio.Future[int]],
                 topic_exists: Callable[[str], bool],
                 consumer: ConsumerGroupManager | None = None) -> None:
        self.groups = groups
        self.offsets = offsets
        self.classic = classic
        self.timer = timer
        self.config = config
        self.write = write
        self.topic_exists = topic_exists
        self.consumer = consumer

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self.consumer.groups if self.consumer is not None else {}

    def _simple_group(self, group_id: str) -> ClassicGroup:
        group = self.groups[group_id] = ClassicGroup(group_id)
        group.state_timestamp = self.timer.now_ms()
        return group

    # -- OffsetCommit ---------------------------------------------------------------------------
    async def commit(self, req: OffsetCommitRequest, api_version: int
                     ) -> dict[TopicPartition, int]:
        """Store the offsets; the error code for every requested partition."""
        wanted = [(t.name, p) for t in req.topics for p in t.partitions]
        result: dict[TopicPartition, int] = {}
        code = NONE
        check: PartitionCheck | None = None
        group = self.groups.get(req.group_id)
        modern = self.consumer_groups.get(req.group_id)
        if not req.group_id:
            code = errors.InvalidGroupIdError.code
        elif modern is not None and self.consumer is not None:
            try:
                check = self.consumer.validate_offset_commit(modern, req.member_id,
                                                             req.generation_id_or_member_epoch,
                                                             api_version, False)
            except errors.KafkaError as exc:
                code = exc.code
        elif group is None:
            if req.generation_id_or_member_epoch < 0:
                group = self._simple_group(req.group_id)
            elif api_version >= 9:
                code = errors.GroupIdNotFoundError.code
            else:
                code = errors.IllegalGenerationError.code
        else:
            try:
                validate_offset_commit(group, req.member_id, req.group_instance_id,
                                       req.generation_id_or_member_epoch)
            except errors.KafkaError as exc:
                code = exc.code
        if code != NONE or (group is None and modern is None):
            return {(name, p.partition_index): code for name, p in wanted}
        now = self.timer.now_ms()
        expire = now + req.retention_time_ms if req.retention_time_ms != -1 else -1
        records: list[Record] = []
        pending: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        for name, p in wanted:
            tp = (name, p.partition_index)
            metadata = p.committed_metadata or ""
            if not self.topic_exists(name):
                result[tp] = errors.UnknownTopicOrPartitionError.code
            elif len(metadata) > self.config.metadata_max_bytes:
                result[tp] = errors.OffsetMetadataTooLargeError.code
            elif (refused := refused_code(check, *tp)) != NONE:
                result[tp] = refused
            else:
                om = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, metadata,
                                       now, expire)
                records.append((encode_offset_key(req.group_id, *tp), encode_offset_value(om)))
                pending.append((tp, om))
        # In the classic protocol a commit also proves the member is alive.
        member = group.members.get(req.member_id) if group is not None else None
        if group is not None and member is not None \
                and group.is_in(S.STABLE, S.PREPARING_REBALANCE):
            self.classic.reschedule_heartbeat(group, member)
        if records:
            code = await self.write(records)
            if code == NONE:
                if req.group_id not in self.groups \
                        and req.group_id not in self.consumer_groups:
                    self._simple_group(req.group_id)  # deleted while we wrote
                stored = self.offsets.setdefault(req.group_id, {})
                for tp, om in pending:
                    stored[tp] = om
            for tp, _ in pending:
                result[tp] = code
        return result

    # -- OffsetFetch ------------------------------------------------------------------------------
    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None
              ) -> list[tuple[str, list[tuple[int, OffsetAndMetadata | None]]]]:
        """Committed offsets (None where there is none); every offset when ``topics`` is None."""
        stored = self.offsets.get(group_id, {})
        if topics is None:
            by_topic: dict[str, list[tuple[int, OffsetAndMetadata | None]]] = {}
            for (topic, partition), om in sorted(stored.items()):
                by_topic.setdefault(topic, []).append((partition, om))
            return list(by_topic.items())
        return [(name, [(p, stored.get((name, p))) for p in parts]) for name, parts in topics]

    # -- OffsetDelete -----------------------------------------------------------------------------
    async def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]
                             ) -> tuple[int, dict[TopicPartition, int]]:
        group = self.groups.get(group_id)
        modern = self.consumer_groups.get(group_id)
        if modern is not None:
            subscribed_to: Callable[[str], bool] = modern.is_subscribed_to
        elif group is None or group.is_in(S.DEAD):
            return errors.GroupIdNotFoundError.code, {}
        elif not group.is_in(S.EMPTY) and not group.uses_consumer_protocol():
            return errors.NonEmptyGroupError.code, {}
        else:
            subscribed_to = group.is_subscribed_to
        stored = self.offsets.get(group_id, {})
        result: dict[TopicPartition, int] = {}
        removed: GroupOffsets = {}
        for name, parts in topics:
            subscribed = subscribed_to(name)
            for p in parts:
                tp = (name, p)
                if subscribed:
                    result[tp] = errors.GroupSubscribedToTopicError.code
                    continue
                result[tp] = NONE
                om = stored.pop(tp, None)
                if om is not None:
                    removed[tp] = om
        if not removed:
            return NONE, result
        code = await self.write([(encode_offset_key(group_id, *tp), None) for tp in removed])
        if code != NONE:
            self._restore_offsets(group_id, removed)
            return code, {}
        return NONE, result

    def _restore_offsets(self, group_id: str, removed: GroupOffsets) -> None:
        stored = self.offsets.setdefault(group_id, {})
        for tp, om in removed.items():
            stored.setdefault(tp, om)

    # -- DeleteGroups ----------------------------------------------------------------------------
    async def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        result: dict[str, int] = {}
        records: list[Record] = []
        removed: list[tuple[ClassicGroup, GroupOffsets]] = []
        modern_removed: list[tuple[ConsumerGroup, GroupOffsets]] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            modern = self.consumer_groups.get(gid)
            if not gid:
                result[gid] = errors.InvalidGroupIdError.code
            elif modern is not None and self.consumer is not None:
                if modern.members:
                    result[gid] = errors.NonEmptyGroupError.code
                    continue
                result[gid] = NONE
                records += [(encode_offset_key(gid, *tp), None) for tp in self.offsets.get(gid, {})]
                records += self.consumer.delete_records(modern)
                modern_removed.append((modern, self.offsets.pop(gid, {})))
            elif group is None or group.is_in(S.DEAD):
                result[gid] = errors.GroupIdNotFoundError.code
            elif not group.is_in(S.EMPTY):
                result[gid] = errors.NonEmptyGroupError.code
            else:
                result[gid] = NONE
                records += self._remove_group(group)
                removed.append((group, self.offsets.pop(gid, {})))
        if records:
            code = await self.write(records)
            if code != NONE:
                for group, offsets in removed:
                    self._restore_group(group, offsets)
                    result[group.group_id] = code
                for modern, offsets in modern_removed:
                    # The tombstones did not make it: the (empty) group comes back as it was.
                    if modern.group_id not in self.groups:
                        modern.dead = False
                        self.consumer_groups.setdefault(modern.group_id, modern)
                        self._restore_offsets(modern.group_id, offsets)
                    result[modern.group_id] = code
        return result

    def _remove_group(self, group: ClassicGroup) -> list[Record]:
        gid = group.group_id
        records: list[Record] = [(encode_offset_key(gid, *tp), None)
                                 for tp in self.offsets.get(gid, {})]
        records.append((encode_group_key(gid), None))
        del self.groups[gid]
        group.transition_to(S.DEAD, self.timer.now_ms())
        return records

    def _restore_group(self, group: ClassicGroup, offsets: GroupOffsets) -> None:
        gid = group.group_id
        if gid in self.groups:
            return  # recreated meanwhile; the new one wins
        group.state, group.previous_state = group.previous_state, S.DEAD
        self.groups[gid] = group
        self._restore_offsets(gid, offsets)

    # -- expiry ---------------------------------------------------------------------------------
    def _expired(self, group: ClassicGroup, om: OffsetAndMetadata, now: int) -> bool:
        if om.expire_timestamp >= 0:
            return now >= om.expire_timestamp
        if group.protocol_type:
            if group.is_in(S.EMPTY):
                base = group.state_timestamp if group.state_timestamp is not None \
                    else om.commit_timestamp
            elif group.is_in(S.STABLE) and group.uses_consumer_protocol() \
                    and group.subscribed_topics is not None:
                base = om.commit_timestamp
            else:
                return False
        else:
            base = om.commit_timestamp
        return now - base >= self.config.retention_ms

    def _expire_consumer_groups(self, now: int, removed: dict[str, GroupOffsets]) -> list[Record]:
        """A consumer group's offsets expire by commit time once it no longer subscribes to
        their topic (Kafka's ``OffsetExpirationConditionImpl``); an empty group left with
        no offsets is deleted."""
        records: list[Record] = []
        for gid, modern in list(self.consumer_groups.items()):
            stored = self.offsets.get(gid, {})
            gone: GroupOffsets = {}
            for tp, om in list(stored.items()):
                expired = now >= om.expire_timestamp if om.expire_timestamp >= 0 \
                    else now - om.commit_timestamp >= self.config.retention_ms
                if not modern.is_subscribed_to(tp[0]) and expired:
                    gone[tp] = stored.pop(tp)
                    records.append((encode_offset_key(gid, *tp), None))
            if gone:
                removed[gid] = gone
            if not stored:
                self.offsets.pop(gid, None)
                if not modern.members and self.consumer is not None:
                    records += self.consumer.delete_records(modern)
        return records

    async def expire(self) -> int:
        """One pass of Kafka's offsets cleanup; returns the number of offsets removed."""
        now = self.timer.now_ms()
        records: list[Record] = []
        removed_offsets: dict[str, GroupOffsets] = {}
        removed_groups: list[ClassicGroup] = []
        for gid, group in list(self.groups.items()):
            stored = self.offsets.get(gid, {})
            gone: GroupOffsets = {}
            for tp, om in list(stored.items()):
                if not group.is_subscribed_to(tp[0]) and self._expired(group, om, now):
                    gone[tp] = stored.pop(tp)
                    records.append((encode_offset_key(gid, *tp), None))
            if gone:
                removed_offsets[gid] = gone
            if not stored:
                self.offsets.pop(gid, None)
                if group.is_in(S.EMPTY):
                    records += self._remove_group(group)  # offsets already popped
                    removed_groups.append(group)
        records += self._expire_consumer_groups(now, removed_offsets)
        if not records:
            return 0
        code = await self.write(records)
        if code != NONE:
            for group in removed_groups:
                self._restore_group(group, {})
            for gid, gone in removed_offsets.items():
                if gid in self.groups or gid in self.consumer_groups:
                    self._restore_offsets(gid, gone)
            return 0
        return sum(len(g) for g in removed_offsets.values())
