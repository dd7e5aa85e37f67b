"""Offsets committed inside a transaction (TxnOffsetCommit, KIP-98 and KIP-447).

Theory of operation
-------------------
A transactional producer that consumed from a group commits the group's
offsets as part of its transaction: AddOffsetsToTxn puts the group's
``__consumer_offsets`` partition into the transaction, then TxnOffsetCommit
writes the offsets to that partition as a transactional batch of the
producer. They stay pending, invisible to OffsetFetch, until the
transaction's marker reaches the partition: COMMIT makes them the group's
committed offsets, ABORT drops them. While any are pending for a partition,
an OffsetFetch that asks for stable offsets (``require_stable``) is told
UNSTABLE_OFFSET_COMMIT and retries.

The same happens on load: a transactional batch of offsets is held by
producer id until the control batch that ends the transaction is replayed.

The commit is checked against the group of either kind, as Kafka's
``OffsetMetadataManager.validateTransactionalOffsetCommit`` does: a consumer (KIP-848)
group by member and member epoch (a stale epoch is ILLEGAL_GENERATION), a classic one
by member and generation; no group at all takes a commit without a generation (a
simple group is made for it) and refuses one with a generation (ILLEGAL_GENERATION).
Before, only classic groups were looked at: a KIP-848 group's commit made an empty
classic group of the same id when its transaction committed, and every later commit
of the group was checked against that one and refused, for ever (franz-go's
TestTxnEtl, 848 cases, hung).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from kaflite.cluster.groups._consumer_checks import PartitionCheck, refused_code
from kaflite.cluster.groups._consumer_checks import validate_offset_commit as validate_modern
from kaflite.cluster.groups._consumer_group import ConsumerGroup, TopicMeta
from kaflite.cluster.groups._group import ClassicGroup
from kaflite.cluster.groups._offsets import GroupOffsets, TopicPartition, validate_offset_commit
from kaflite.cluster.groups._records import (
    OffsetAndMetadata,
    encode_offset_key,
    encode_offset_value,
)
from kaflite.cluster.groups._timer import Timer
from kaflite.protocol import errors
from kaflite.protocol.messages import TxnOffsetCommitRequest

__all__ = ["TxnOffsetManager"]

Record = tuple[bytes, bytes | None]


class TxnWriter(Protocol):
    def __call__(self, records: list[Record], *, producer_id: int = -1,
                 producer_epoch: int = -1) -> asyncio.Future[int]: ...


class TxnOffsetManager:
    def __init__(self, groups: dict[str, ClassicGroup], offsets: dict[str, GroupOffsets],
                 timer: Timer, metadata_max_bytes: int, write: TxnWriter | None,
                 consumer_groups: dict[str, ConsumerGroup] | None = None,
                 lookup: Callable[[str], TopicMeta | None] = lambda name: None) -> None:
        self.groups = groups
        self.lookup = lookup
        self.consumer_groups: dict[str, ConsumerGroup] = \
            consumer_groups if consumer_groups is not None else {}
        self.offsets = offsets
        self.timer = timer
        self.metadata_max_bytes = metadata_max_bytes
        self.write = write
        # producer id -> group -> offsets written in its open transaction
        self.pending: dict[int, dict[str, GroupOffsets]] = {}

    def stash(self, producer_id: int, group_id: str, tp: TopicPartition,
              om: OffsetAndMetadata | None) -> None:
        """Hold an offset (None: a tombstone) until the producer's transaction ends."""
        by_group = self.pending.setdefault(producer_id, {}).setdefault(group_id, {})
        if om is None:
            by_group.pop(tp, None)
        else:
            by_group[tp] = om

    def complete(self, producer_id: int, committed: bool) -> None:
        """The transaction's marker reached this partition: apply or drop its offsets."""
        by_group = self.pending.pop(producer_id, None)
        if not by_group or not committed:
            return
        for group_id, offsets in by_group.items():
            if group_id not in self.groups and group_id not in self.consumer_groups:
                group = self.groups[group_id] = ClassicGroup(group_id)
                group.state_timestamp = self.timer.now_ms()
            self.offsets.setdefault(group_id, {}).update(offsets)

    def unstable(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in by_group.get(group_id, ()) for by_group in self.pending.values())

    async def commit(self, req: TxnOffsetCommitRequest) -> dict[TopicPartition, int]:
        """Write the offsets into the producer's transaction; an error code per partition."""
        wanted = [(t.name, p) for t in req.topics for p in t.partitions]
        code = 0
        check: PartitionCheck | None = None
        group = self.groups.get(req.group_id)
        modern = self.consumer_groups.get(req.group_id)
        try:
            if not req.group_id:
                raise errors.InvalidGroupIdError(req.group_id)
            if modern is not None:
                try:
                    check = validate_modern(modern, req.member_id, req.generation_id_or_member_epoch, 5, True,
                                            req.group_instance_id, self.lookup)
                except errors.StaleMemberEpochError as exc:
                    raise errors.IllegalGenerationError(exc.message) from None
            elif group is not None:
                validate_offset_commit(group, req.member_id, req.group_instance_id,
                                       req.generation_id_or_member_epoch, transactional=True)
            elif req.generation_id_or_member_epoch >= 0:
                raise errors.IllegalGenerationError(
                    f"Group {req.group_id} does not exist: generation {req.generation_id_or_member_epoch}.")
        except errors.KafkaError as exc:
            code = exc.code
        if code or self.write is None:
            code = code or errors.CoordinatorNotAvailableError.code
            return {(name, p.partition_index): code for name, p in wanted}
        now = self.timer.now_ms()
        result: dict[TopicPartition, int] = {}
        records: list[Record] = []
        written: list[tuple[TopicPartition, OffsetAndMetadata]] = []
        for name, p in wanted:
            tp = (name, p.partition_index)
            metadata = p.committed_metadata or ""
            if len(metadata) > self.metadata_max_bytes:
                result[tp] = errors.OffsetMetadataTooLargeError.code
                continue
            refused = refused_code(check, *tp)
            if refused:   # Kafka answers a stale epoch with ILLEGAL_GENERATION here
                result[tp] = errors.IllegalGenerationError.code \
                    if refused == errors.StaleMemberEpochError.code else refused
                continue
            om = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch, metadata, now)
            records.append((encode_offset_key(req.group_id, *tp), encode_offset_value(om)))
            written.append((tp, om))
        if records:
            code = await self.write(records, producer_id=req.producer_id,
                                    producer_epoch=req.producer_epoch)
            for tp, om in written:
                result[tp] = code
                if code == 0:
                    self.stash(req.producer_id, req.group_id, tp, om)
        return result
