"""The fetcher: one Fetch per partition leader, in parallel, into a bounded buffer.

Theory of operation
-------------------
For every broker that leads at least one fetchable partition (assigned, not
paused, with a position), the fetcher keeps one Fetch in flight. The
partitions are grouped by leader from the metadata cache, so a consumer of 12
partitions on 12 brokers sends 12 Fetches at once, each on that broker's
connection. Responses go into a buffer of completed fetches, bounded in bytes
(``fetch.buffer.bytes``).

The fetcher runs ahead of the application (librdkafka's pre-fetch): as soon as
a response arrives, before anything of it is decoded, the next Fetch for its
partitions goes out, asking from where the last complete batch of the
response ends (``PartitionState.fetch_offset``). So while ``poll`` decodes one
response, the broker is already serving the next, until the buffer is full.
A position set from outside (seek, reset, a new assignment) bumps the
partition's ``fetch_gen``: data fetched for the old position, buffered or in
flight, is dropped, and fetching starts again from the position. A partition
error on a Fetch that ran ahead is only acted on once the data before it has
been handed out and the partition is fetched from its position again.

Fetch sessions (KIP-227) are kept per broker by ``kaflite.net.fetch_session``
(shared with the brokers' replica fetchers): the first request is full and asks
for a session (epoch 0); if the broker grants one (a non-zero session id), later
requests are incremental, carrying only the partitions whose fetch offset changed
and listing the ones no longer wanted as forgotten. A broker that answers session
id 0 (Tansu) keeps getting full requests. FETCH_SESSION_ID_NOT_FOUND and
INVALID_FETCH_SESSION_EPOCH start a new session.

Partition errors follow the recovery table: NOT_LEADER_OR_FOLLOWER and the
leader epoch errors refresh metadata (a KIP-951 hint is applied at once);
OFFSET_OUT_OF_RANGE resets the position by ``auto.offset.reset``, or is
raised from ``poll`` when that is ``none``; TOPIC_AUTHORIZATION_FAILED is
raised from ``poll``.

Decoding happens in ``poll`` (``drain``), batch by batch, up to
``max.poll.records``; records before the position (the start of a batch the
position falls inside) and control batches are skipped, and with
``read_committed`` records of aborted transactions are dropped.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Generic, NamedTuple, cast

from kaflite.client._aio import cancel_and_wait
from kaflite.client.consumer._aborted import AbortedFilter
from kaflite.client.consumer._subscription import SubscriptionState
from kaflite.client.consumer._types import K, RecordList, Segment, TopicPartition, V
from kaflite.client.events import Emit
from kaflite.client.metrics import AVG_MAX
from kaflite.client.recovery import Action, action_for, backoff_delay, error_name
from kaflite.net.connection import ConnectionClosed
from kaflite.net.fetch_session import FetchSession
from kaflite.protocol import errors
from kaflite.protocol.messages import FetchRequest, FetchResponse
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.records import RecordBatch, RecordColumns, iter_batches

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient

__all__ = ["Fetcher", "Wanted"]

ZERO_UUID = uuid.UUID(int=0)
# consecutive errors of one partition after which an event says it is stuck
STUCK_AFTER = frozenset({10, 100, 1000})
SESSION_ERRORS = (errors.FetchSessionIdNotFoundError.code,
                  errors.InvalidFetchSessionEpochError.code,
                  errors.FetchSessionTopicIdError.code)


class Wanted(NamedTuple):
    """What a Fetch asks of one partition. An incremental session resends a partition
    when any field changes: the leader epoch too, or the broker would keep checking
    the old one and answer FENCED_LEADER_EPOCH for ever."""

    offset: int
    max_bytes: int
    leader_epoch: int


class _Completed:
    """A partition's data from one Fetch response, waiting to be handed out."""

    __slots__ = ("aborted", "batches", "fetch_offset", "gen", "size", "tp")

    def __init__(self, tp: TopicPartition, fetch_offset: int, gen: int,
                 batches: deque[RecordBatch], size: int, aborted: AbortedFilter | None) -> None:
        self.tp = tp
        self.fetch_offset = fetch_offset
        self.gen = gen
        self.batches = batches
        self.size = size
        self.aborted = aborted  # read_committed, when transactions were aborted in the range

    def skip(self, batch: RecordBatch) -> bool:
        """A control batch, or data of an aborted transaction: not handed out."""
        return batch.is_control if self.aborted is None else self.aborted.skip(batch)


