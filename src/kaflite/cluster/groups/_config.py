"""The group coordinator's broker settings, with Kafka 4.0's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kaflite.cluster.internal_topics import OFFSETS

__all__ = ["GROUP_DEFAULTS", "GroupConfig"]

GROUP_DEFAULTS: dict[str, str] = {
    **OFFSETS.defaults,
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
}

# Kafka's GroupCoordinatorConfig.CLASSIC_GROUP_NEW_MEMBER_JOIN_TIMEOUT_MS (internal).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    offsets_partitions: int = 50
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

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> GroupConfig:
        def get(name: str) -> int:
            return int(props.get(name, GROUP_DEFAULTS[name]))

        return cls(
            offsets_partitions=OFFSETS.partitions(props),
            commit_timeout_ms=get("offsets.commit.timeout.ms"),
            retention_ms=get("offsets.retention.minutes") * 60_000,
            retention_check_interval_ms=get("offsets.retention.check.interval.ms"),
            load_buffer_size=get("offsets.load.buffer.size"),
            metadata_max_bytes=get("offset.metadata.max.bytes"),
            initial_rebalance_delay_ms=get("group.initial.rebalance.delay.ms"),
            min_session_timeout_ms=get("group.min.session.timeout.ms"),
            max_session_timeout_ms=get("group.max.session.timeout.ms"),
            max_size=get("group.max.size"),
        )
