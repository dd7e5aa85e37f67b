"""The group coordinator's broker settings, with Kafka 4.0's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["GROUP_DEFAULTS", "GroupConfig"]

GROUP_DEFAULTS: dict[str, str] = {
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.segment.bytes": "104857600",
    "offsets.topic.compression.codec": "0",
    "offsets.commit.timeout.ms": "5000",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offsets.load.buffer.size": "5242880",
    "offset.metadata.max.bytes": "4096",
    "group.initial.rebalance.delay.ms": "3000",
    "group.min.session.timeout.ms": "6000",
    "group.max.session.timeout.ms": "1800000",
    "group.max.size": "2147483647",
    "transaction.state.log.num.partitions": "50",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.segment.bytes": "104857600",
}

# Kafka's GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS (internal).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    offsets_partitions: int = 50
    offsets_replication_factor: int = 3
    offsets_segment_bytes: int = 104857600
    commit_timeout_ms: int = 5000
    retention_ms: int = 10080 * 60_000
    retention_check_interval_ms: int = 600000
    load_buffer_size: int = 5242880
    metadata_max_bytes: int = 4096
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2147483647
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    txn_partitions: int = 50
    txn_replication_factor: int = 3
    txn_min_isr: int = 2
    txn_segment_bytes: int = 104857600

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> GroupConfig:
        def get(name: str) -> int:
            return int(props.get(name, GROUP_DEFAULTS[name]))

        return cls(
            offsets_partitions=get("offsets.topic.num.partitions"),
            offsets_replication_factor=get("offsets.topic.replication.factor"),
            offsets_segment_bytes=get("offsets.topic.segment.bytes"),
            commit_timeout_ms=get("offsets.commit.timeout.ms"),
            retention_ms=get("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=get("offsets.retention.check.interval.ms"),
            load_buffer_size=get("offsets.load.buffer.size"),
            metadata_max_bytes=get("offset.metadata.max.bytes"),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=get("group.min.session.timeout.ms"),
            max_session_timeout_ms=get("group.max.session.timeout.ms"),
            max_size=get("group.max.size"),
            txn_partitions=get("transaction.state.log.num.partitions"),
            txn_replication_factor=get("transaction.state.log.replication.factor"),
            txn_min_isr=get("transaction.state.log.min.isr"),
            txn_segment_bytes=get("transaction.state.log.segment.bytes"),
        )
