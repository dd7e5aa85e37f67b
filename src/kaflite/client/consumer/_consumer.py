"""``Consumer``: read records from partition leaders, alone or as a group member.

    async with Consumer({"bootstrap.servers": s, "group.id": "g"}) as consumer:
        consumer.subscribe(["t"])
        async for record in consumer:
            ...

Each ``poll`` does what a Kafka poll does, in this order: coordinator
housekeeping (join or rejoin the group if needed), a due auto-commit,
positions for partitions that have none (committed offsets, else
``auto.offset.reset``), records already buffered returned first, otherwise
Fetches sent to every leader and the network polled until data arrives or the
timeout passes. Metadata is refreshed in the background when stale or when an
error asked for it. Batches are decoded in ``poll``.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, Self

from kaflite.client._aio import wait_event
from kaflite.client._base import BaseClient
from kaflite.client.consumer._coordinator import GroupMember
from kaflite.client.consumer._fetcher import Fetcher
from kaflite.client.consumer._group_client import CommitFailedError, GroupClient, MemberHooks
from kaflite.client.consumer._membership import ConsumerMembership
from kaflite.client.consumer._offsets import EARLIEST, LATEST, list_offsets
from kaflite.client.consumer._subscription import IllegalStateError, SubscriptionState
from kaflite.client.consumer._types import (
    ConsumerRecord,
    GroupMembershipOperation,
    K,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RebalanceListener,
    RecordList,
    TopicPartition,
    V,
)
from kaflite.client.pool import DATA
from kaflite.client.producer._transactions import ConsumerGroupMetadata
from kaflite.protocol import errors

__all__ = ["CommitCallback", "CommitFailedError", "Consumer", "IllegalStateError"]

Offsets = Mapping[TopicPartition, int | OffsetAndMetadata]
# commit_async's callback(offsets, error); what it returns is ignored
CommitCallback = Callable[[Offsets | None, BaseException | None], object]


# OffsetFetch answers that mean the member is no longer the one that asked (KIP-848)
MEMBER_GONE = (errors.UnknownMemberIdError, errors.FencedMemberEpochError)


class Consumer(BaseClient, Generic[K, V]):
    """Generic in the types of the keys (``K``) and values (``V``) it hands out: what
    its deserializers return, bytes without one. Deserializers given as keyword
    arguments type the consumer (``Consumer(c, value_deserializer=json.loads)``);
    given in the config dict, they do not, and ``Consumer[str, Event](c)`` does."""

    ROLE = "consumer"

    def __init__(self, config: Mapping[str, object] | None = None, *,
                 key_deserializer: Callable[[bytes], K] | None = None,
                 value_deserializer: Callable[[bytes], V] | None = None,
                 **kwargs: object) -> None:
        if key_deserializer is not None:
            kwargs["key.deserializer"] = key_deserializer
        if value_deserializer is not None:
            kwargs["value.deserializer"] = value_deserializer
        super().__init__(config, **kwargs)
        c = self.config
        self._subs = SubscriptionState(c.string("auto.offset.reset"))
        self._fetcher: Fetcher[K, V] = Fetcher(self, self._subs, self._events.emit)
        hooks = MemberHooks(self._subs, self._events.emit, self._revoke, self._on_assignment,
                            self._lose, self._fetcher.data_ready.set)
        self._group: GroupClient | None = None
        if c["group.id"]:
            # group.protocol=consumer: KIP-848's member; classic: JoinGroup and SyncGroup
            self._group = (ConsumerMembership(self, hooks) if c["group.protocol"] == "consumer"
                           else GroupMember(self, hooks))
        self._auto_commit = c.bool("enable.auto.commit") and self._group is not None
        self._auto_commit_interval = c.int("auto.commit.interval.ms") / 1000
        self._next_auto_commit = time.monotonic() + self._auto_commit_interval
        self._max_poll_records = c.int("max.poll.records")
        self._api_timeout = c.int("default.api.timeout.ms") / 1000
        self._isolation = 1 if c["isolation.level"] == "read_committed" else 0
        self._iter_buffer: Iterator[ConsumerRecord[K, V]] = iter(())
        self._commit_tasks: set[asyncio.Task[None]] = set()
        self._last_async_commit: asyncio.Task[None] | None = None
        # KIP-714's consumer metrics: the fraction of time poll waited (Java's
        # poll-idle-ratio) and, in a group, the number of partitions assigned
        self._poll_idle = self.metrics.sensor("poll.idle.ratio", ("avg",))
        self._last_poll_start: float | None = None
        if self._group is not None:
            self.metrics.gauge("coordinator.assigned.partitions",
                               lambda: len(self._subs.assignment))

    async def _on_start(self) -> None:
        self.pool.role_providers.append(self._roles)
        if self._group is not None:
            self.pool.role_providers.append(self._group.roles)

    def _roles(self, node_id: int, channel: str) -> list[str]:
        if channel != DATA:
            return []
        led = sorted(str(tp) for tp in self._subs.assignment
                     if (m := self.metadata.leader(tp.topic, tp.partition)) is not None
                     and m.leader == node_id)
        return [f"leader for {', '.join(led)}"] if led else []

    # -- subscription ---------------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | None = None, pattern: str | None = None,
                  listener: RebalanceListener | None = None) -> None:
        """Join the group for ``topics`` (or every topic matching ``pattern``)."""
        if self._group is None:
            raise IllegalStateError("subscribe() needs group.id")
        if (topics is None) == (pattern is None):
            raise ValueError("give topics or a pattern")
        compiled = re.compile(pattern) if pattern is not None else None
        self._subs.subscribe(list(topics) if topics is not None else None, compiled, listener)
        if compiled is not None:
            self.metadata.all_topics = True
            self.metadata.request_update("pattern subscription")
        else:
            self.metadata.add_topics(self._subs.topics)
        self._group.request_rejoin("subscription changed")

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions, outside any group rebalancing."""
        tps = [TopicPartition(*tp) for tp in partitions]
        self._subs.assign_from_user(tps)
        self.metadata.add_topics({tp.topic for tp in tps})
        self._fetcher.clear(set(tps))

    def assignment(self) -> set[TopicPartition]:
        return set(self._subs.assignment)

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member id, for a producer's send_offsets_to_transaction."""
        g = self._group
        if g is None:
            raise errors.KafkaError("this consumer has no group.id")
        return ConsumerGroupMetadata(g.group_id, g.generation, g.member_id, g.instance_id)

    def unsubscribe(self) -> None:
        self._subs.unsubscribe()
        self._fetcher.clear()

    # -- group callbacks ---------------------------------------------------------------------------
    async def _call_listener(self, name: str, tps: set[TopicPartition]) -> None:
        listener = self._subs.listener
        if listener is None or not tps:
            return
        result = getattr(listener, name)(tps)
        if inspect.isawaitable(result):
            await result

    async def _revoke(self, tps: set[TopicPartition], why: str) -> None:
        # Java's markPendingRevocation: from here on no record of these partitions is
        # fetched or handed out, so the positions committed below are exactly what
        # the application has been given (a poll running meanwhile cannot move them).
        for tp in tps:
            state = self._subs.assignment.get(tp)
            if state is not None:
                state.revoking = True
        self._fetcher.clear(set(self._subs.assignment) - tps)
        if self._auto_commit:
            try:
                await self._commit_positions(tps)
            except Exception as exc:
                self._events.emit("offsets", "commit before revoke failed", cause=repr(exc))
        await self._call_listener("on_partitions_revoked", tps)
        keep = set(self._subs.assignment) - tps
        self._subs.set_assignment(keep)
        self._fetcher.clear(keep)
        self._events.emit("rebalance", f"revoked [{', '.join(sorted(map(str, tps)))}]", cause=why)

    async def _lose(self, tps: set[TopicPartition], why: str) -> None:
        # The partitions may be another member's already: nothing is committed for them.
        for tp in tps:
            state = self._subs.assignment.get(tp)
            if state is not None:
                state.revoking = True
        keep = set(self._subs.assignment) - tps
        self._fetcher.clear(keep)
        self._subs.set_assignment(keep)
        if tps:
            listener = self._subs.listener
            if listener is not None:
                result = listener.on_partitions_lost(tps)
                if inspect.isawaitable(result):
                    await result
            self._events.emit("rebalance", f"lost [{', '.join(sorted(map(str, tps)))}]",
                              cause=why)

    async def _on_assignment(self, assigned: set[TopicPartition], generation: int,
                             cooperative: bool) -> None:
        owned = set(self._subs.assignment)
        revoked = owned - assigned
        added = assigned - owned
        if revoked:
            await self._revoke(revoked, f"generation {generation}")
            if cooperative and self._group is not None:
                # KIP-429: rejoin at once so the revoked partitions can be handed over.
                self._group.request_rejoin("cooperative rebalance: partitions revoked")
        self._subs.set_assignment(assigned)
        self._fetcher.clear(assigned)
        self._events.emit("rebalance", f"rebalance: generation {generation}, assigned "
                          f"[{', '.join(sorted(map(str, assigned)))}]")
        await self._call_listener("on_partitions_assigned", added)

    # -- positions ---------------------------------------------------------------------------------
    async def _update_positions(self) -> None:
        needing = self._subs.needing_position()
        if not needing:
            return
        assignment = self._subs.assignment

        def unchanged(tp: TopicPartition, gen: int) -> bool:
            # The answer applies only if nothing moved the position meanwhile (a seek by
            # the application, another lookup, a new assignment).
            state = assignment.get(tp)
            return state is not None and state.fetch_gen == gen and state is \
                self._subs.assignment.get(tp)

        fresh = {tp: assignment[tp].fetch_gen for tp in needing if assignment[tp].reset is None}
        if fresh and self._group is not None:
            try:
                committed = await self._group.fetch_committed(list(fresh), self._api_timeout)
            except MEMBER_GONE as exc:
                # The coordinator forgot or fenced the member while it looked up its
                # offsets: the member rejoins, and these partitions go with its old
                # assignment. Not the application's error (Java's consumer keeps it from
                # poll too); the next pass looks up what the new assignment needs.
                self._events.emit("offsets", "committed offsets not looked up: the member "
                                  "is rejoining", cause=f"{exc.name} on OffsetFetch")
                return
            for tp, om in committed.items():
                if om is not None and tp in fresh and unchanged(tp, fresh[tp]):
                    self._subs.seek(tp, om.offset, om.leader_epoch)
        query: dict[TopicPartition, int] = {}
        gens: dict[TopicPartition, int] = {}
        for tp in self._subs.needing_position():
            state = self._subs.assignment[tp]
            # auto.offset.reset only where it was asked for, or where the committed offset
            # was looked up for this very assignment and there was none: a partition
            # assigned (again) while the lookup above waited gets its own lookup next
            # time. Reset at once, it started from the beginning although the group had
            # committed far into it (30-minute KIP-848 soak of 2026-11-30, seed
            # 1848589100: a new assignment came during an OffsetFetch that the
            # coordinator's moves made slow).
            if state.reset is None and (self._group is not None and (
                    tp not in fresh or not unchanged(tp, fresh[tp]))):
                continue
            strategy = state.reset or self._subs.default_reset
            if strategy == "none":
                raise errors.OffsetOutOfRangeError(f"{tp} has no committed offset and "
                                                   "auto.offset.reset is none")
            query[tp] = EARLIEST if strategy == "earliest" else LATEST
            gens[tp] = state.fetch_gen
        if query:
            found = await list_offsets(self, query, self._isolation, self._api_timeout)
            for tp, ot in found.items():
                if ot is not None and tp in gens and unchanged(tp, gens[tp]):
                    self._subs.seek(tp, ot.offset, ot.leader_epoch)

    def seek(self, tp: TopicPartition | tuple[str, int], offset: int) -> None:
        tp = TopicPartition(*tp)
        self._subs.seek(tp, offset)

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps or tuple(self._subs.assignment):
            self._subs.request_reset(TopicPartition(*tp), "earliest")

    def seek_to_end(self, *tps: TopicPartition) -> None:
        for tp in tps or tuple(self._subs.assignment):
            self._subs.request_reset(TopicPartition(*tp), "latest")

    async def position(self, tp: TopicPartition | tuple[str, int]) -> int:
        tp = TopicPartition(*tp)
        state = self._subs.state(tp)
        deadline = time.monotonic() + self._api_timeout
        # Never the old position while a reset (seek_to_beginning...) is pending.
        while state.position is None or state.reset:
            await self.start()
            await self._update_positions()
            if state.position is not None and not state.reset:
                break
            if time.monotonic() > deadline:
                raise errors.RequestTimedOutError(f"no position for {tp} within "
                                                  "default.api.timeout.ms")
            await asyncio.sleep(self.config.int("retry.backoff.ms") / 1000)
        return state.position

    def pause(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._subs.state(TopicPartition(*tp)).paused = True

    def resume(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self._subs.state(TopicPartition(*tp)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._subs.assignment.items() if s.paused}

    def highwater(self, tp: TopicPartition) -> int | None:
        hw = self._subs.state(TopicPartition(*tp)).high_watermark
        return hw if hw >= 0 else None

    def lag(self, tp: TopicPartition) -> int | None:
        """High watermark (from the last Fetch) minus position."""
        s = self._subs.state(TopicPartition(*tp))
        if s.high_watermark < 0 or s.position is None:
            return None
        return max(s.high_watermark - s.position, 0)

    # -- offsets lookups -------------------------------------------------------------------------------
    async def offsets_for_times(self, query: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        await self.start()
        return await list_offsets(self, {TopicPartition(*k): v for k, v in query.items()},
                                  self._isolation, self._api_timeout)

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        await self.start()
        found = await list_offsets(self, {TopicPartition(*tp): EARLIEST for tp in tps},
                                   self._isolation, self._api_timeout)
        return {tp: ot.offset for tp, ot in found.items() if ot is not None}

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        await self.start()
        found = await list_offsets(self, {TopicPartition(*tp): LATEST for tp in tps},
                                   self._isolation, self._api_timeout)
        return {tp: ot.offset for tp, ot in found.items() if ot is not None}

    # -- commits -----------------------------------------------------------------------------------
    def _need_group(self) -> GroupClient:
        if self._group is None:
            raise IllegalStateError("committing offsets needs group.id")
        return self._group

    async def committed(self, tp: TopicPartition | tuple[str, int]) -> int | None:
        await self.start()
        tp = TopicPartition(*tp)
        got = await self._need_group().fetch_committed([tp], self._api_timeout)
        om = got.get(tp)
        return om.offset if om is not None else None

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None
                     = None) -> None:
        """Commit ``offsets`` (default: the current positions) and wait for the answer.

        It first waits for the asynchronous commits asked for before it, so that it
        lands after them: one of those, retried, would otherwise put back a lower
        offset over this one (found by the group soak, KIP-848, seed 366105409)."""
        self._need_group()
        await self.start()
        oms = self._offsets_to_commit(offsets)
        pending = self._last_async_commit
        if pending is not None and not pending.done():
            await asyncio.wait([pending])
        await self._commit_now(oms)

    def _offsets_to_commit(self, offsets: Offsets | None
                           ) -> dict[TopicPartition, OffsetAndMetadata]:
        """``offsets`` as OffsetAndMetadata, or, for None, the positions now."""
        if offsets is None:
            return {tp: OffsetAndMetadata(s.position, "", s.position_epoch)
                    for tp, s in self._subs.assignment.items() if s.position is not None}
        return {TopicPartition(*tp): (o if isinstance(o, OffsetAndMetadata)
                                      else OffsetAndMetadata(o))
                for tp, o in offsets.items()}

    async def _commit_now(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if offsets:
            await self._need_group().commit(offsets, self._api_timeout)

    def commit_async(self, offsets: Offsets | None = None,
                     callback: CommitCallback | None = None) -> asyncio.Task[None]:
        """Commit without waiting; ``callback(offsets, error)`` reports the outcome.

        As Java's ``commitAsync``, commits are sent in the order they were asked for and
        their callbacks run in that order: each waits for the one before it (with its
        retries), so a retried commit never lands after a later, higher one. Without
        ``offsets`` it commits the positions at the call, as Java's does."""
        before = self._last_async_commit
        oms = self._offsets_to_commit(offsets)

        async def run() -> None:
            if before is not None and not before.done():
                await asyncio.wait([before])
            try:
                await self.start()
                await self._commit_now(oms)
            except Exception as exc:
                if callback is not None:
                    callback(offsets, exc)
                else:
                    self._events.emit("offsets", "async commit failed", cause=repr(exc))
                return
            if callback is not None:
                callback(offsets, None)

        task = asyncio.get_running_loop().create_task(run())
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)
        self._last_async_commit = task
        return task

    async def _commit_positions(self, tps: set[TopicPartition]) -> None:
        await self._commit_now({tp: om for tp, om in self._offsets_to_commit(None).items()
                                if tp in tps})

    # -- polling -----------------------------------------------------------------------------------
    async def getmany(self, *partitions: TopicPartition, timeout_ms: int = 0,
                      max_records: int | None = None
                      ) -> dict[TopicPartition, RecordList[K, V]]:
        """Records by partition: whatever is buffered, else wait up to ``timeout_ms``.

        Each partition's records come as a ``RecordList``: a read-only sequence
        whose ``ConsumerRecord`` objects are made as they are iterated.
        """
        await self.start()
        started = time.monotonic()
        try:
            return await self._getmany(started, partitions, timeout_ms, max_records)
        finally:
            self._record_poll(started)

    def _record_poll(self, started: float) -> None:
        """Java's poll idle ratio: the time in this poll over that plus the time since
        the previous poll began."""
        ended = time.monotonic()
        since_last = started - self._last_poll_start if self._last_poll_start else 0.0
        self._last_poll_start = started
        if ended - started + since_last > 0:
            self._poll_idle.record((ended - started) / (ended - started + since_last))

    async def _getmany(self, started: float, partitions: tuple[TopicPartition, ...],
                       timeout_ms: int, max_records: int | None
                       ) -> dict[TopicPartition, RecordList[K, V]]:
        deadline = started + timeout_ms / 1000
        limit = max_records or self._max_poll_records
        fetcher = self._fetcher
        while True:
            fetcher.raise_errors()
            await self._housekeeping(deadline)
            if fetcher.has_buffered():
                out = fetcher.drain(limit)
                fetcher.send_fetches()  # prefetch while the caller works
                if out:
                    if partitions:
                        out = {tp: r for tp, r in out.items() if tp in partitions}
                    return {tp: r for tp, r in out.items() if r}
            fetcher.data_ready.clear()
            fetcher.send_fetches()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            if not await wait_event(fetcher.data_ready, remaining):
                return {}

    async def poll(self, timeout_ms: int = 1000, max_records: int | None = None
                   ) -> RecordList[K, V]:
        """The next records, in partition order, waiting up to ``timeout_ms``."""
        got = await self.getmany(timeout_ms=timeout_ms, max_records=max_records)
        if len(got) == 1:
            return next(iter(got.values()))
        return RecordList.concat(list(got.values()))

    async def getone(self) -> ConsumerRecord[K, V]:
        while True:
            record = next(self._iter_buffer, None)
            if record is not None:
                return record
            self._iter_buffer = iter(await self.poll(timeout_ms=1000))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ConsumerRecord[K, V]:
        if self._closed:
            raise StopAsyncIteration
        return await self.getone()

    async def _housekeeping(self, deadline: float) -> None:
        group = self._group
        if group is not None:
            group.last_poll = time.monotonic()
            if self._subs.subscribed:
                await group.ensure_active_group(deadline - time.monotonic())
            if self._auto_commit and time.monotonic() >= self._next_auto_commit:
                self._next_auto_commit = time.monotonic() + self._auto_commit_interval
                if self._subs.assignment:
                    self.commit_async()
        if self._subs.needing_position():
            await self._update_positions()

    def _telemetry_resource(self) -> dict[str, str]:
        labels = super()._telemetry_resource()
        for name, label in (("group.id", "group_id"), ("group.instance.id",
                                                       "group_instance_id")):
            value = self.config.optional_string(name)
            if value:
                labels[label] = value
        return labels

    async def close(self, membership: GroupMembershipOperation = GroupMembershipOperation.DEFAULT
                    ) -> None:
        """Close; ``membership`` says whether the member leaves its group first (KIP-1092:
        by default a dynamic member leaves and a static one stays)."""
        if self._closed:
            return
        group = self._group
        if group is not None and self._started:
            if self._auto_commit and self._subs.assignment:
                try:
                    await self._commit_positions(set(self._subs.assignment))
                except Exception as exc:
                    self._events.emit("offsets", "final commit failed", cause=repr(exc))
            if self._commit_tasks:
                await asyncio.wait(list(self._commit_tasks), timeout=5)
            await group.close(membership)
        await self._fetcher.close()
        await super().close()
