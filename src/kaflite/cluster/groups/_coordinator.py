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
import uuid
from typing import TYPE_CHECKING

from kaflite.cluster._sharded import ShardedCoordinator
from kaflite.cluster.group_configs import GroupSettings, group_settings
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._consumer import TopicView
from kaflite.cluster.groups._consumer_group import TopicMeta
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
        share = self.broker.share
        shard = CoordinatorShard(p.index, p.leader_epoch, writer, LoopTimer(self._loop),
                                 self.config, self._topic_exists, self._topic_view,
                                 share.settings if share is not None else None)
        shard.consumer.timeouts = self._consumer_timeouts
        return shard

    def group_config(self, group_id: str) -> GroupSettings:
        """A group's settings: its dynamic group configs (ConfigResource GROUP) over the
        broker's ``group.consumer.*`` and ``group.share.*`` settings, as they are now."""
        return group_settings(self.broker.controller.group_configs.get(group_id, {}),
                              self.broker.config.props)

    def _consumer_timeouts(self, group_id: str) -> tuple[int, int]:
        s = self.group_config(group_id)
        return s.consumer_session_timeout_ms, s.consumer_heartbeat_interval_ms

    def _topic_exists(self, name: str) -> bool:
        return name in self.broker.controller.topics

    def _lookup_topic(self, name: str) -> TopicMeta | None:
        topic = self.broker.controller.topics.get(name)
        if topic is None or not topic.partitions:
            return None
        return TopicMeta(topic.topic_id, name, len(topic.partitions))

    def _topic_names(self) -> list[str]:
        # every topic, the internal ones too: Kafka resolves a group's regular expressions
        # against all of the metadata image's topic names (TopicRegexResolver)
        return list(self.broker.controller.topics)

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        topic = self.broker.controller.topics_by_id.get(topic_id)
        return None if topic is None else topic.name

    @property
    def _topic_view(self) -> TopicView:
        return TopicView(self._lookup_topic, self._topic_names, self._topic_name)

    # -- fault injection and tools ---------------------------------------------------------------
    def forget_member(self, group_id: str, member_id: str) -> bool:
        """Drop a member as if its session had expired (the chaos "forget member" action)."""
        shard = self.shard_for(group_id)
        if group_id in shard.consumer_groups:
            return shard.consumer.fence(group_id, member_id, "it was forgotten on request")
        if group_id in shard.share_groups:
            return shard.share.fence(group_id, member_id, "it was forgotten on request")
        group = shard.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return False
        shard.classic.remove_member(group, member, f"member {member_id} forgotten on request")
        return True

    def bump_group_epoch(self, group_id: str) -> int:
        """STALE_MEMBER_EPOCH on demand (see ``ConsumerGroupManager.bump_epoch``)."""
        return self.shard_for(group_id).consumer.bump_epoch(group_id)

    def fence_member_epoch(self, group_id: str, member_id: str) -> bool:
        """FENCED_MEMBER_EPOCH on demand (see ``ConsumerGroupManager.fence_epoch``)."""
        return self.shard_for(group_id).consumer.fence_epoch(group_id, member_id)
