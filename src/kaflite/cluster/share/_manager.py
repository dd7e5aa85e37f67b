"""The broker's share-partition manager (Kafka's ``SharePartitionManager``).

Each broker keeps the share-partitions of the topic partitions it leads, one per
(share group, partition), created on the first ShareFetch that names them. A
new share-partition first reads its persisted state (``Persister.read``: the
share coordinator's ``__share_group_state``); when there is none it starts where
the group's ``share.auto.offset.reset`` says (``latest``, Kafka's default: the
high watermark; ``earliest``: the log start) and writes that first state.
Every change is written back (``Persister.write``); acknowledgements are
answered once their write is durable.

Acquiring reads the log from the share-partition's ``next_fetch_offset`` up to
the high watermark (or the last stable offset for ``read_committed``), hands the
batch offsets to ``SharePartition.acquire``, and returns the whole batches that
hold an acquired record: the client keeps only the acquired offsets, as Kafka's
does.

Leadership moving away closes the partition's share-partitions (their locks
stop; the next leader reads the persisted state, where acquired records are
available again). A share-partition leader that finds its state epoch fenced
(FENCED_STATE_EPOCH: the state was reset by AlterShareGroupOffsets or
DeleteShareGroupOffsets, or a newer leader wrote it) drops its copy and reloads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflite.cluster.groups._timer import LoopTimer, Timer
from kaflite.cluster.log._segment import parse_info
from kaflite.cluster.log._txn_index import AbortedTxn
from kaflite.cluster.share._config import ShareConfig, ShareGroupSettings, duration_ms
from kaflite.cluster.share._partition import (
    Acquired,
    BatchSpan,
    InFlightRecord,
    RecordState,
    SharePartition,
    ShareSnapshot,
)
from kaflite.cluster.share._persister import MemoryPersister, PersistedState, Persister
from kaflite.cluster.share._sessions import ShareSession, ShareSessionCache
from kaflite.protocol import errors
from kaflite.protocol.records import HEADER_SIZE

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition

__all__ = ["FetchedShare", "SharePartitionManager", "persisted_snapshot", "split_batches"]

log = logging.getLogger("kaflite.cluster.share")

Key = tuple[str, str, int]   # (group id, topic, partition)
_TRANSACTIONAL, _CONTROL = 0x10, 0x20


@dataclass(frozen=True)
class FetchedShare:
    records: bytes
    acquired: list[Acquired]


def split_batches(data: bytes, aborted: list[AbortedTxn] | None = None
                  ) -> list[tuple[int, int, BatchSpan]]:
    """(start, end, span) of every whole v2 batch in ``data``. A control batch, and with
    ``aborted`` (read_committed) a batch of an aborted transaction, is a span never to be
    delivered (``control``): the share-partition archives it."""
    out = []
    at = 0
    while at + HEADER_SIZE <= len(data):
        info = parse_info(data, at, at)
        if at + info.size > len(data):
            break
        skip = bool(info.attributes & _CONTROL) or (
            aborted is not None and bool(info.attributes & _TRANSACTIONAL) and any(
                t.producer_id == info.producer_id and t.first_offset <= info.base_offset
                <= t.last_offset for t in aborted))
        out.append((at, at + info.size, BatchSpan(info.base_offset, info.last_offset, skip)))
        at += info.size
    return out


class SharePartitionManager:
    def __init__(self, broker: Broker, persister: Persister | None = None,
                 timer: Timer | None = None) -> None:
        self.broker = broker
        self.config = ShareConfig.from_props(broker.config.props)
        self.sessions = ShareSessionCache(self.config.max_share_sessions)
        self.partitions: dict[Key, SharePartition] = {}
        self.persister: Persister = persister or MemoryPersister()
        self._timer = timer
        self._loading: dict[Key, asyncio.Future[SharePartition]] = {}
        self._waiters: set[asyncio.Future[None]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        # Group configs set here directly (tests), over the controller's (see ``settings``).
        self.group_configs: dict[str, Mapping[str, str]] = {}
        broker.partition_hooks.append(self._on_partition)

    @property
    def timer(self) -> Timer:
        if self._timer is None:
            self._timer = LoopTimer(asyncio.get_running_loop())
        return self._timer

    def settings(self, group_id: str) -> ShareGroupSettings:
        """The settings a group runs with: the broker's ``group.share.*`` settings under its
        group configs (IncrementalAlterConfigs on the GROUP resource, kept by the
        controller), under ``group_configs`` (set directly, as tests do)."""
        stored = self.broker.controller.group_configs.get(group_id, {})
        return self.config.for_group({**stored, **self.group_configs.get(group_id, {})})

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for sp in self.partitions.values():
            sp.close()
        self.partitions.clear()
        if self._timer is not None:
            self._timer.close()
        with contextlib.suppress(ValueError):
            self.broker.partition_hooks.remove(self._on_partition)
        self.persister.close()
        self.wake()

    # -- leadership -----------------------------------------------------------------------------
    def _on_partition(self, p: Partition, was_leader: bool) -> None:
        if p.is_leader and not was_leader:
            return
        for key in [k for k in self.partitions if (k[1], k[2]) == (p.topic, p.index)]:
            sp = self.partitions[key]
            if not p.is_leader or sp.leader_epoch != p.leader_epoch:
                sp.close()
                del self.partitions[key]

    # -- share-partitions -------------------------------------------------------------------------
    async def share_partition(self, group_id: str, p: Partition) -> SharePartition:
        key = (group_id, p.topic, p.index)
        sp = self.partitions.get(key)
        if sp is not None and sp.leader_epoch == p.leader_epoch and not sp.closed:
            return sp
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.get_running_loop().create_future()
            self._loading[key] = loading
            try:
                sp = await self._load(group_id, p)
            except BaseException as exc:
                loading.set_exception(exc)
                loading.exception()   # retrieved: every waiter re-raises it
                raise
            finally:
                self._loading.pop(key, None)
            self.partitions[key] = sp
            loading.set_result(sp)
            return sp
        return await asyncio.shield(loading)

    async def _load(self, group_id: str, p: Partition) -> SharePartition:
        settings = self.settings(group_id)
        epoch = p.leader_epoch
        state = await self.persister.read(group_id, p.topic_id, p.index, epoch)
        sp = SharePartition(group_id, p.topic, p.index, self.timer,
                            lock_duration_ms=settings.record_lock_duration_ms,
                            delivery_count_limit=settings.delivery_count_limit,
                            max_record_locks=settings.partition_max_record_locks,
                            on_change=self._changed)
        sp.leader_epoch = epoch
        sp.topic_id = p.topic_id
        if state is None or state.start_offset < 0:
            start = self._reset_offset(p, settings.auto_offset_reset)
            sp.restore(start, [], 0 if state is None else state.state_epoch)
            code = await self.persister.initialize(group_id, p.topic_id, p.index, sp.state_epoch,
                                                   start)
            if code:
                raise errors.error_for_code(code)
        else:
            sp.restore(max(state.start_offset, p.log_start_offset), state.batches,
                       state.state_epoch)
        if p.leader_epoch != epoch or not p.is_leader:
            raise errors.NotLeaderOrFollowerError(f"{p.topic}-{p.index}")
        log.info("share group %s: %s-%s starts at %s (state epoch %s)", group_id, p.topic,
                 p.index, sp.start, sp.state_epoch)
        return sp

    def _reset_offset(self, p: Partition, reset: str) -> int:
        """Where a new share-partition starts (``share.auto.offset.reset``): the log start
        (earliest), the high watermark (latest), or the first record at most that long ago
        (``by_duration:<ISO-8601>``, KIP-1106; the high watermark when there is none)."""
        if reset == "earliest":
            return p.log_start_offset
        ago = duration_ms(reset)
        if ago is not None:
            found = p.log.offset_for_timestamp(self.timer.now_ms() - ago)
            if found is not None:
                return min(max(found.offset, p.log_start_offset), p.high_watermark)
        return p.high_watermark

    def _changed(self, sp: SharePartition) -> None:
        """Every change: wake waiting fetches, and write the state soon unless the request
        that made the change writes it itself (``persist`` clears ``dirty``)."""
        self.wake()
        if not sp.dirty:
            sp.dirty = True
            asyncio.get_running_loop().call_soon(self._flush, sp)

    def _flush(self, sp: SharePartition) -> None:
        if sp.dirty and not sp.closed:
            self.persist_later(sp)

    async def persist(self, sp: SharePartition) -> int:
        """Write a share-partition's state; the error code (FENCED_STATE_EPOCH drops it).

        One write at a time per share-partition, each of the state as it is when it goes
        (``write_lock``): a write is a whole state, and one retried after a dropped
        connection could land after a later one and undo it (a 30-minute soak saw an
        accepted record's acquisition land after its acceptance, and a new leader deliver it
        again)."""
        async with sp.write_lock:
            sp.dirty = False
            code = await self.persister.write(
                sp.group_id, sp.topic_id, sp.partition, sp.state_epoch, sp.leader_epoch,
                PersistedState(sp.state_epoch, sp.start, sp.state_batches()))
        if code in (errors.FencedStateEpochError.code, errors.FencedLeaderEpochError.code):
            key = (sp.group_id, sp.topic, sp.partition)
            if self.partitions.get(key) is sp:
                sp.close()
                del self.partitions[key]
        return code

    def persist_later(self, sp: SharePartition) -> None:
        """Timers (lock expiry) change state outside a request: write it in the background."""
        task = asyncio.get_running_loop().create_task(self.persist(sp))
        task.add_done_callback(_log_failure)

    # -- waiting for records ----------------------------------------------------------------------
    def waiter(self) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.add(fut)
        return fut

    def discard_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)

    def wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # -- acquiring --------------------------------------------------------------------------------
    def acquire(self, sp: SharePartition, p: Partition, member_id: str, max_records: int,
                max_bytes: int, record_limit: bool) -> FetchedShare:
        settings = self.settings(sp.group_id)
        offset = sp.next_fetch_offset()
        if offset < p.log_start_offset:   # retention removed records still in flight
            sp.skip_to(p.log_start_offset)
            offset = sp.next_fetch_offset()
        committed = settings.isolation_level == "read_committed"
        max_offset = p.last_stable_offset if committed else p.high_watermark
        if offset >= max_offset or max_bytes <= 0:
            return FetchedShare(b"", [])
        result = p.log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=True)
        aborted = p.log.collect_aborted_txns(offset, result.next_offset) if committed else None
        batches = split_batches(result.records, aborted)
        acquired = sp.acquire(member_id, [b for _, _, b in batches], max_records, record_limit)
        if not acquired:
            return FetchedShare(b"", [])
        parts = [result.records[s:e] for s, e, span in batches
                 if any(a.first <= span.last and span.first <= a.last for a in acquired)]
        return FetchedShare(b"".join(parts), acquired)

    # -- sessions ending ----------------------------------------------------------------------------
    def release_session(self, group_id: str, member_id: str,
                        partitions: list[tuple[uuid.UUID, int]]) -> list[SharePartition]:
        """A share session closed: the member's records on its partitions are released."""
        changed = []
        for topic_id, index in partitions:
            topic = self.broker.controller.topics_by_id.get(topic_id)
            sp = None if topic is None else self.partitions.get((group_id, topic.name, index))
            if sp is not None and sp.release_member(member_id):
                changed.append(sp)
        return changed

    async def close_session(self, group_id: str, member_id: str,
                            only: ShareSession | None = None) -> None:
        """A share session closed (epoch -1; with ``only``, that session if it is still the
        member's): the member's records there are released; when it was the group's last
        session here, the group's share-partitions leave the cache (Kafka's
        ``onGroupEmpty``), so that state changed meanwhile by the offset admin APIs is read
        afresh."""
        if only is not None and self.sessions.get(group_id, member_id) is not only:
            return
        closed = self.sessions.close(group_id, member_id)
        if closed is not None:
            for sp in self.release_session(group_id, member_id, list(closed.partitions)):
                await self.persist(sp)
        if not self.sessions.of_group(group_id):
            for key in [k for k in self.partitions if k[0] == group_id]:
                sp = self.partitions.pop(key)
                if sp.dirty:
                    await self.persist(sp)
                sp.close()

    def connection_closed(self, connection_id: int) -> None:
        """A client connection closed: the share sessions opened on it close too, releasing
        what their members held (in the background: this runs in ``connection_lost``)."""
        for session in self.sessions.of_connection(connection_id):
            task = asyncio.get_running_loop().create_task(
                self.close_session(session.group_id, session.member_id, session))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def forget(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        """DeleteGroups: the share-partition's durable state goes (a leader still caching it
        is fenced on its next write and starts over)."""
        return await self.persister.delete(group_id, topic_id, partition)

    # -- tools and fault injection ------------------------------------------------------------------
    def of_group(self, group_id: str) -> list[SharePartition]:
        return [sp for (g, _, _), sp in sorted(self.partitions.items()) if g == group_id]

    async def snapshot(self, group_id: str, p: Partition, limit: int) -> ShareSnapshot | None:
        """A group's in-flight records on a partition this broker leads, first ``limit`` of
        them listed: from its share-partition when it is loaded here (a member fetches it),
        else from the persisted state (read without fencing anyone); None when the group
        has no state for the partition."""
        sp = self.partitions.get((group_id, p.topic, p.index))
        if sp is not None and not sp.closed:
            return sp.snapshot(limit)
        state = await self.persister.read(group_id, p.topic_id, p.index, -1)
        if state is None or state.start_offset < 0:
            return None
        return persisted_snapshot(group_id, p.topic, p.index, state, limit,
                                  self.settings(group_id).delivery_count_limit)

    def expire_locks(self, group_id: str, topic: str | None = None, partition: int | None = None,
                     member_id: str | None = None) -> tuple[int, list[SharePartition]]:
        """Fault injection: acquisition locks (of one member, on one partition) expire now.
        Returns how many records were released, and the share-partitions whose state
        changed (their write follows in the background)."""
        n, touched = 0, []
        for sp in self.of_group(group_id):
            if (topic is not None and sp.topic != topic) or \
                    (partition is not None and sp.partition != partition):
                continue
            released = sp.expire_locks(member_id)
            if released:
                n += released
                touched.append(sp)
        return n, touched

    async def expire_locks_written(self, group_id: str, topic: str | None = None,
                                   partition: int | None = None,
                                   member_id: str | None = None) -> int:
        """``expire_locks``, returning once the new state is written: a fault injected next
        (a fenced state epoch) then meets it written, as it would a lock timer's write done
        long before."""
        n, touched = self.expire_locks(group_id, topic, partition, member_id)
        for sp in touched:
            await self.persist(sp)
        return n


def persisted_snapshot(group_id: str, topic: str, partition: int, state: PersistedState,
                       limit: int, delivery_count_limit: int) -> ShareSnapshot:
    """The in-flight window a persisted state describes (offsets between its batches are
    available, never delivered; acquired ones were written as available)."""
    start = state.start_offset
    known: dict[int, tuple[RecordState, int]] = {}
    end = start
    for b in state.batches:
        for o in range(max(b.first, start), b.last + 1):
            kind: RecordState = RecordState.AVAILABLE \
                if b.state is RecordState.ACQUIRED else b.state
            known[o] = (kind, b.delivery_count)
        end = max(end, b.last + 1)
    counts = dict.fromkeys(RecordState, 0)
    counts[RecordState.AVAILABLE] = end - start - len(known)
    for state_, _ in known.values():
        counts[state_] += 1
    shown = tuple(InFlightRecord(o, *known.get(o, (RecordState.AVAILABLE, 0)))
                  for o in range(start, min(end, start + max(limit, 0))))
    return ShareSnapshot(group_id, topic, partition, start, end, state.state_epoch,
                         delivery_count_limit, counts, shown, live=False)


def _log_failure(task: asyncio.Task[int]) -> None:
    if task.cancelled():
        return
    exc = task.exception()
    if exc is not None:
        log.warning("writing share-partition state failed: %s", exc)
    elif task.result():
        log.warning("writing share-partition state failed with error %s", task.result())
