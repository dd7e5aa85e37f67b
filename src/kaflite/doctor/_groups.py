"""One group's state across all its members: its generations and its coordinator.

A rebalance of the group is a generation (classic: a JoinGroup answered with a
generation higher than any seen) or a member epoch (KIP-848: a
ConsumerGroupHeartbeat answered with an epoch higher than any seen) that is new.
The coordinator is the broker that answers the members' group requests without an
error; when another broker starts doing so, the coordinator moved.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from kaflite.doctor._model import Evidence, Request, evidence_of

__all__ = ["GroupState", "Move", "NewGeneration", "peak_in_window"]

JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT = 11, 68
# Requests a member sends its group's coordinator (and that name the group at the top):
# OffsetCommit, OffsetFetch (before v8), JoinGroup, Heartbeat, LeaveGroup, SyncGroup,
# TxnOffsetCommit, ConsumerGroupHeartbeat, ShareGroupHeartbeat
COORDINATOR_APIS = frozenset({8, 9, 11, 12, 13, 14, 28, 68, 76})
EVENTS_KEPT = 1024


@dataclass(frozen=True, slots=True)
class NewGeneration:
    timestamp: float
    generation: int
    client_id: str | None
    record: Evidence


@dataclass(frozen=True, slots=True)
class Move:
    timestamp: float
    from_broker: int
    to_broker: int
    record: Evidence


def peak_in_window(times: list[float], window_s: float) -> tuple[int, int]:
    """The most of ``times`` (sorted) within any ``window_s``, and the index where that
    window starts."""
    best = best_start = start = 0
    for end, t in enumerate(times):
        while t - times[start] >= window_s:
            start += 1
        if end - start + 1 > best:
            best, best_start = end - start + 1, start
    return best, best_start


class GroupState:
    def __init__(self, source: str, group: str) -> None:
        self.source = source
        self.group = group
        self.max_generation = -1
        self.generations: deque[NewGeneration] = deque(maxlen=EVENTS_KEPT)
        self.coordinator: int | None = None
        self.moves: deque[Move] = deque(maxlen=EVENTS_KEPT)
        self.clients: set[str | None] = set()

    def feed(self, r: Request) -> None:
        self.clients.add(r.client_id)
        ok = not r.errors
        new = r.generation is not None and r.generation > max(self.max_generation, 0)
        if ok and new and r.api_key in (JOIN_GROUP, CONSUMER_GROUP_HEARTBEAT):
            assert r.generation is not None
            self.max_generation = r.generation
            self.generations.append(NewGeneration(r.timestamp, r.generation, r.client_id,
                                                  evidence_of(r)))
        if ok and r.api_key in COORDINATOR_APIS:
            if self.coordinator is not None and r.broker != self.coordinator:
                self.moves.append(Move(r.timestamp, self.coordinator, r.broker,
                                       evidence_of(r)))
            self.coordinator = r.broker

    def rebalance_peak(self, window_s: float) -> tuple[int, list[NewGeneration]]:
        events = list(self.generations)
        count, start = peak_in_window([e.timestamp for e in events], window_s)
        return count, events[start:start + count]

    def flapping(self, window_s: float) -> tuple[int, list[Move]]:
        """The most moves within any ``window_s`` among windows where the coordinator
        went back to a broker it had left; (0, []) when it never did."""
        moves = list(self.moves)
        best: tuple[int, list[Move]] = (0, [])
        start = 0
        for end, m in enumerate(moves):
            while m.timestamp - moves[start].timestamp >= window_s:
                start += 1
            span = moves[start:end + 1]
            returned = any(x.to_broker in {y.from_broker for y in span[:i]}
                           for i, x in enumerate(span))
            if returned and len(span) > best[0]:
                best = (len(span), span)
        return best
