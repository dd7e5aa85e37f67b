"""Group configs: Kafka 4's dynamic per-group settings (ConfigResource type GROUP, 32).

A group's configs override the broker's group coordinator settings for that one
group (Kafka's ``GroupConfig``). They are set with IncrementalAlterConfigs (or
AlterConfigs), described with DescribeConfigs, stored on the controller beside
the topic configs, and read by the coordinator on every heartbeat, so a change
applies at the member's next heartbeat. A group needs not exist to carry configs.

Names, defaults and checks are Kafka's (``GroupConfig.validate``): a value must
lie within the broker's ``group.consumer.min/max.*`` (consumer groups) and
``group.share.min/max.*`` (share groups) bounds, and a session timeout must be
greater than its heartbeat interval. The default of each is the broker's own
setting (``group.consumer.session.timeout.ms`` and so on), as Kafka's
``extractGroupConfigMap`` makes it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kaflite.cluster.groups._config import GROUP_DEFAULTS
from kaflite.cluster.share._config import SHARE_DEFAULTS
from kaflite.config import ConfigError

__all__ = [
    "GROUP_CONFIG_NAMES",
    "GROUP_CONFIG_TYPES",
    "SHARE_GROUP_DEFAULTS",
    "GroupSettings",
    "effective_group_configs",
    "group_settings",
    "validate_group_configs",
]

GROUP_RESOURCE = 32   # ConfigResource.Type.GROUP

# The share group broker settings (``group.share.*``, with Kafka's defaults) are the
# share package's: one table for the broker, the share-partitions and group configs.
SHARE_GROUP_DEFAULTS: dict[str, str] = SHARE_DEFAULTS

# group config -> the broker setting it overrides (its default), with min/max names
_RANGED: dict[str, str] = {
    "consumer.session.timeout.ms": "group.consumer.{}session.timeout.ms",
    "consumer.heartbeat.interval.ms": "group.consumer.{}heartbeat.interval.ms",
    "share.session.timeout.ms": "group.share.{}session.timeout.ms",
    "share.heartbeat.interval.ms": "group.share.{}heartbeat.interval.ms",
    "share.record.lock.duration.ms": "group.share.{}record.lock.duration.ms",
    "share.delivery.count.limit": "group.share.{}delivery.count.limit",
    "share.partition.max.record.locks": "group.share.{}partition.max.record.locks",
}
# Kafka's ConfigDef lower bounds (GroupConfig); 1 for the others
_AT_LEAST = {"share.record.lock.duration.ms": 1000, "share.delivery.count.limit": 2,
             "share.partition.max.record.locks": 100}
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?",
                       re.IGNORECASE)

GROUP_CONFIG_NAMES: tuple[str, ...] = (*_RANGED, "share.auto.offset.reset",
                                       "share.isolation.level")
GROUP_CONFIG_TYPES: dict[str, str] = {**dict.fromkeys(_RANGED, "INT"),
                                      "share.auto.offset.reset": "STRING",
                                      "share.isolation.level": "STRING"}


@dataclass(frozen=True)
class GroupSettings:
    """One group's effective settings: its configs over the broker's."""

    consumer_session_timeout_ms: int
    consumer_heartbeat_interval_ms: int
    share_session_timeout_ms: int
    share_heartbeat_interval_ms: int
    share_record_lock_duration_ms: int
    share_delivery_count_limit: int
    share_partition_max_record_locks: int
    share_auto_offset_reset: str        # latest, earliest or by_duration:<ISO-8601 duration>
    share_isolation_level: str          # read_committed or read_uncommitted


def _broker(props: Mapping[str, str], name: str) -> str:
    return props.get(name, GROUP_DEFAULTS.get(name) or SHARE_GROUP_DEFAULTS[name])


def defaults(props: Mapping[str, str]) -> dict[str, str]:
    """Each group config's default: the broker's setting it overrides."""
    out = {name: _broker(props, pattern.format("")) for name, pattern in _RANGED.items()}
    out["share.auto.offset.reset"] = "latest"
    out["share.isolation.level"] = "read_uncommitted"
    return out


def _valid_reset(value: str) -> bool:
    if value in ("latest", "earliest"):
        return True
    kind, _, duration = value.partition(":")
    match = _DURATION.fullmatch(duration)
    return kind == "by_duration" and match is not None and any(match.groups())


def validate_group_configs(configs: Mapping[str, str | None],
                           props: Mapping[str, str]) -> dict[str, str]:
    """Check a group's complete set of configs against the broker's bounds; return the
    non-null ones. Raises ``ConfigError`` with Kafka's messages."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        if name not in GROUP_CONFIG_TYPES:
            raise ConfigError(name, f"Unknown group config name: {name}")
        if value is not None:
            out[name] = value.strip()
    merged = {**defaults(props), **out}
    ints: dict[str, int] = {}
    for name, pattern in _RANGED.items():
        try:
            ints[name] = int(merged[name])
        except ValueError:
            raise ConfigError(name, f"Invalid value {merged[name]} for configuration {name}: "
                                    "Not a number of type INT") from None
        if ints[name] < _AT_LEAST.get(name, 1):
            raise ConfigError(name, f"Invalid value {ints[name]} for configuration {name}: "
                                    f"Value must be at least {_AT_LEAST.get(name, 1)}")
        low, high = pattern.format("min."), pattern.format("max.")
        if ints[name] < int(_broker(props, low)):
            raise ConfigError(name, f"{name} must be greater than or equal to {low}")
        if ints[name] > int(_broker(props, high)):
            raise ConfigError(name, f"{name} must be less than or equal to {high}")
    for kind in ("consumer", "share"):
        session, beat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if ints[session] <= ints[beat]:
            raise ConfigError(session, f"{session} must be greater than {beat}")
    reset = merged["share.auto.offset.reset"]
    if not _valid_reset(reset):
        raise ConfigError("share.auto.offset.reset",
                          f"Invalid value {reset} for configuration share.auto.offset.reset: "
                          "must be latest, earliest or by_duration:<ISO-8601 duration>")
    level = merged["share.isolation.level"]
    if level not in ISOLATION_LEVELS:
        raise ConfigError("share.isolation.level",
                          f"Invalid value {level} for configuration share.isolation.level: "
                          f"String must be one of: {', '.join(ISOLATION_LEVELS)}")
    return out


def effective_group_configs(configs: Mapping[str, str], props: Mapping[str, str]
                            ) -> dict[str, tuple[str, str]]:
    """Every group config: ``name -> (value, source)`` in DescribeConfigs terms."""
    return {name: (configs[name], "DYNAMIC_GROUP_CONFIG") if name in configs
            else (value, "DEFAULT_CONFIG") for name, value in defaults(props).items()}


def group_settings(configs: Mapping[str, str], props: Mapping[str, str]) -> GroupSettings:
    """The typed settings of a group whose stored configs are ``configs``."""
    v = {name: value for name, (value, _) in effective_group_configs(configs, props).items()}
    return GroupSettings(
        int(v["consumer.session.timeout.ms"]), int(v["consumer.heartbeat.interval.ms"]),
        int(v["share.session.timeout.ms"]), int(v["share.heartbeat.interval.ms"]),
        int(v["share.record.lock.duration.ms"]), int(v["share.delivery.count.limit"]),
        int(v["share.partition.max.record.locks"]), v["share.auto.offset.reset"],
        v["share.isolation.level"])
