"""Small value types of the consumer API."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

__all__ = ["ConsumerRecord", "OffsetAndMetadata", "OffsetAndTimestamp",
           "RebalanceListener", "TopicPartition"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class ConsumerRecord:
    """One consumed record. ``key``/``value`` are bytes (or deserialized)."""

    __slots__ = ("headers", "key", "offset", "partition", "timestamp", "topic", "value")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int, key: Any,
                 value: Any, headers: Sequence[tuple[str, bytes | None]] = ()) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers

    def __repr__(self) -> str:
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
                f"value={self.value!r})")


class RebalanceListener:
    """Override the callbacks you need (Java's ``ConsumerRebalanceListener``).

    Each may be a plain function or a coroutine function.
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Any:
        return None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Any:
        return None

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Any:
        return self.on_partitions_revoked(lost)


ListenerCallback = Callable[[set[TopicPartition]], Any]
