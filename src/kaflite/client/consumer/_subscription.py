"""What the consumer reads: its subscription, its assignment and a position per partition.

A consumer either *subscribes* (topics or a pattern; the group assigns the
partitions) or *assigns* partitions by hand; the two are exclusive, as in
Java. For each assigned partition the state keeps the fetch position (the
next offset to return, with the leader epoch of the record before it), whether
the application paused it, whether its position must be reset (and how), and
the high watermark, last stable offset and log start offset from the latest
Fetch, which give the lag.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from kaflite.client.consumer._types import RebalanceListener, TopicPartition

__all__ = ["PartitionState", "SubscriptionState"]


# fetch generations are unique across partition states, so a state created for a
# partition assigned again never matches data fetched for the one before it
_GENERATIONS = itertools.count(1)


class IllegalStateError(RuntimeError):
    """subscribe() and assign() mixed, or an operation on an unassigned partition."""


@dataclass
class PartitionState:
    position: int | None = None
    position_epoch: int = -1
    paused: bool = False
    revoking: bool = False         # being revoked: nothing more is fetched or handed out
    # The fetcher runs ahead of the position (see _fetcher): the offset its next Fetch
    # asks for (-1: the position), and a generation bumped whenever the position is
    # set from outside (seek, reset), so data fetched for an old position is dropped.
    fetch_offset: int = -1
    fetch_gen: int = field(default_factory=lambda: next(_GENERATIONS))

    def refetch(self) -> None:
        """Drop what was fetched ahead: fetch again from the position."""
        self.fetch_offset = -1
        self.fetch_gen = next(_GENERATIONS)
    reset: str | None = None       # "earliest", "latest" or a timestamp, when pending
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    preferred_replica: int = -1


class SubscriptionState:
    def __init__(self, default_reset: str) -> None:
        self.default_reset = default_reset
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: RebalanceListener | None = None
        self.user_assigned = False
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.version = 0  # bumped on every assignment change

    @property
    def subscribed(self) -> bool:
        return bool(self.topics) or self.pattern is not None

    def subscribe(self, topics: list[str] | None, pattern: re.Pattern[str] | None,
                  listener: RebalanceListener | None) -> None:
        if self.user_assigned:
            raise IllegalStateError("subscribe() after assign(): call unsubscribe() first")
        self.topics = set(topics or ())
        self.pattern = pattern
        self.listener = listener

    def matches(self, topic: str) -> bool:
        if topic in self.topics:
            return True
        return self.pattern is not None and self.pattern.fullmatch(topic) is not None

    def assign_from_user(self, partitions: list[TopicPartition]) -> None:
        if self.subscribed:
            raise IllegalStateError("assign() after subscribe(): call unsubscribe() first")
        self.user_assigned = True
        self.set_assignment(partitions)

    def set_assignment(self, partitions: list[TopicPartition] | set[TopicPartition]) -> None:
        old = self.assignment
        self.assignment = {tp: old.get(tp) or PartitionState() for tp in partitions}
        self.version += 1

    def unsubscribe(self) -> None:
        self.topics.clear()
        self.pattern = None
        self.listener = None
        self.user_assigned = False
        self.assignment = {}
        self.version += 1

    def state(self, tp: TopicPartition) -> PartitionState:
        s = self.assignment.get(tp)
        if s is None:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")
        return s

    def fetchable(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items()
                if not s.paused and not s.revoking and s.position is not None
                and s.reset is None]

    def needing_position(self) -> list[TopicPartition]:
        return [tp for tp, s in self.assignment.items() if s.position is None or s.reset]

    def seek(self, tp: TopicPartition, offset: int, epoch: int = -1) -> None:
        s = self.state(tp)
        s.position, s.position_epoch, s.reset = offset, epoch, None
        s.refetch()

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        s = self.state(tp)
        s.reset = strategy
        s.refetch()

    def all_consumed(self) -> dict[TopicPartition, int]:
        return {tp: s.position for tp, s in self.assignment.items() if s.position is not None}
