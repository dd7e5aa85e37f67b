"""What the group and transaction coordinators share: one shard per internal-topic
partition this broker leads, loaded when leadership arrives and closed when it goes.

The coordinator of a key (a group id, a transactional id) is the leader of
partition ``abs(javaStringHashCode(key)) % partitions`` of the internal topic.
The broker calls ``_on_partition_change`` after every change to a partition it
hosts: becoming leader of one of the topic's partitions (or leader again at a
new epoch) starts a shard loading (``replay_partition``); losing it closes the
shard. A request for a key whose shard is not here gets NOT_COORDINATOR, or
COORDINATOR_LOAD_IN_PROGRESS while it loads, and the client goes back to
FindCoordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from kaflite.cluster._internal_log import replay_partition
from kaflite.protocol import errors
from kaflite.protocol.hashing import coordinator_partition
from kaflite.protocol.records import RecordBatch

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition

__all__ = ["Shard", "ShardLifecycle", "ShardState", "ShardedCoordinator"]


class ShardState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"
    CLOSED = "closed"


class ShardLifecycle:
    """A shard is LOADING while it replays its partition, ACTIVE once it has, and CLOSED
    when its leadership is gone."""

    state = ShardState.LOADING

    @property
    def loading(self) -> bool:
        return self.state is ShardState.LOADING

    @property
    def active(self) -> bool:
        return self.state is ShardState.ACTIVE


class Shard(Protocol):
    index: int
    epoch: int

    @property
    def loading(self) -> bool: ...

    @property
    def active(self) -> bool: ...

    def replay_batch(self, batch: RecordBatch) -> None: ...

    def finish_loading(self) -> None: ...

    def close(self) -> None: ...

    def summary(self) -> str: ...


S = TypeVar("S", bound=Shard)


class ShardedCoordinator(Generic[S]):
    TOPIC = ""

    def __init__(self, broker: Broker, partitions: int, load_buffer_size: int,
                 log: logging.Logger) -> None:
        self.broker = broker
        self.shards: dict[int, S] = {}
        self.closed = False
        self._partitions = partitions
        self._load_buffer_size = load_buffer_size
        self._log = log
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._timers: list[asyncio.Task[None]] = []
        self._loop = asyncio.get_running_loop()
        broker.partition_hooks.append(self._on_partition_change)

    def _new_shard(self, p: Partition) -> S:
        raise NotImplementedError

    def close(self) -> None:
        """Broker shutdown: close every shard, stop every periodic task."""
        self.closed = True
        for index in list(self.shards):
            self._unload(index)
        for task in self._timers:
            task.cancel()
        self._timers.clear()
        with contextlib.suppress(ValueError):
            self.broker.partition_hooks.remove(self._on_partition_change)

    def _every(self, interval_ms: int, action: Callable[[S, int], Awaitable[int]],
               done: str) -> None:
        """Run ``action(shard, now_ms)`` on every active shard every ``interval_ms``
        (until ``close``); a non-zero count is logged as ``done % count``."""
        async def loop() -> None:
            interval = max(interval_ms, 10) / 1000
            while True:
                await asyncio.sleep(interval)
                now = int(time.time() * 1000)
                for shard in self.active_shards():
                    try:
                        count = await action(shard, now)
                    except Exception:
                        self._log.exception("%s-%s: periodic task failed", self.TOPIC,
                                            shard.index)
                        continue
                    if count:
                        self._log.info("%s on %s-%s", done % count, self.TOPIC, shard.index)
        self._timers.append(self._loop.create_task(loop()))

    # -- leadership ---------------------------------------------------------------------------
    def _on_partition_change(self, p: Partition, was_leader: bool) -> None:
        if p.topic != self.TOPIC or self.closed:
            return
        shard = self.shards.get(p.index)
        if p.is_leader and self.broker.running:
            if shard is not None and shard.epoch == p.leader_epoch:
                return
            if shard is not None:
                self._unload(p.index)
            self._load(p)
        elif shard is not None:
            self._unload(p.index)

    def _load(self, p: Partition) -> None:
        shard = self._new_shard(p)
        self.shards[p.index] = shard
        self._loads[p.index] = self._loop.create_task(self._run_load(shard, p))

    async def _run_load(self, shard: S, p: Partition) -> None:
        def current() -> bool:
            return self.shards.get(shard.index) is shard and p.is_leader
        try:
            done = await replay_partition(p.log, current, self._load_buffer_size,
                                          shard.replay_batch)
        except asyncio.CancelledError:
            raise
        except Exception:
            self._log.exception("broker %s: loading %s-%s failed", self.broker.node_id,
                                self.TOPIC, shard.index)
            return  # the shard stays LOADING; a new leader epoch retries
        finally:
            if self._loads.get(shard.index) is asyncio.current_task():
                del self._loads[shard.index]
        if done and current():
            shard.finish_loading()
            self._log.info("broker %s: loaded %s-%s (%s)", self.broker.node_id, self.TOPIC,
                           shard.index, shard.summary())

    def _unload(self, index: int) -> None:
        shard = self.shards.pop(index, None)
        task = self._loads.pop(index, None)
        if task is not None:
            task.cancel()
        if shard is not None:
            shard.close()

    # -- lookups --------------------------------------------------------------------------------
    def partition_for(self, key: str) -> int:
        topic = self.broker.controller.topics.get(self.TOPIC)
        n = len(topic.partitions) if topic is not None else self._partitions
        return coordinator_partition(key, n)

    def shard_for(self, key: str) -> S:
        """The active shard owning ``key``, or the error Kafka answers."""
        if self.closed or not self.broker.running \
                or self.TOPIC not in self.broker.controller.topics:
            raise errors.NotCoordinatorError(key)
        shard = self.shards.get(self.partition_for(key))
        if shard is None or not shard.active:
            if shard is not None and shard.loading:
                raise errors.CoordinatorLoadInProgressError(key)
            raise errors.NotCoordinatorError(key)
        return shard

    def active_shards(self) -> list[S]:
        return [s for s in self.shards.values() if s.active]

    @property
    def loading(self) -> bool:
        return any(s.loading for s in self.shards.values())
