"""The broker's group coordinator: one shard per ``__consumer_offsets`` partition it leads.

The coordinator of a group is the leader of partition
``abs(javaStringHashCode(group)) % partitions`` of ``__consumer_offsets``
(``coordinator_partition``); FindCoordinator answers with that leader, and
creates the internal topic first if it does not exist yet (answering
COORDINATOR_NOT_AVAILABLE to that first request, as Kafka does). Transactional
ids are located the same way on ``__transaction_state``.

Leadership drives everything else (``ShardedCoordinator``): becoming leader of
an offsets partition starts a shard loading, losing it closes the shard.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from kaflite.cluster._sharded import ShardedCoordinator
from kaflite.cluster.controller import BrokerInfo
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._shard import (
    OFFSETS_TOPIC,
    CoordinatorShard,
    PartitionWriter,
)
from kaflite.cluster.groups._timer import LoopTimer
from kaflite.protocol import errors
from kaflite.protocol.hashing import coordinator_partition

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition

__all__ = ["GROUP_KEY", "TRANSACTION_KEY", "TXN_TOPIC", "GroupCoordinator"]

log = logging.getLogger("kaflite.cluster.groups")

TXN_TOPIC = "__transaction_state"
GROUP_KEY, TRANSACTION_KEY = 0, 1


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

    # -- FindCoordinator -----------------------------------------------------------------------
    def find_coordinator(self, key: str, key_type: int) -> BrokerInfo:
        """The broker coordinating ``key``; raises COORDINATOR_NOT_AVAILABLE and friends."""
        if key_type == GROUP_KEY:
            topic_name = OFFSETS_TOPIC
        elif key_type == TRANSACTION_KEY:
            topic_name = TXN_TOPIC
        else:
            raise errors.InvalidRequestError(f"unsupported coordinator key type {key_type}")
        controller = self.broker.controller
        topic = controller.topics.get(topic_name)
        if topic is None:
            try:
                self._create_internal_topic(topic_name)
            except errors.KafkaError as exc:
                log.warning("cannot create %s: %s", topic_name, exc)
            raise errors.CoordinatorNotAvailableError(f"{topic_name} is being created")
        state = topic.partitions[coordinator_partition(key, len(topic.partitions))]
        info = controller.brokers.get(state.leader)
        if state.leader < 0 or info is None or not info.alive:
            raise errors.CoordinatorNotAvailableError(f"{topic_name}-{state.partition} has no leader")
        return info

    def _create_internal_topic(self, name: str) -> None:
        controller = self.broker.controller
        cfg = self.config
        live = len(controller.live_brokers())
        if name == OFFSETS_TOPIC:
            partitions, rf = cfg.offsets_partitions, min(cfg.offsets_replication_factor, live)
            configs = {"cleanup.policy": "compact", "compression.type": "producer",
                       "segment.bytes": str(cfg.offsets_segment_bytes)}
        else:
            partitions, rf = cfg.txn_partitions, min(cfg.txn_replication_factor, live)
            configs = {"cleanup.policy": "compact", "segment.bytes": str(cfg.txn_segment_bytes),
                       "min.insync.replicas": str(max(1, min(cfg.txn_min_isr, rf))),
                       "unclean.leader.election.enable": "false"}
        plan = controller.assign_replicas(partitions, max(rf, 1))
        controller.create_topic(name, plan, configs)
        log.info("created %s with %s partitions, replication factor %s", name, partitions, rf)

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
