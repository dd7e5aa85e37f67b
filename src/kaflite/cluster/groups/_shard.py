"""One ``__consumer_offsets`` partition's worth of coordinator state.

Theory of operation
-------------------
Kafka shards the group coordinator by offsets partition: the broker leading
partition *p* coordinates every group whose id hashes to *p*. A shard is born
when this broker becomes that leader (at a given leader epoch). It is LOADING
while it replays the partition's log from the start, rebuilding groups and
offsets record by record (a tombstone deletes); requests for its groups get
COORDINATOR_LOAD_IN_PROGRESS meanwhile. Then it is ACTIVE until leadership
moves (or the epoch changes), when it is CLOSED: parked responses get
NOT_COORDINATOR, its timers stop, and the next owner loads the same log.

Writes go through the partition's leader log like any produce with acks=all:
``PartitionWriter`` appends a batch and resolves once the high watermark
passes it, i.e. once the followers in the ISR have it too. Its result is a
Kafka error code, already translated the way Kafka's coordinator runtime does
(``normalizeException``): a timeout or missing replicas mean "try again
later" (COORDINATOR_NOT_AVAILABLE), a lost leadership means NOT_COORDINATOR.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from kaflite.cluster._internal_log import PartitionWriter, normalize_error, replay_partition
from kaflite.cluster._sharded import ShardLifecycle, ShardState
from kaflite.cluster.groups._classic import ClassicGroupManager, Record
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._consumer import ConsumerGroupManager, TopicView
from kaflite.cluster.groups._consumer_group import ConsumerGroup
from kaflite.cluster.groups._consumer_records import (
    CONSUMER_RECORD_TYPES,
    decode_consumer_record,
    replay_consumer,
)
from kaflite.cluster.groups._group import ClassicGroup
from kaflite.cluster.groups._migration import Migration
from kaflite.cluster.groups._offsets import GroupOffsets, OffsetManager
from kaflite.cluster.groups._records import (
    GroupKey,
    OffsetKey,
    OtherKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    split_version,
)
from kaflite.cluster.groups._share import ShareGroup, ShareGroupManager
from kaflite.cluster.groups._share_records import (
    SHARE_RECORD_TYPES,
    decode_share_record,
    replay_share,
)
from kaflite.cluster.groups._timer import Timer
from kaflite.cluster.groups._txn_offsets import TxnOffsetManager
from kaflite.cluster.internal_topics import OFFSETS_TOPIC
from kaflite.cluster.log import PartitionLog
from kaflite.cluster.share._config import ShareGroupSettings
from kaflite.protocol.errors import RemoteProtocolError
from kaflite.protocol.records import RecordBatch, read_end_txn_marker

__all__ = ["CoordinatorShard", "PartitionWriter", "ShardState", "load_shard", "normalize_error"]

log = logging.getLogger("kaflite.cluster.groups")



class CoordinatorShard(ShardLifecycle):
    def __init__(self, index: int, epoch: int, write: Callable[[list[Record]], asyncio.Future[int]],
                 timer: Timer, config: GroupConfig, topic_exists: Callable[[str], bool],
                 topics: TopicView | None = None,
                 share_settings: Callable[[str], ShareGroupSettings] | None = None) -> None:
        self.index = index
        self.epoch = epoch
        self.timer = timer
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, GroupOffsets] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.classic = ClassicGroupManager(self.groups, timer, config, write)
        self.consumer = ConsumerGroupManager(
            self.consumer_groups, self.groups, timer, config, write,
            topics or TopicView(lambda name: None, lambda: (), lambda topic_id: None))
        self.migration = Migration(self.consumer, self.classic)
        self.consumer.migration = self.migration
        self.offset_manager = OffsetManager(self.groups, self.offsets, self.classic, timer,
                                            config, write, topic_exists, self.consumer)
        self.txn_offsets = TxnOffsetManager(self.groups, self.offsets, timer,
                                            config.metadata_max_bytes,
                                            write if isinstance(write, PartitionWriter) else None,
                                            self.consumer_groups, self.consumer.topics.lookup)
        self.share_groups: dict[str, ShareGroup] = {}
        self.share = ShareGroupManager(
            self.share_groups, lambda gid: gid in self.groups or gid in self.consumer_groups,
            timer, config.share, self.consumer.topics, write, share_settings)
        self.records_loaded = 0

    # -- replay ------------------------------------------------------------------------------
    def replay(self, key: bytes | memoryview | None, value: bytes | memoryview | None) -> None:
        """Apply one ``__consumer_offsets`` record, as the loader reads it."""
        if key is None:
            return
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            if value is None:
                stored = self.offsets.get(k.group)
                if stored is not None:
                    stored.pop((k.topic, k.partition), None)
                    if not stored:
                        del self.offsets[k.group]
                return
            self.offsets.setdefault(k.group, {})[(k.topic, k.partition)] = \
                decode_offset_value(value)
            if k.group not in self.groups and k.group not in self.consumer_groups:
                # Offsets without group metadata: a simple consumer's group.
                self.groups[k.group] = ClassicGroup(k.group)
        elif isinstance(k, GroupKey):
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = ClassicGroup.from_record(k.group, decode_group_value(value))
                self.consumer_groups.pop(k.group, None)
        elif isinstance(k, OtherKey) and k.version in CONSUMER_RECORD_TYPES:
            _, reader = split_version(key)
            rec = decode_consumer_record(k.version, reader, value)
            replay_consumer(self.consumer_groups, self.groups, rec)
        elif isinstance(k, OtherKey) and k.version in SHARE_RECORD_TYPES:
            _, reader = split_version(key)
            replay_share(self.share_groups, decode_share_record(k.version, reader, value))
        self.records_loaded += 1

    def replay_batch(self, batch: RecordBatch) -> None:
        """Apply one batch of ``__consumer_offsets`` as the loader reads it."""
        if batch.is_control:
            if batch.is_transactional and batch.producer_id >= 0:
                with contextlib.suppress(RemoteProtocolError):
                    self.txn_offsets.complete(batch.producer_id,
                                              read_end_txn_marker(batch).is_commit)
            return
        cols = batch.columns()
        for key, value in zip(cols.keys, cols.values, strict=True):
            try:
                if batch.is_transactional and batch.producer_id >= 0:
                    self.replay_transactional(batch.producer_id, key, value)
                else:
                    self.replay(key, value)
            except Exception as exc:  # one bad record must not lose the partition
                log.warning("%s-%s: skipping unreadable record: %s", OFFSETS_TOPIC,
                            self.index, exc)

    def summary(self) -> str:
        return (f"{self.records_loaded} records, {len(self.groups)} classic groups, "
                f"{len(self.consumer_groups)} consumer groups, "
                f"{len(self.share_groups)} share groups")

    def replay_transactional(self, producer_id: int, key: bytes | memoryview | None,
                             value: bytes | memoryview | None) -> None:
        """An offset written by TxnOffsetCommit: pending until its transaction's marker."""
        if key is None:
            return
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            om = None if value is None else decode_offset_value(value)
            self.txn_offsets.stash(producer_id, k.group, (k.topic, k.partition), om)
            self.records_loaded += 1

    def finish_loading(self) -> None:
        self.state = ShardState.ACTIVE
        self.classic.on_loaded()
        self.consumer.on_loaded()
        self.share.on_loaded()

    def close(self) -> None:
        if self.state is ShardState.CLOSED:
            return
        self.state = ShardState.CLOSED
        self.classic.on_unloaded()
        self.share.close()
        self.timer.close()


async def load_shard(shard: CoordinatorShard, plog: PartitionLog, still_current: Callable[[], bool],
                     chunk_bytes: int) -> bool:
    """Replay the partition from its log start to its log end; False if abandoned."""
    return await replay_partition(plog, still_current, chunk_bytes, shard.replay_batch)
