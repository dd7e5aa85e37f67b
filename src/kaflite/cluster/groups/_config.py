"""The group coordinator's broker settings, with Kafka 4.0's names and defaults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kaflite.cluster.internal_topics import OFFSETS
from kaflite.cluster.share._config import ShareConfig

__all__ = ["GROUP_DEFAULTS", "ConsumerGroupConfig", "GroupConfig"]

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
    # KIP-848, the consumer group protocol (Kafka 4.0's GroupCoordinatorConfig).
    "group.coordinator.rebalance.protocols": "classic,consumer",
    "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000",
    "group.consumer.max.session.timeout.ms": "60000",
    "group.consumer.heartbeat.interval.ms": "5000",
    "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000",
    "group.consumer.max.size": "2147483647",
    "group.consumer.assignors": "uniform,range",
    "group.consumer.migration.policy": "bidirectional",
}

# Short names and Kafka's class names of the server-side assignors.
ASSIGNOR_ALIASES = {
    "uniform": "uniform", "range": "range",
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")

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
    consumer: ConsumerGroupConfig = field(default_factory=lambda: ConsumerGroupConfig())
    share: ShareConfig = field(default_factory=lambda: ShareConfig())

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
            consumer=ConsumerGroupConfig.from_props(props),
            share=ShareConfig.from_props(props),
        )


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """The ``group.consumer.*`` settings (KIP-848 groups)."""

    protocol_enabled: bool = True
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 2147483647
    assignors: tuple[str, ...] = ("uniform", "range")
    migration_policy: str = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("upgrade", "bidirectional")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("downgrade", "bidirectional")

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> ConsumerGroupConfig:
        return _consumer_settings(props)


def _consumer_settings(props: Mapping[str, str]) -> ConsumerGroupConfig:
    """The ``group.consumer.*`` settings, checked as Kafka checks them at startup."""
    def get(name: str) -> int:
        return int(props.get(name, GROUP_DEFAULTS[name]))

    def ranged(name: str) -> int:
        value = get(f"group.consumer.{name}")
        low, high = get(f"group.consumer.min.{name}"), get(f"group.consumer.max.{name}")
        if not low <= value <= high:
            raise ValueError(f"group.consumer.{name} must be between "
                             f"group.consumer.min.{name} ({low}) and "
                             f"group.consumer.max.{name} ({high}), not {value}")
        return value

    session = ranged("session.timeout.ms")
    heartbeat = ranged("heartbeat.interval.ms")
    if heartbeat >= session:
        raise ValueError("group.consumer.heartbeat.interval.ms must be less than "
                         "group.consumer.session.timeout.ms")
    names = [n.strip() for n in props.get("group.consumer.assignors",
                                          GROUP_DEFAULTS["group.consumer.assignors"]).split(",")]
    assignors = []
    for name in filter(None, names):
        if name not in ASSIGNOR_ALIASES:
            raise ValueError(f"group.consumer.assignors: unknown assignor {name}")
        assignors.append(ASSIGNOR_ALIASES[name])
    if not assignors:
        raise ValueError("group.consumer.assignors must name at least one assignor")
    policy = props.get("group.consumer.migration.policy",
                       GROUP_DEFAULTS["group.consumer.migration.policy"]).strip().lower()
    if policy not in MIGRATION_POLICIES:
        raise ValueError(f"group.consumer.migration.policy: {policy} is not one of "
                         f"{', '.join(MIGRATION_POLICIES)}")
    protocols = {p.strip().lower() for p in props.get(
        "group.coordinator.rebalance.protocols",
        GROUP_DEFAULTS["group.coordinator.rebalance.protocols"]).split(",")}
    return ConsumerGroupConfig("consumer" in protocols, session, heartbeat,
                               get("group.consumer.max.size"), tuple(dict.fromkeys(assignors)),
                               policy)
