"""Share-group settings: the broker's ``group.share.*`` configs, with Kafka 4.2's names,
defaults and ranges, and the group-level configs that override them.

Kafka lets a group override some of these (``IncrementalAlterConfigs`` on a GROUP
resource: ``share.record.lock.duration.ms``, ``share.delivery.count.limit``,
``share.partition.max.record.locks``, ``share.auto.offset.reset``,
``share.isolation.level``, ``share.session.timeout.ms``,
``share.heartbeat.interval.ms``). ``ShareConfig.for_group`` is the one place such
an override applies: it takes the group's configs (a mapping; empty until kaflite
stores group configs) and returns the settings that group runs with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

__all__ = ["SHARE_DEFAULTS", "ShareConfig", "ShareGroupSettings", "duration_ms"]

SHARE_DEFAULTS: dict[str, str] = {
    "group.share.session.timeout.ms": "45000",
    "group.share.min.session.timeout.ms": "45000",
    "group.share.max.session.timeout.ms": "60000",
    "group.share.heartbeat.interval.ms": "5000",
    "group.share.min.heartbeat.interval.ms": "5000",
    "group.share.max.heartbeat.interval.ms": "15000",
    "group.share.max.size": "200",
    "group.share.assignors": "simple",
    "group.share.record.lock.duration.ms": "30000",
    "group.share.min.record.lock.duration.ms": "15000",
    "group.share.max.record.lock.duration.ms": "60000",
    "group.share.delivery.count.limit": "5",
    "group.share.min.delivery.count.limit": "2",
    "group.share.max.delivery.count.limit": "10",
    "group.share.partition.max.record.locks": "2000",
    "group.share.min.partition.max.record.locks": "100",
    "group.share.max.partition.max.record.locks": "4000",
    "group.share.max.share.sessions": "2000",
    # The share coordinator (its topic's settings are with the other internal topics').
    "share.coordinator.write.timeout.ms": "5000",
    "share.coordinator.load.buffer.size": "5242880",
    "share.coordinator.snapshot.update.records.per.snapshot": "500",
}

AUTO_OFFSET_RESETS = ("latest", "earliest")
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?",
                       re.IGNORECASE)


def duration_ms(reset: str) -> int | None:
    """``by_duration:<ISO-8601 duration>`` (KIP-1106) in milliseconds; None for another
    reset policy or a malformed duration."""
    kind, _, text = reset.partition(":")
    match = _DURATION.fullmatch(text) if kind == "by_duration" else None
    if match is None or not any(match.groups()):
        return None
    days, hours, minutes, seconds = match.groups()
    return int(((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000
               + float(seconds or 0) * 1000)
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")


@dataclass(frozen=True)
class ShareGroupSettings:
    """What one share group runs with (broker defaults, then its group configs)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    auto_offset_reset: str = "latest"
    isolation_level: str = "read_uncommitted"


@dataclass(frozen=True)
class ShareConfig:
    defaults: ShareGroupSettings = ShareGroupSettings()
    max_size: int = 200
    assignors: tuple[str, ...] = ("simple",)
    max_share_sessions: int = 2000
    write_timeout_ms: int = 5000
    load_buffer_size: int = 5242880
    updates_per_snapshot: int = 500

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> ShareConfig:
        def get(name: str) -> int:
            return int(props.get(name, SHARE_DEFAULTS[name]))

        def ranged(name: str) -> int:
            value = get(f"group.share.{name}")
            low, high = get(f"group.share.min.{name}"), get(f"group.share.max.{name}")
            if not low <= value <= high:
                raise ValueError(f"group.share.{name} must be between group.share.min.{name} "
                                 f"({low}) and group.share.max.{name} ({high}), not {value}")
            return value

        session = ranged("session.timeout.ms")
        heartbeat = ranged("heartbeat.interval.ms")
        if heartbeat >= session:
            raise ValueError("group.share.heartbeat.interval.ms must be less than "
                             "group.share.session.timeout.ms")
        names = tuple(n.strip() for n in props.get(
            "group.share.assignors", SHARE_DEFAULTS["group.share.assignors"]).split(",") if n)
        if any(n not in ("simple", "org.apache.kafka.coordinator.group.assignor.SimpleAssignor")
               for n in names):
            raise ValueError("group.share.assignors: kaflite has the simple assignor only")
        per_snapshot = get("share.coordinator.snapshot.update.records.per.snapshot")
        if not 0 <= per_snapshot <= 500:
            raise ValueError("share.coordinator.snapshot.update.records.per.snapshot must be "
                             f"between [0, 500], not {per_snapshot}")
        return cls(
            defaults=ShareGroupSettings(
                session_timeout_ms=session, heartbeat_interval_ms=heartbeat,
                record_lock_duration_ms=ranged("record.lock.duration.ms"),
                delivery_count_limit=ranged("delivery.count.limit"),
                partition_max_record_locks=ranged("partition.max.record.locks")),
            max_size=get("group.share.max.size"), assignors=("simple",),
            max_share_sessions=get("group.share.max.share.sessions"),
            write_timeout_ms=get("share.coordinator.write.timeout.ms"),
            load_buffer_size=get("share.coordinator.load.buffer.size"),
            updates_per_snapshot=per_snapshot)

    def for_group(self, group_configs: Mapping[str, str]) -> ShareGroupSettings:
        """The settings of a group whose group-level configs are ``group_configs``."""
        s = self.defaults
        if not group_configs:
            return s

        def num(name: str, current: int) -> int:
            value = group_configs.get(name)
            return current if value is None else int(value)

        reset = group_configs.get("share.auto.offset.reset", s.auto_offset_reset).strip()
        if duration_ms(reset) is None:
            reset = reset.lower()
        isolation = group_configs.get("share.isolation.level", s.isolation_level).lower()
        return replace(
            s,
            session_timeout_ms=num("share.session.timeout.ms", s.session_timeout_ms),
            heartbeat_interval_ms=num("share.heartbeat.interval.ms", s.heartbeat_interval_ms),
            record_lock_duration_ms=num("share.record.lock.duration.ms",
                                        s.record_lock_duration_ms),
            delivery_count_limit=num("share.delivery.count.limit", s.delivery_count_limit),
            partition_max_record_locks=num("share.partition.max.record.locks",
                                           s.partition_max_record_locks),
            auto_offset_reset=reset if reset in AUTO_OFFSET_RESETS or duration_ms(reset)
            is not None else s.auto_offset_reset,
            isolation_level=isolation if isolation in ISOLATION_LEVELS else s.isolation_level)
