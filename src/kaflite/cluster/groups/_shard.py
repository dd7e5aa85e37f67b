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
import enum
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflite.cluster.groups._classic import ClassicGroupManager, Record
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._group import ClassicGroup
from kaflite.cluster.groups._offsets import GroupOffsets, OffsetManager
from kaflite.cluster.groups._records import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from kaflite.cluster.groups._timer import Timer
from kaflite.cluster.log import AppendOrigin, LogError, PartitionLog
from kaflite.protocol import errors
from kaflite.protocol.records import encode_batch, iter_batches

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["CoordinatorShard", "PartitionWriter", "ShardState", "load_shard", "normalize_error"]

log = logging.getLogger("kaflite.cluster.groups")

OFFSETS_TOPIC = "__consumer_offsets"

_COORDINATOR_NOT_AVAILABLE = {
    errors.UnknownTopicOrPartitionError.code, errors.NotEnoughReplicasError.code,
    errors.NotEnoughReplicasAfterAppendError.code, errors.RequestTimedOutError.code,
}
_NOT_COORDINATOR = {errors.NotLeaderOrFollowerError.code, errors.KafkaStorageError.code}
_UNKNOWN_SERVER = {errors.MessageTooLargeError.code, errors.RecordListTooLargeError.code,
                   errors.InvalidFetchSizeError.code}


def normalize_error(code: int) -> int:
    """A log append's error as the coordinator reports it (Kafka's ``normalizeException``)."""
    if code in _COORDINATOR_NOT_AVAILABLE:
        return errors.CoordinatorNotAvailableError.code
    if code in _NOT_COORDINATOR:
        return errors.NotCoordinatorError.code
    if code in _UNKNOWN_SERVER:
        return errors.UnknownServerError.code
    return code


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class CoordinatorShard:
    def __init__(self, index: int, epoch: int, write: Callable[[list[Record]], asyncio.Future[int]],
                 timer: Timer, config: GroupConfig, topic_exists: Callable[[str], bool]) -> None:
        self.index = index
        self.epoch = epoch
        self.state = ShardState.LOADING
        self.timer = timer
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, GroupOffsets] = {}
        self.classic = ClassicGroupManager(self.groups, timer, config, write)
        self.offset_manager = OffsetManager(self.groups, self.offsets, self.classic, timer,
                                            config, write, topic_exists)
        self.records_loaded = 0

    @property
    def loading(self) -> bool:
        return self.state is ShardState.LOADING

    @property
    def active(self) -> bool:
        return self.state is ShardState.ACTIVE

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
            if k.group not in self.groups:
                # Offsets without group metadata: a simple consumer's group.
                self.groups[k.group] = ClassicGroup(k.group)
        elif isinstance(k, GroupKey):
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = ClassicGroup.from_record(k.group, decode_group_value(value))
        self.records_loaded += 1

    def finish_loading(self) -> None:
        self.state = ShardState.ACTIVE
        self.classic.on_loaded()

    def close(self) -> None:
        if self.state is ShardState.CLOSED:
            return
        self.state = ShardState.CLOSED
        self.classic.on_unloaded()
        self.timer.close()


async def load_shard(shard: CoordinatorShard, plog: PartitionLog, still_current: Callable[[], bool],
                     chunk_bytes: int) -> bool:
    """Replay the partition from its log start to its log end; False if abandoned."""
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        if not still_current():
            return False
        res = plog.read(offset, chunk_bytes, max_offset=end)
        if res.records:
            for batch in iter_batches(res.records):
                if batch.is_control or batch.last_offset < offset:
                    continue
                cols = batch.columns()
                for key, value in zip(cols.keys, cols.values, strict=True):
                    try:
                        shard.replay(key, value)
                    except Exception as exc:  # one bad record must not lose the partition
                        log.warning("%s-%s: skipping unreadable record: %s", OFFSETS_TOPIC,
                                    shard.index, exc)
        if res.next_offset <= offset:
            break
        offset = res.next_offset
        await asyncio.sleep(0)  # let other partitions and requests run between chunks
    return still_current()


class PartitionWriter:
    """Appends coordinator records to the leader log of one offsets partition."""

    def __init__(self, broker: Broker, index: int, epoch: int, timeout_ms: int) -> None:
        self.broker = broker
        self.index = index
        self.epoch = epoch
        self.timeout_s = timeout_ms / 1000
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, records: list[Record]) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        p = self.broker.partitions.get((OFFSETS_TOPIC, self.index))
        try:
            if p is None or not p.is_leader or p.leader_epoch != self.epoch:
                raise errors.NotCoordinatorError(f"{OFFSETS_TOPIC}-{self.index}")
            if len(p.isr) < int(p.log.config.min_insync_replicas):
                raise errors.NotEnoughReplicasError(f"{OFFSETS_TOPIC}-{self.index}")
            now = int(time.time() * 1000)
            batch = encode_batch([v for _, v in records], keys=[k for k, _ in records],
                                 base_timestamp=now)
            result = p.log.append_as_leader(batch, p.leader_epoch, now_ms=now,
                                            origin=AppendOrigin.COORDINATOR)
        except errors.KafkaError as exc:
            fut.set_result(normalize_error(exc.code))
            return fut
        except LogError:
            fut.set_result(errors.NotCoordinatorError.code)
            return fut
        p.wake_fetchers()
        p.maybe_advance_hw()
        min_isr = int(p.log.config.min_insync_replicas)

        async def wait() -> None:
            ok = await p.wait_for_hw(result.last_offset + 1, self.timeout_s)
            if ok:
                code = 0
            elif not p.is_leader or p.leader_epoch != self.epoch:
                code = errors.NotCoordinatorError.code
            elif len(p.isr) < min_isr:
                code = normalize_error(errors.NotEnoughReplicasAfterAppendError.code)
            else:
                code = normalize_error(errors.RequestTimedOutError.code)
            if not fut.done():
                fut.set_result(code)

        task = loop.create_task(wait())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return fut