class Fetcher(Generic[K, V]):
    """Fetches for one consumer, and its records as ``RecordList[K, V]``: keys and
    values as its deserializers return them (bytes without one)."""

    def __init__(self, consumer: BaseClient, subs: SubscriptionState,
                 emit: Emit) -> None:
        self.consumer = consumer
        self.emit = emit                # the consumer's event log
        self.subs = subs
        c = consumer.config
        self.min_bytes = c.int("fetch.min.bytes")
        self.max_wait = c.int("fetch.max.wait.ms")
        self.max_bytes = c.int("fetch.max.bytes")
        self.partition_max = c.int("max.partition.fetch.bytes")
        self.buffer_limit = c.int("fetch.buffer.bytes")
        self.isolation = 1 if c["isolation.level"] == "read_committed" else 0
        self.rack = c.string("client.rack")
        self.check_crcs = c.bool("check.crcs")
        self.sessions: dict[int, FetchSession[TopicPartition, Wanted]] = {}
        self.buffer: deque[_Completed] = deque()
        self.buffered_bytes = 0
        self.buffered_tps: dict[TopicPartition, int] = {}   # completed fetches buffered
        self.in_flight: dict[int, asyncio.Task[None]] = {}
        # Errors for the application, one per partition (None: not about one). A
        # partition with an error waiting is not fetched until poll has raised it, so
        # the fetcher, which runs on between polls, does not pile up copies of it.
        self.errors: dict[TopicPartition | None, BaseException] = {}
        # monotonic time before which a partition is not fetched (after LEADER_NOT_AVAILABLE
        # and other back-off errors of the recovery table)
        self.backoff_until: dict[TopicPartition, float] = {}
        self.retry_backoff_ms = c.int("retry.backoff.ms")
        self.retry_backoff_max_ms = c.int("retry.backoff.max.ms")
        # consecutive errors per partition, for the exponential back-off and the
        # "stuck" event; a response without an error for the partition clears it
        self.failures: dict[TopicPartition, int] = {}
        # partitions whose leader was wrong: not fetched again until the metadata
        # version moves past the one recorded here (a refresh, or a KIP-951 hint)
        self.await_metadata: dict[TopicPartition, int] = {}
        consumer.metadata.listeners.append(self._metadata_updated)
        self.data_ready = asyncio.Event()
        self.key_deser = c.function("key.deserializer")
        self.value_deser = c.function("value.deserializer")
        self._closed = False
        # KIP-714: a Fetch's round trip (Java's fetch-manager fetch-latency)
        self.fetch_latency = consumer.metrics.sensor("fetch.manager.fetch.latency", AVG_MAX)

    # -- sending fetches -------------------------------------------------------------------
    def send_fetches(self) -> None:
        """Start a Fetch to every leader that has fetchable partitions and none in flight."""
        if self._closed or self.buffered_bytes >= self.buffer_limit:
            return
        md = self.consumer.metadata
        by_node: dict[int, dict[TopicPartition, Wanted]] = {}
        gens: dict[TopicPartition, int] = {}
        backoff = self.backoff_until
        now_ = time.monotonic() if backoff else 0.0
        waiting = self.await_metadata
        assignment = self.subs.assignment
        for tp in self.subs.fetchable():
            state = assignment[tp]
            offset = state.fetch_offset
            if offset < 0:
                if tp in self.buffered_tps:
                    continue  # fetch from the position once what is buffered is handed out
                if state.position is None:
                    continue   # (a fetchable partition has a position)
                offset = state.position
            if backoff and backoff.get(tp, 0.0) > now_:
                continue
            if tp in self.errors:
                continue
            if waiting and tp in waiting:
                if waiting[tp] == md.version:
                    continue
                del waiting[tp]
            leader = md.leader(tp.topic, tp.partition)
            if leader is None:
                md.request_update(f"no leader for {tp}")
                continue
            if leader.leader in self.in_flight:
                continue
            by_node.setdefault(leader.leader, {})[tp] = Wanted(
                offset, self.partition_max, leader.leader_epoch)
            gens[tp] = state.fetch_gen
        for node, wanted in by_node.items():
            task = asyncio.get_running_loop().create_task(
                self._fetch(node, wanted, gens))
            self.in_flight[node] = task

    def _request(self, node: int, wanted: dict[TopicPartition, Wanted], version: int
                 ) -> FetchRequest:
        session = self.sessions.setdefault(node, FetchSession(node))
        session.replace(wanted)
        send, forget, _full = session.build()
        md = self.consumer.metadata
        topics: dict[str, list[fq.FetchPartition]] = {}
        for tp, (offset, max_bytes, leader_epoch) in send.items():
            topics.setdefault(tp.topic, []).append(fq.FetchPartition(
                partition=tp.partition, current_leader_epoch=leader_epoch,
                fetch_offset=offset, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=max_bytes))
        forgotten: dict[str, list[int]] = {}
        for tp in forget:
            forgotten.setdefault(tp.topic, []).append(tp.partition)
        session.sent_request()
        return FetchRequest(
            replica_id=-1, max_wait_ms=self.max_wait, min_bytes=self.min_bytes,
            max_bytes=self.max_bytes, isolation_level=self.isolation,
            session_id=session.session_id, session_epoch=session.epoch if version >= 7 else -1,
            topics=[fq.FetchTopic(topic=t, topic_id=md.topic_id(t), partitions=ps)
                    for t, ps in topics.items()],
            forgotten_topics_data=[fq.ForgottenTopic(topic=t, topic_id=md.topic_id(t),
                                                     partitions=ps)
                                   for t, ps in forgotten.items()],
            rack_id=self.rack)

    async def _fetch(self, node: int, wanted: dict[TopicPartition, Wanted],
                     gens: dict[TopicPartition, int]) -> None:
        consumer = self.consumer
        try:
            conn = await consumer.pool.get(node)
            version = conn.version_for(1)
            if version >= 13 and any(consumer.metadata.topic_id(tp.topic) == ZERO_UUID
                                     for tp in wanted):
                version = 12  # the broker gave no topic ids: fetch by name
            req = self._request(node, wanted, version)
            sent = time.monotonic()
            try:
                resp: FetchResponse = await conn.request(
                    req, version=version,
                    timeout=consumer.config.int("request.timeout.ms") / 1000 + self.max_wait / 1000)
            except (ConnectionClosed, TimeoutError, OSError) as exc:
                consumer.pool.discard(conn, f"Fetch failed: {type(exc).__name__}")
                self.sessions.pop(node, None)
                consumer.metadata.request_update(f"Fetch to broker {node} failed")
                return
            self.fetch_latency.record((time.monotonic() - sent) * 1000)
            self._handle(node, resp, wanted, gens, version)
            self.in_flight.pop(node, None)
            self.send_fetches()  # run ahead: the next Fetch before this one is decoded
        except (ConnectionClosed, OSError, TimeoutError):
            consumer.metadata.request_update(f"cannot reach broker {node}")
            await asyncio.sleep(consumer.config.int("retry.backoff.ms") / 1000)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.errors[None] = exc
        finally:
            if self.in_flight.get(node) is asyncio.current_task():
                del self.in_flight[node]
            self.data_ready.set()

    def _handle(self, node: int, resp: FetchResponse,
                wanted: dict[TopicPartition, Wanted], gens: dict[TopicPartition, int],
                version: int) -> None:
        session = self.sessions[node]
        session.handle(resp.error_code, resp.session_id)
        md = self.consumer.metadata
        if resp.error_code:
            if resp.error_code not in SESSION_ERRORS:
                md.request_update(f"{error_name(resp.error_code)} from Fetch")
            return
        endpoints = [(e.node_id, e.host, e.port, e.rack) for e in resp.node_endpoints]
        for t in resp.responses:
            name = t.topic if version < 13 else md.topics_by_id.get(t.topic_id, t.topic)
            for pd in t.partitions:
                tp = TopicPartition(name, pd.partition_index)
                sent = wanted.get(tp)
                state = self.subs.assignment.get(tp)
                if sent is None or state is None or state.fetch_gen != gens.get(tp):
                    continue  # unassigned or seeked while the fetch was in flight
                code = pd.error_code
                if not code and self.failures:
                    self.failures.pop(tp, None)
                if code:
                    # Fetch from the position next; an error about data beyond what is
                    # buffered is acted on when the partition gets there.
                    state.fetch_offset = -1
                    if sent.offset == state.position:
                        self._partition_error(tp, code, pd.current_leader.leader_id,
                                              pd.current_leader.leader_epoch, endpoints)
                    continue
                if pd.high_watermark >= 0:
                    state.high_watermark = pd.high_watermark
                state.last_stable_offset = pd.last_stable_offset
                state.log_start_offset = pd.log_start_offset
                records = pd.records
                if not records:
                    continue
                batches = deque(iter_batches(records))
                if not batches:
                    continue
                aborted = AbortedFilter.of(pd) if self.isolation else None
                size = len(records)
                self.buffer.append(_Completed(tp, sent.offset, state.fetch_gen, batches, size,
                                              aborted))
                self.buffered_bytes += size
                self.buffered_tps[tp] = self.buffered_tps.get(tp, 0) + 1
                state.fetch_offset = batches[-1].next_offset

    def _partition_error(self, tp: TopicPartition, code: int, leader: int, epoch: int,
                         endpoints: list[tuple[int, str, int, str | None]]) -> None:
        md = self.consumer.metadata
        action = action_for(code)
        where = f"{error_name(code)} on {tp}"
        failures = self.failures[tp] = self.failures.get(tp, 0) + 1
        if failures in STUCK_AFTER:
            self.emit(
                "fetch", f"{tp} makes no progress: {failures} errors in a row", cause=where)
        if action in (Action.REFRESH_METADATA, Action.BACKOFF_REFRESH):
            # Refresh and reroute: the partition waits for newer metadata (a KIP-951
            # hint applied here counts) instead of asking the old leader again. If
            # that did not help, it also backs off, longer each time (Java's
            # retry.backoff.ms up to retry.backoff.max.ms), never a tight loop.
            self.await_metadata[tp] = md.version
            if leader >= 0:
                md.apply_leader_hint(tp.topic, tp.partition, leader, epoch, endpoints)
            md.request_update(where)
            if action == Action.BACKOFF_REFRESH or failures > 1:
                self._back_off(tp)
        elif action == Action.RESET_OFFSET:
            strategy = self.subs.default_reset
            if strategy == "none":
                self.errors[tp] = errors.OffsetOutOfRangeError(
                    f"{where}: position {self.subs.assignment[tp].position}, "
                    "and auto.offset.reset is none")
            else:
                self.emit("offsets", f"reset {tp} to {strategy}", cause=where)
                self.subs.request_reset(tp, strategy)
        elif action in (Action.RAISE, Action.FATAL):
            self.errors[tp] = errors.error_for_code(code, where)
        else:
            md.request_update(where)
            self._back_off(tp)

    def _metadata_updated(self) -> None:
        if self.await_metadata:
            self.data_ready.set()

    def _back_off(self, tp: TopicPartition) -> None:
        """Skip ``tp`` for a while, then wake ``poll`` to fetch it again."""
        delay = backoff_delay(self.retry_backoff_ms, self.retry_backoff_max_ms,
                              self.failures.get(tp, 1))
        self.backoff_until[tp] = time.monotonic() + delay
        asyncio.get_running_loop().call_later(delay, self.data_ready.set)

    # -- handing out records -------------------------------------------------------------------
    def has_buffered(self) -> bool:
        return bool(self.buffer)

    def raise_errors(self) -> None:
        if self.errors:
            exc = self.errors.pop(next(iter(self.errors)))
            raise exc

    def drain(self, max_records: int) -> dict[TopicPartition, RecordList[K, V]]:
        """Decode buffered batches into records, advancing positions."""
        out: dict[TopicPartition, RecordList[K, V]] = {}
        remaining = max_records
        assignment = self.subs.assignment
        while self.buffer and remaining > 0:
            done = self.buffer[0]
            tp = done.tp
            state = assignment.get(tp)
            if state is None or state.fetch_gen != done.gen or state.paused or state.revoking \
                    or state.position is None or state.position < done.fetch_offset \
                    or state.reset is not None:
                self._drop_first()
                if state is not None and state.fetch_gen == done.gen:
                    state.refetch()   # fetch again from the position later
                continue
            batches = done.batches
            records = out.get(tp)
            while batches and remaining > 0:
                batch = batches[0]
                position = state.position
                if batch.next_offset <= position:
                    batches.popleft()
                    continue
                if done.skip(batch):
                    batches.popleft()
                    state.position = batch.next_offset
                    continue
                if self.check_crcs and not batch.crc_ok():
                    self._drop_first()
                    raise errors.CorruptMessageError(f"{tp}: CRC mismatch at offset "
                                                     f"{batch.base_offset}")
                cols = batch.columns(copy=True)
                offsets = cols.offsets
                start = 0
                if offsets and offsets[0] < position:
                    while start < len(offsets) and offsets[start] < position:
                        start += 1
                end = min(len(offsets), start + remaining)
                if records is None:
                    records = out[tp] = RecordList()
                if end > start:
                    records.add(self._segment(tp, cols, start, end))
                    remaining -= end - start
                if end >= len(offsets):
                    batches.popleft()
                    state.position = batch.next_offset
                else:
                    state.position = offsets[end]
            if not batches:
                self._drop_first()
        return out

    def _segment(self, tp: TopicPartition, cols: RecordColumns, start: int, end: int
                 ) -> Segment[K, V]:
        """Records ``start:end`` of a batch decoded with ``copy=True`` (bytes, not views)."""
        whole = start == 0 and end == len(cols.offsets)
        keys: Sequence[object] = cols.keys if whole else cols.keys[start:end]
        values: Sequence[object] = cols.values if whole else cols.values[start:end]
        kd, vd = self.key_deser, self.value_deser
        if kd is not None:
            keys = [None if k is None else kd(k) for k in keys]
        if vd is not None:
            values = [None if v is None else vd(v) for v in values]
        segment = (tp.topic, tp.partition,
                   cols.offsets if whole else cols.offsets[start:end],
                   cols.timestamps if whole else cols.timestamps[start:end],
                   keys, values, cols.headers if whole else cols.headers[start:end])
        # K and V are what the deserializers return (bytes without one), which the
        # config they come from cannot tell the type checker: they meet here.
        return cast("Segment[K, V]", segment)

    def _drop_first(self) -> None:
        self._forget(self.buffer.popleft())

    def _forget(self, done: _Completed) -> None:
        self.buffered_bytes -= done.size
        left = self.buffered_tps[done.tp] - 1
        if left:
            self.buffered_tps[done.tp] = left
        else:
            del self.buffered_tps[done.tp]

    def clear(self, keep: set[TopicPartition] | None = None) -> None:
        """Forget buffered data (for partitions not in ``keep``)."""
        kept: deque[_Completed] = deque()
        for done in self.buffer:
            if keep is not None and done.tp in keep:
                kept.append(done)
                continue
            self._forget(done)
            state = self.subs.assignment.get(done.tp)
            if state is not None and state.fetch_gen == done.gen:
                state.refetch()
        self.buffer = kept

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(*self.in_flight.values())
        self.in_flight.clear()


def now() -> float:
    return time.monotonic()
