"""The broker's group coordinator: one shard per ``__consumer_offsets`` partition it leads.

The coordinator of a group is the leader of partition
``abs(javaStringHashCode(group)) % partitions`` of ``__consumer_offsets``
(``coordinator_partition``); FindCoordinator answers with that leader, and
creates the internal topic first if it does not exist yet (answering
COORDINATOR_NOT_AVAILABLE to that first request, as Kafka does): both live in
``internal_topics``, which locates transactional ids the same way.

Leadership drives everything else (``ShardedCoordinator``): becoming leader of
an offsets partition starts a shard loading, losing it closes the shard.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from kaflite.cluster._sharded import ShardedCoordinator
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._shard import CoordinatorShard, PartitionWriter
from kaflite.cluster.groups._timer import LoopTimer
from kaflite.cluster.internal_topics import OFFSETS_TOPIC

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition

__all__ = ["GroupCoordinator"]

log = logging.getLogger("kaflite.cluster.groups")


class GroupCoordinator(ShardedCoordinator[CoordinatorShard]):
    TOPIC = OFFSETS_TOPIC

    def __init__(self, broker: Broker) -> None:
        self.config = GroupConfig.from_props(broker.config.props)
        super().__init__(broker, self.config.offsets_partitions, self.config.load_buffer_size,
                         log)
        self._every(self.config.retention_check_interval_ms,
                    lambda shard, now: shard.offset_manager.expire(), "expired %s offsets")
        broker.marker_hooks.append(self._on_marker)

    def close(self) -> None:
        """Broker shutdown: close every shard, stop every timer and task."""
        super().close()
        with contextlib.suppress(ValueError):
            self.broker.marker_hooks.remove(self._on_marker)

    def _on_marker(self, topic: str, index: int, producer_id: int, producer_epoch: int,
                   committed: bool) -> None:
        """A transaction ended on an offsets partition: its offsets apply, or are dropped."""
        shard = self.shards.get(index)
        if topic == OFFSETS_TOPIC and shard is not None and shard.active:
            shard.txn_offsets.complete(producer_id, committed)

    def _new_shard(self, p: Partition) -> CoordinatorShard:
        writer = PartitionWriter(self.broker, OFFSETS_TOPIC, p.index, p.leader_epoch,
                                 self.config.commit_timeout_ms)
        return CoordinatorShard(p.index, p.leader_epoch, writer, LoopTimer(self._loop),
                                self.config, self._topic_exists)

    def _topic_exists(self, name: str) -> bool:
        return name in self.broker.controller.topics

    # -- fault injection and tools ---------------------------------------------------------------
    def forget_member(self, group_id: str, member_id: str) -> bool:
        """Drop a member as if its session had expired (the chaos "forget member" action)."""
        shard = self.shard_for(group_id)
        group = shard.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return False
        shard.classic.remove_member(group, member, f"member {member_id} forgotten on request")
        return True
