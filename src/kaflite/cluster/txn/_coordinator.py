"""The broker's transaction coordinator: one shard per ``__transaction_state`` partition it leads.

The coordinator of a transactional id is the leader of partition
``abs(javaStringHashCode(id)) % partitions`` of ``__transaction_state``;
FindCoordinator (in the group coordinator, which creates both internal topics)
answers with that leader. Leadership drives the rest, as for groups: becoming
leader starts a shard loading, losing leadership closes it, and a request for
an id whose shard is not here gets NOT_COORDINATOR (or
COORDINATOR_LOAD_IN_PROGRESS while it loads).

A timer aborts transactions that stay open longer than their timeout, every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from kaflite.cluster._internal_log import PartitionWriter, replay_partition
from kaflite.cluster.groups import TXN_TOPIC
from kaflite.cluster.txn._config import TxnConfig
from kaflite.cluster.txn._markers import MarkerChannel
from kaflite.cluster.txn._shard import TxnShard
from kaflite.protocol import errors
from kaflite.protocol.hashing import coordinator_partition

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition
    from kaflite.cluster.txn._metadata import TxnMetadata

__all__ = ["TransactionCoordinator"]

log = logging.getLogger("kaflite.cluster.txn")


class TransactionCoordinator:
    SERVICE = "txn"

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.config = TxnConfig.from_props(broker.config.props)
        self.shards: dict[int, TxnShard] = {}
        self._loads: dict[int, asyncio.Task[None]] = {}
        self._loop = asyncio.get_running_loop()
        self.channel = MarkerChannel(broker)
        self._aborter: asyncio.Task[None] | None = self._loop.create_task(self._abort_timed_out())
        self.closed = False
        broker.partition_hooks.append(self._on_partition_change)
        broker.services[self.SERVICE] = self

    @classmethod
    def attach(cls, broker: Broker) -> TransactionCoordinator:
        return cls(broker)

    def close(self) -> None:
        self.closed = True
        for index in list(self.shards):
            self._unload(index)
        if self._aborter is not None:
            self._aborter.cancel()
            self._aborter = None
        self.channel.close()
        with contextlib.suppress(ValueError):
            self.broker.partition_hooks.remove(self._on_partition_change)

    # -- leadership ---------------------------------------------------------------------------
    def _on_partition_change(self, p: Partition, was_leader: bool) -> None:
        if p.topic != TXN_TOPIC or self.closed:
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
        writer = PartitionWriter(self.broker, TXN_TOPIC, p.index, p.leader_epoch,
                                 self.config.write_timeout_ms)
        shard = TxnShard(p.index, p.leader_epoch, writer, self.channel,
                         self.broker.controller.allocate_producer_id, self.config)
        self.shards[p.index] = shard
        self._loads[p.index] = self._loop.create_task(self._run_load(shard, p))

    async def _run_load(self, shard: TxnShard, p: Partition) -> None:
        def current() -> bool:
            return self.shards.get(shard.index) is shard and p.is_leader
        try:
            done = await replay_partition(p.log, current, self.config.load_buffer_size,
                                          shard.replay_batch)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("broker %s: loading %s-%s failed", self.broker.node_id, TXN_TOPIC,
                          shard.index)
            return  # the shard stays LOADING; a new leader epoch retries
        finally:
            if self._loads.get(shard.index) is asyncio.current_task():
                del self._loads[shard.index]
        if done and current():
            shard.finish_loading()
            log.info("broker %s: loaded %s-%s (%s records, %s transactional ids)",
                     self.broker.node_id, TXN_TOPIC, shard.index, shard.records_loaded,
                     len(shard.txns))

    def _unload(self, index: int) -> None:
        shard = self.shards.pop(index, None)
        task = self._loads.pop(index, None)
        if task is not None:
            task.cancel()
        if shard is not None:
            shard.close()

    # -- lookups --------------------------------------------------------------------------------
    def partition_for(self, transactional_id: str) -> int:
        topic = self.broker.controller.topics.get(TXN_TOPIC)
        n = len(topic.partitions) if topic is not None else self.config.partitions
        return coordinator_partition(transactional_id, n)

    def shard_for(self, transactional_id: str) -> TxnShard:
        """The active shard owning ``transactional_id``, or the error Kafka answers."""
        if self.closed or not self.broker.running \
                or TXN_TOPIC not in self.broker.controller.topics:
            raise errors.NotCoordinatorError(transactional_id)
        shard = self.shards.get(self.partition_for(transactional_id))
        if shard is None or not shard.active:
            if shard is not None and shard.loading:
                raise errors.CoordinatorLoadInProgressError(transactional_id)
            raise errors.NotCoordinatorError(transactional_id)
        return shard

    def all_transactions(self) -> list[TxnMetadata]:
        """Every transactional id this broker coordinates (for ListTransactions)."""
        if any(s.loading for s in self.shards.values()):
            raise errors.CoordinatorLoadInProgressError("transaction state is loading")
        return [m for s in self.shards.values() if s.active for m in s.txns.values()]

    # -- timeouts ---------------------------------------------------------------------------------
    async def _abort_timed_out(self) -> None:
        interval = max(self.config.abort_interval_ms, 10) / 1000
        while True:
            await asyncio.sleep(interval)
            now = int(time.time() * 1000)
            for shard in list(self.shards.values()):
                if shard.active:
                    shard.abort_timed_out(now)
