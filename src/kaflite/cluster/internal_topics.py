"""Kafka's internal topics, in one place: their names, their broker settings,
their creation, and which of their partitions coordinates a key.

A coordinator (the group coordinator on ``__consumer_offsets``, the transaction
coordinator on ``__transaction_state``) is the leader of partition
``abs(javaStringHashCode(key)) % partitions`` of its topic. FindCoordinator
answers with that leader; if the topic does not exist yet, it is created and
the first request is answered COORDINATOR_NOT_AVAILABLE, as Kafka does.

A new coordinator (KIP-848's consumer groups share ``__consumer_offsets``;
share groups bring ``__share_group_state``) is one more ``InternalTopic`` in
``TOPICS``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaflite.protocol import errors
from kaflite.protocol.hashing import coordinator_partition

if TYPE_CHECKING:
    from kaflite.cluster.controller import BrokerInfo, Controller

__all__ = [
    "DEFAULTS",
    "GROUP_KEY",
    "INTERNAL_TOPICS",
    "OFFSETS",
    "OFFSETS_TOPIC",
    "SHARE_KEY",
    "SHARE_STATE",
    "SHARE_STATE_TOPIC",
    "TOPICS",
    "TRANSACTIONS",
    "TRANSACTION_KEY",
    "TXN_TOPIC",
    "InternalTopic",
    "find_coordinator",
    "internal_topic_for",
]

log = logging.getLogger("kaflite.cluster.internal_topics")

OFFSETS_TOPIC = "__consumer_offsets"
TXN_TOPIC = "__transaction_state"
SHARE_STATE_TOPIC = "__share_group_state"
GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2          # FindCoordinator key types


@dataclass(frozen=True)
class InternalTopic:
    """One internal topic: its name, the FindCoordinator key type it serves, and its
    broker settings (``<prefix>.num.partitions`` ...), with Kafka 4.0's defaults."""

    name: str
    key_type: int
    prefix: str                                   # "offsets.topic", "transaction.state.log"
    defaults: Mapping[str, str]                   # setting -> default, full names
    topic_configs: Mapping[str, str] = field(default_factory=dict)
    has_min_isr: bool = False

    def setting(self, props: Mapping[str, str], suffix: str) -> int:
        name = f"{self.prefix}.{suffix}"
        return int(props.get(name, self.defaults[name]))

    def partitions(self, props: Mapping[str, str]) -> int:
        return self.setting(props, "num.partitions")

    def partition_for(self, key: str, props: Mapping[str, str],
                      controller: Controller | None = None) -> int:
        """The partition coordinating ``key``: by the topic's partitions once it exists,
        by the configured count before."""
        topic = controller.topics.get(self.name) if controller is not None else None
        n = len(topic.partitions) if topic is not None and topic.partitions else \
            self.partitions(props)
        return coordinator_partition(key, n)

    def create(self, controller: Controller, props: Mapping[str, str]) -> None:
        """Create the topic with its settings, replicated as far as the live brokers allow."""
        partitions = self.partitions(props)
        rf = max(1, min(self.setting(props, "replication.factor"),
                        len(controller.live_brokers())))
        configs = dict(self.topic_configs)
        configs["segment.bytes"] = str(self.setting(props, "segment.bytes"))
        if self.has_min_isr:
            configs["min.insync.replicas"] = str(max(1, min(self.setting(props, "min.isr"), rf)))
        controller.create_topic(self.name, controller.assign_replicas(partitions, rf), configs)
        log.info("created %s with %s partitions, replication factor %s", self.name,
                 partitions, rf)


OFFSETS = InternalTopic(
    OFFSETS_TOPIC, GROUP_KEY, "offsets.topic",
    {"offsets.topic.num.partitions": "50", "offsets.topic.replication.factor": "3",
     "offsets.topic.segment.bytes": "104857600"},
    {"cleanup.policy": "compact", "compression.type": "producer"})
TRANSACTIONS = InternalTopic(
    TXN_TOPIC, TRANSACTION_KEY, "transaction.state.log",
    {"transaction.state.log.num.partitions": "50",
     "transaction.state.log.replication.factor": "3",
     "transaction.state.log.min.isr": "2",
     "transaction.state.log.segment.bytes": "104857600"},
    {"cleanup.policy": "compact", "unclean.leader.election.enable": "false"},
    has_min_isr=True)

# The share coordinator's topic (KIP-932): share-partition state, keyed by
# "group:topicId:partition" (Kafka 4.2's share.coordinator.state.topic.* settings).
SHARE_STATE = InternalTopic(
    SHARE_STATE_TOPIC, SHARE_KEY, "share.coordinator.state.topic",
    {"share.coordinator.state.topic.num.partitions": "50",
     "share.coordinator.state.topic.replication.factor": "3",
     "share.coordinator.state.topic.min.isr": "2",
     "share.coordinator.state.topic.segment.bytes": "104857600"},
    {"cleanup.policy": "compact"},
    has_min_isr=True)

TOPICS: dict[int, InternalTopic] = {t.key_type: t for t in (OFFSETS, TRANSACTIONS, SHARE_STATE)}
INTERNAL_TOPICS = frozenset(t.name for t in TOPICS.values())
DEFAULTS: dict[str, str] = {k: v for t in TOPICS.values() for k, v in t.defaults.items()}


def internal_topic_for(key_type: int) -> InternalTopic:
    """The topic whose partitions coordinate keys of ``key_type`` (INVALID_REQUEST if none)."""
    topic = TOPICS.get(key_type)
    if topic is None:
        raise errors.InvalidRequestError(f"unsupported coordinator key type {key_type}")
    return topic


def find_coordinator(controller: Controller, props: Mapping[str, str], key: str,
                     key_type: int) -> BrokerInfo:
    """The broker coordinating ``key``; creates the internal topic on first use and
    raises COORDINATOR_NOT_AVAILABLE until it has a live leader."""
    internal = internal_topic_for(key_type)
    topic = controller.topics.get(internal.name)
    if topic is None:
        try:
            internal.create(controller, props)
        except errors.KafkaError as exc:
            log.warning("cannot create %s: %s", internal.name, exc)
        raise errors.CoordinatorNotAvailableError(f"{internal.name} is being created")
    state = topic.partitions[coordinator_partition(key, len(topic.partitions))]
    info = controller.brokers.get(state.leader)
    if state.leader < 0 or info is None or not info.alive:
        raise errors.CoordinatorNotAvailableError(
            f"{internal.name}-{state.partition} has no leader")
    return info
