"""``LogConfig``: the topic configs that shape one partition's log.

Names and defaults are Kafka 4.0's (``org.apache.kafka.storage.internals.log.LogConfig``
and ``TopicConfig``). ``from_props`` takes the string values a CreateTopics or
IncrementalAlterConfigs request carries and validates each one; a bad value
raises ``ValueError`` whose message names the property, so a handler can turn
it into INVALID_CONFIG.

Two deliberate differences from Kafka:

* ``segment.bytes`` accepts anything from 14 bytes up (Kafka 3.x's lower bound);
  Kafka 4.0 raised the bound to 1 MiB and added the internal
  ``internal.segment.bytes`` for tests. kaflite accepts both names so that small
  test clusters can watch segments roll.
* Names this module does not model are ignored by default (the cluster's
  config layer owns the full list of Kafka topic configs).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["LONG_MAX", "LogConfig"]

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1

CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")

# property name -> (dataclass field, lower bound, upper bound)
_NUMERIC: dict[str, tuple[str, int, int]] = {
    "segment.bytes": ("segment_bytes", 14, INT_MAX),
    "internal.segment.bytes": ("segment_bytes", 14, INT_MAX),
    "segment.ms": ("segment_ms", 1, LONG_MAX),
    "retention.ms": ("retention_ms", -1, LONG_MAX),
    # Kafka leaves retention.bytes unbounded below; any negative value disables it.
    "retention.bytes": ("retention_bytes", -LONG_MAX - 1, LONG_MAX),
    "max.message.bytes": ("max_message_bytes", 0, INT_MAX),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", 0, LONG_MAX),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", 0, LONG_MAX),
    "min.insync.replicas": ("min_insync_replicas", 1, INT_MAX),
    "flush.messages": ("flush_messages", 1, LONG_MAX),
    "flush.ms": ("flush_ms", 0, LONG_MAX),
    "index.interval.bytes": ("index_interval_bytes", 0, INT_MAX),
    "delete.retention.ms": ("delete_retention_ms", 0, LONG_MAX),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", 0, LONG_MAX),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", 1, LONG_MAX),
    "producer.id.expiration.ms": ("producer_id_expiration_ms", 1, LONG_MAX),
}


@dataclass(frozen=True, slots=True)
class LogConfig:
    """One partition's log settings (Kafka topic config names in the comments)."""

    segment_bytes: int = 1 << 30  # segment.bytes: roll when the active segment would exceed it
    segment_ms: int = 604_800_000  # segment.ms: roll a segment after 7 days
    retention_ms: int = 604_800_000  # retention.ms: -1 keeps data forever
    retention_bytes: int = -1  # retention.bytes: -1 means no size limit
    cleanup_policy: tuple[str, ...] = ("delete",)  # cleanup.policy: delete, compact or both
    max_message_bytes: int = 1_048_588  # max.message.bytes: largest batch accepted
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type
    message_timestamp_before_max_ms: int = LONG_MAX  # message.timestamp.before.max.ms
    # message.timestamp.after.max.ms: Kafka 4.0 lowered the default to one hour (KIP-1030).
    message_timestamp_after_max_ms: int = 3_600_000
    min_insync_replicas: int = 1  # min.insync.replicas: kept here for the Produce handler
    flush_messages: int = LONG_MAX  # flush.messages: fsync after this many records
    flush_ms: int = LONG_MAX  # flush.ms: for a periodic flusher; the log itself ignores it
    index_interval_bytes: int = 4096  # index.interval.bytes: bytes between index entries
    delete_retention_ms: int = 86_400_000  # delete.retention.ms: how long tombstones live
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # max.compaction.lag.ms (caps segment.ms if compact)
    # producer.id.expiration.ms is a broker config in Kafka (KIP-854); a log needs it to
    # forget idle producers, so it rides along here.
    producer_id_expiration_ms: int = 86_400_000

    def __post_init__(self) -> None:
        for prop, (name, lo, hi) in _NUMERIC.items():
            if prop == "internal.segment.bytes":
                continue
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise ValueError(f"{prop}: {value!r} is not an integer in [{lo}, {hi}]")
        for policy in self.cleanup_policy:
            if policy not in CLEANUP_POLICIES:
                raise ValueError(f"cleanup.policy: unknown policy {policy!r}")
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ValueError(
                f"message.timestamp.type: {self.message_timestamp_type!r} is not one of "
                f"{', '.join(TIMESTAMP_TYPES)}"
            )
        # Kafka's LogConfig.validateValues: the two compaction lags must be ordered.
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ValueError(
                f"min.compaction.lag.ms: {self.min_compaction_lag_ms} exceeds "
                f"max.compaction.lag.ms {self.max_compaction_lag_ms}"
            )

    # -- derived -----------------------------------------------------------------
    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_segment_ms(self) -> int:
        """Kafka's ``maxSegmentMs``: a compacted topic rolls by max.compaction.lag.ms too."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    # -- conversion ----------------------------------------------------------------
    @classmethod
    def from_props(
        cls,
        props: Mapping[str, str | int | None],
        *,
        base: LogConfig | None = None,
        ignore_unknown: bool = True,
    ) -> LogConfig:
        """Build a config from Kafka property names; unset names keep ``base``'s values.

        Values may be strings (as on the wire) or ints. ``None`` values are skipped
        (DescribeConfigs reports some defaults as null).
        """
        changes: dict[str, object] = {}
        internal_segment: int | None = None
        for prop, raw in props.items():
            if raw is None:
                continue
            if prop in _NUMERIC:
                name, lo, hi = _NUMERIC[prop]
                value = _parse_int(prop, raw, lo, hi)
                if prop == "internal.segment.bytes":
                    internal_segment = value
                else:
                    changes[name] = value
            elif prop == "cleanup.policy":
                changes["cleanup_policy"] = _parse_policy(raw)
            elif prop == "message.timestamp.type":
                text = str(raw).strip()
                if text not in TIMESTAMP_TYPES:
                    raise ValueError(
                        f"message.timestamp.type: {text!r} is not one of {', '.join(TIMESTAMP_TYPES)}"
                    )
                changes["message_timestamp_type"] = text
            elif not ignore_unknown:
                raise ValueError(f"{prop}: unknown topic config")
        if internal_segment is not None:
            # Kafka's LogConfig.segmentSize(): the internal override wins.
            changes["segment_bytes"] = internal_segment
        return dataclasses.replace(base or cls(), **cast("dict[str, Any]", changes))

    def to_props(self) -> dict[str, str]:
        """The config as Kafka property names and string values."""
        out: dict[str, str] = {}
        for prop, (name, _, _) in _NUMERIC.items():
            if prop != "internal.segment.bytes":
                out[prop] = str(getattr(self, name))
        out["cleanup.policy"] = ",".join(self.cleanup_policy)
        out["message.timestamp.type"] = self.message_timestamp_type
        return out


def _parse_int(prop: str, raw: str | int, lo: int, hi: int) -> int:
    if isinstance(raw, bool):
        raise ValueError(f"{prop}: {raw!r} is not an integer")
    try:
        value = raw if isinstance(raw, int) else int(str(raw).strip())
    except ValueError:
        raise ValueError(f"{prop}: {raw!r} is not an integer") from None
    if not lo <= value <= hi:
        raise ValueError(f"{prop}: {value} is outside [{lo}, {hi}]")
    return value


def _parse_policy(raw: str | int) -> tuple[str, ...]:
    # A LIST config: comma separated, case-insensitive as in Kafka's LogConfig.
    parts = [p.strip().lower() for p in str(raw).split(",") if p.strip()]
    for part in parts:
        if part not in CLEANUP_POLICIES:
            raise ValueError(f"cleanup.policy: unknown policy {part!r}")
    return tuple(dict.fromkeys(parts))
