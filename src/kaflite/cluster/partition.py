"""One partition replica on one broker: its log, its role, and the leader's bookkeeping.

As leader, a ``Partition`` tracks every follower's log end offset (reported by
the follower's own Fetch requests) and derives the high watermark: the
smallest log end offset across the ISR. A follower that has not caught up to
the leader's log end within ``replica.lag.time.max.ms`` is dropped from the
ISR; one that reaches the high watermark again is added back (both through the
controller, as Kafka's AlterPartition). Producers with acks=all wait here for
the high watermark to pass their batch; consumers' long-poll Fetches wait here
for new data. read_committed consumers read up to the last stable offset instead
(open transactions hold it below the high watermark).

As follower, it only appends what its replica fetcher brings and keeps the
high watermark the leader reports (capped by its own log end).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from kaflite.cluster.controller import PartitionState
from kaflite.cluster.log import PartitionLog
from kaflite.protocol import errors

__all__ = ["FetchWatcher", "FollowerState", "Partition"]


class FetchWatcher(Protocol):
    """A fetch session holding this partition (``kaflite.cluster.fetch_session``)."""

    def mark(self, tp: tuple[str, int]) -> bool: ...

    def fetched_at_ms(self, tp: tuple[str, int]) -> float | None:
        """When the session last fetched while holding ``tp`` (None: it does not)."""
        ...


@dataclass
class FollowerState:
    log_end_offset: int = -1
    last_caught_up_ms: float = field(default_factory=lambda: time.monotonic() * 1000)
    last_fetch_ms: float = 0.0
    # The follower's fetch session, which holds this partition at ``log_end_offset``
    # without naming it again while nothing moves: each fetch in it counts as one at
    # that position (an idle partition is not read at every fetch; issue 36).
    session: FetchWatcher | None = None

    def caught_up_ms(self, tp: tuple[str, int], leader_log_end: int) -> float:
        if self.session is not None and self.log_end_offset >= leader_log_end:
            fetched = self.session.fetched_at_ms(tp)
            if fetched is not None:
                return max(self.last_caught_up_ms, fetched)
        return self.last_caught_up_ms


class Partition:
    def __init__(self, broker_id: int, topic: str, index: int, topic_id: uuid.UUID,
                 log: PartitionLog) -> None:
        self.broker_id = broker_id
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.log = log
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: list[int] = []
        self.isr: list[int] = []
        self.high_watermark = 0
        self.checkpointed_hw = 0     # as last written to replication-offset-checkpoint
        self.epoch_start_offset = -1  # as leader: the log end when its epoch began
        self.followers: dict[int, FollowerState] = {}
        self._data_waiters: set[asyncio.Future[None]] = set()
        self._watchers: set[FetchWatcher] = set()
        self._hw_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.isr_change_pending = False

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the high watermark, held down by the oldest transaction that
        is open, or closed by a marker the high watermark has not passed yet.

        read_committed consumers read up to here. It only moves up when the high
        watermark does (a marker counts once replicated), so the fetchers woken
        by a high watermark change are the ones an LSO change must wake too.
        """
        return self.log.last_stable_offset(self.high_watermark)

    # -- role changes ------------------------------------------------------------
    def apply(self, state: PartitionState) -> tuple[bool, bool]:
        """Adopt the controller's state; returns (became_leader, became_follower)."""
        was_leader = self.is_leader
        old_leader, old_epoch = self.leader, self.leader_epoch
        self.replicas = list(state.replicas)
        self.isr = list(state.isr)
        self.partition_epoch = state.partition_epoch
        self.leader = state.leader
        self.leader_epoch = state.leader_epoch
        self.isr_change_pending = False
        became_leader = self.is_leader and (not was_leader or old_epoch != state.leader_epoch)
        became_follower = not self.is_leader and (was_leader or old_leader != state.leader
                                                  or old_epoch != state.leader_epoch)
        if became_leader:
            # Kafka: a new leader starts a new epoch at its log end offset.
            self.log.assign_epoch(self.leader_epoch, self.log_end_offset)
            self.epoch_start_offset = self.log_end_offset
            now = time.monotonic() * 1000
            self.followers = {r: FollowerState(last_caught_up_ms=now)
                              for r in self.replicas if r != self.broker_id}
            self.high_watermark = min(max(self.high_watermark, 0), self.log_end_offset)
        if self.is_leader:
            # A new leader, or a smaller ISR: the high watermark may move now, not at
            # the next follower fetch that moves a position (``update_follower``).
            self.maybe_advance_hw()
        if not self.is_leader:
            self.followers = {}
            self._fail_hw_waiters()
        self.wake_fetchers()
        return became_leader, became_follower

    # -- leader bookkeeping ------------------------------------------------------------
    def update_follower(self, replica: int, fetch_offset: int,
                        session: FetchWatcher | None = None) -> bool:
        """Record a follower's fetch position (and the fetch session it fetches in);
        returns True if the ISR should grow."""
        st = self.followers.get(replica)
        if st is None:
            st = self.followers[replica] = FollowerState()
        now = time.monotonic() * 1000
        moved = st.log_end_offset != fetch_offset
        st.log_end_offset = fetch_offset
        st.last_fetch_ms = now
        st.session = session
        if fetch_offset >= self.log_end_offset:
            st.last_caught_up_ms = now
        # Only a follower whose position moved can move the high watermark (the leader's
        # own appends and ISR changes check it themselves): an idle partition costs a
        # follower's fetch no high-watermark pass, which at thousands of partitions a
        # fetch held the event loop (issue 36).
        if moved:
            self.maybe_advance_hw()
        return (replica not in self.isr and replica in self.replicas
                and fetch_offset >= self.high_watermark and not self.isr_change_pending)

    def lagging_isr_members(self, lag_ms: float) -> list[int]:
        now = time.monotonic() * 1000
        leo, tp = self.log_end_offset, (self.topic, self.index)
        return [r for r in self.isr if r != self.broker_id and r in self.followers
                and now - self.followers[r].caught_up_ms(tp, leo) > lag_ms]

    @property
    def high_watermark_lagging(self) -> bool:
        """A new leader whose high watermark has not yet reached the start of its epoch:
        offsets it would give now could be lower than the last leader gave (KIP-207)."""
        return self.is_leader and self.high_watermark < self.epoch_start_offset

    def maybe_advance_hw(self) -> None:
        if not self.is_leader:
            return
        leo = self.log_end_offset
        ends = [leo]
        for r in self.isr:
            if r != self.broker_id:
                st = self.followers.get(r)
                ends.append(st.log_end_offset if st is not None else -1)
        new_hw = min(ends)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            self._release_hw_waiters()
            self.wake_fetchers()

    def set_follower_hw(self, leader_hw: int) -> None:
        hw = min(leader_hw, self.log_end_offset)
        if hw != self.high_watermark:
            self.high_watermark = hw
            self.wake_fetchers()

    # -- waiting -------------------------------------------------------------------
    def wake_fetchers(self) -> None:
        """Something a fetch would answer changed: wake long polls, mark sessions."""
        waiters, self._data_waiters = self._data_waiters, set()
        for f in waiters:
            if not f.done():
                f.set_result(None)
        if self._watchers:
            tp = (self.topic, self.index)
            gone = [w for w in self._watchers if not w.mark(tp)]
            for w in gone:
                self._watchers.discard(w)

    def watch(self, watcher: FetchWatcher) -> None:
        """``watcher`` is marked at every ``wake_fetchers`` until it says it is gone."""
        self._watchers.add(watcher)

    def data_waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._data_waiters.add(fut)
        return fut

    def discard_waiter(self, fut: asyncio.Future[None]) -> None:
        self._data_waiters.discard(fut)

    async def wait_for_hw(self, offset: int, timeout: float) -> bool:
        """Wait until the high watermark reaches ``offset``; False on timeout or lost leadership."""
        if self.high_watermark >= offset:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._hw_waiters.append((offset, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except (TimeoutError, asyncio.CancelledError):
            self._hw_waiters = [(o, f) for o, f in self._hw_waiters if f is not fut]
            if not fut.done():
                fut.cancel()
            return False
        except LostLeadership:
            return False
        return self.high_watermark >= offset

    def require_min_isr(self) -> int:
        """acks=all, before appending: ``min.insync.replicas``, or NOT_ENOUGH_REPLICAS when
        the ISR is smaller."""
        min_isr = int(self.log.config.min_insync_replicas)
        if len(self.isr) < min_isr:
            raise errors.NotEnoughReplicasError(
                f"{len(self.isr)} in-sync replicas, min.insync.replicas={min_isr}")
        return min_isr

    async def wait_replicated(self, end_offset: int, timeout: float, min_isr: int) -> None:
        """acks=all: wait until the high watermark reaches ``end_offset``, or raise the
        error a Produce is answered (lost leadership, the ISR shrank, a timeout). As
        Kafka's ``checkEnoughReplicasReachOffset``: a high watermark that covers the write
        is not enough while the ISR is smaller than ``min_isr`` (an ISR shrunk to the
        leader moves the high watermark to its log end at once)."""
        name = f"{self.topic}-{self.index}"
        if await self.wait_for_hw(end_offset, timeout):
            if len(self.isr) < min_isr:
                raise errors.NotEnoughReplicasAfterAppendError(
                    f"{name}: {len(self.isr)} in-sync replicas, min.insync.replicas={min_isr}")
            return
        if not self.is_leader:
            raise errors.NotLeaderOrFollowerError(name)
        if len(self.isr) < min_isr:
            raise errors.NotEnoughReplicasAfterAppendError(name)
        raise errors.RequestTimedOutError(name)

    def _release_hw_waiters(self) -> None:
        keep = []
        for offset, fut in self._hw_waiters:
            if offset <= self.high_watermark:
                if not fut.done():
                    fut.set_result(None)
            else:
                keep.append((offset, fut))
        self._hw_waiters = keep

    def _fail_hw_waiters(self) -> None:
        waiters, self._hw_waiters = self._hw_waiters, []
        for _, fut in waiters:
            if not fut.done():
                fut.set_exception(LostLeadership())


class LostLeadership(Exception):
    """The partition stopped being led here while a producer waited for acks."""
