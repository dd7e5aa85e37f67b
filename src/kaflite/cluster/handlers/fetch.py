"""Fetch (key 1): consumers and follower replicas read from partition leaders.

Consumers read up to the high watermark (read_uncommitted) or the last stable
offset (read_committed); followers, identified by their replica id, read up to
the log end and report their position by the offset they ask for, which is how
the leader learns their progress, advances the high watermark and grows the
ISR.

A read_committed consumer also gets the aborted transactions overlapping what
it was sent, from the log's aborted-transaction index: (producer id, first
offset) of each one whose ABORT marker is at or after the fetch offset and
whose first offset is below the offset following the last batch returned
(Kafka's ``collectAbortedTxns``; the consumer drops those producers' batches
up to their ABORT marker).

The records go out exactly as they lie in the log: the bytes read from the
segment file are handed to the response encoder, which keeps them as a
separate chunk and never copies them into the frame.

Long polling: when less than ``min_bytes`` is available the request waits, up
to ``max_wait_ms``, on every partition it asked for, and is answered as soon as
one of them gets new data.

Replication throttling (KIP-73, ``kaflite.cluster.quotas.replication``): a follower out
of the ISR gets no records of a throttled partition while the leader's
``leader.replication.throttled.rate`` is exceeded; the bytes sent of throttled
partitions count against that rate.

A follower that sends ``last_fetched_epoch`` (v12+) and whose log has diverged
from the leader's gets ``diverging_epoch`` instead of records, and truncates. Such a
fetch, like one out of range, does not record the follower's position: only a valid
fetch can bring a follower back into the ISR or move the high watermark.

Fetch sessions (KIP-227): see ``kaflite.cluster.fetch_session``; an incremental
fetch reads the partitions it names and those of its session that changed (every
partition once per ``FULL_SCAN_S``), and answers only those with news.

v18 (KIP-1166) lets a fetcher tell the high watermark it knows (a tagged field). Only
KRaft's own replication reads it: Kafka 4.4's broker serves a v18 Fetch as a v17, and
so does kaflite.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

from kaflite.cluster.acl import fetch_denied
from kaflite.cluster.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    FetchSession,
    SessionPartition,
)
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import code_for_exception, leader_hint
from kaflite.cluster.partition import Partition
from kaflite.cluster.quotas.enforce import fetch_throttle_ms
from kaflite.cluster.quotas.manager import CONSUME
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import FetchRequest, FetchResponse
from kaflite.protocol.messages import fetch_response as fr
from kaflite.protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

READ_COMMITTED = 1
FULL_SCAN_S = 30.0   # a session reads all its partitions this often (log start changes)
READ_CHUNK = 256     # partitions read between two turns of the event loop


def _read_partition(broker: Broker, conn: ServerConnection, sp: SessionPartition,
                    replica_id: int, isolation: int, budget: int, first: bool,
                    session: FetchSession | None = None
                    ) -> tuple[fr.PartitionData, Partition | None, bool]:
    """The partition's answer, its ``Partition`` (None: not led here) and whether it is
    still pending: data left at the fetch offset, an error, or a follower that may
    join the ISR. A session reads a pending partition again at its next fetch."""
    topic, index = sp.topic, sp.partition
    out = fr.PartitionData(partition_index=index, error_code=0, high_watermark=-1,
                           last_stable_offset=-1, log_start_offset=-1,
                           aborted_transactions=[] if isolation == READ_COMMITTED else None)
    p: Partition | None = None
    pending = True
    try:
        if not topic:
            raise errors.UnknownTopicIdError(str(sp.topic_id))
        if broker.authorizer is not None and fetch_denied(broker, conn, topic, replica_id):
            raise errors.TopicAuthorizationFailedError(topic)
        p = broker.leader_partition(topic, index, sp.current_leader_epoch)
        offset = sp.fetch_offset
        if replica_id < 0:
            conn.info.partitions.add((topic, index))
        out.high_watermark = p.high_watermark
        out.last_stable_offset = p.last_stable_offset
        out.log_start_offset = p.log_start_offset
        last_epoch = sp.last_fetched_epoch
        if last_epoch >= 0:
            epoch, end = p.log.end_offset_for_epoch(last_epoch)
            if epoch < last_epoch or end < offset:
                out.diverging_epoch = fr.EpochEndOffset(epoch, end)
                return out, p, True
        if offset < p.log_start_offset or offset > p.log_end_offset:
            raise errors.OffsetOutOfRangeError(
                f"{topic}-{index}: offset {offset} outside "
                f"[{p.log_start_offset}, {p.log_end_offset}]")
        # A follower's position counts (for the ISR and the high watermark) only once its
        # fetch is known not to have diverged, as Kafka's Partition.fetchRecords: a
        # diverged follower's offset names records the leader does not have.
        if replica_id >= 0 and p.update_follower(replica_id, offset, session):
            broker.alter_isr(p, [*p.isr, replica_id])
        outside_isr = replica_id >= 0 and replica_id not in p.isr
        lso = p.last_stable_offset
        if replica_id >= 0:
            max_offset = p.log_end_offset
        else:
            max_offset = lso if isolation == READ_COMMITTED else p.high_watermark
        out.high_watermark = p.high_watermark
        out.last_stable_offset = lso
        # replication throttling (KIP-73): a follower out of the ISR gets nothing of a
        # throttled partition while the leader's quota is exceeded
        throttled = outside_isr and broker.replication_quotas.leader.holds(topic, index)
        if offset < max_offset and budget > 0 and not throttled:
            limit = min(sp.partition_max_bytes, budget)
            result = p.log.read(offset, limit, max_offset=max_offset, min_one_batch=first)
            out.records = result.records
            if out.aborted_transactions is not None and result.records and replica_id < 0:
                out.aborted_transactions = [
                    fr.AbortedTransaction(t.producer_id, t.first_offset)
                    for t in p.log.collect_aborted_txns(offset, result.next_offset)]
        else:
            out.records = b""
        pending = offset < max_offset or outside_isr
    except errors.KafkaError as exc:
        out.error_code = code_for_exception(exc)
        out.records = b""  # Kafka sends empty records with an error; librdkafka rejects null
        if exc.code in (errors.NotLeaderOrFollowerError.code, errors.FencedLeaderEpochError.code):
            hint = leader_hint(broker, topic, index)
            if hint is not None and hint[0] >= 0:
                out.current_leader = fr.LeaderIdAndEpoch(*hint)
    return out, p, pending


def _targets(broker: Broker, req: FetchRequest, version: int) -> list[SessionPartition]:
    """The request's partitions, with topic names resolved ('' for an unknown topic id)."""
    out = []
    for t in req.topics:
        if version >= 13:
            topic = broker.controller.topics_by_id.get(t.topic_id)
            name = topic.name if topic is not None else ""
            topic_id = t.topic_id
        else:
            name = t.topic
            known = broker.controller.topics.get(name)
            topic_id = known.topic_id if known is not None else ZERO_UUID
        for fp in t.partitions:
            out.append(SessionPartition(
                name, topic_id, fp.partition, fp.fetch_offset, fp.partition_max_bytes,
                fp.current_leader_epoch, fp.last_fetched_epoch, fp.log_start_offset))
    return out


def _forget(session: FetchSession, req: FetchRequest, broker: Broker, version: int) -> None:
    for ft in req.forgotten_topics_data:
        if version >= 13:
            topic = broker.controller.topics_by_id.get(ft.topic_id)
            if topic is None:
                # A deleted topic (the usual reason to forget one): its id no longer
                # names it, so find its partitions by id. Kept, they answered an error at
                # every fetch, and an error answers a long poll at once: a follower and
                # its leader fetched in a tight loop for ever (franz-go's suite, which
                # deletes its topics, left a 3-broker cluster at 100 % CPU).
                gone = set(ft.partitions)
                for key in [k for k, sp in session.partitions.items()
                            if sp.topic_id == ft.topic_id and sp.partition in gone]:
                    del session.partitions[key]
                continue
            name = topic.name
        else:
            name = ft.topic
        for index in ft.partitions:
            session.partitions.pop((name, index), None)


class _Collected:
    """One read of a fetch's partitions."""

    def __init__(self) -> None:
        self.results: list[tuple[SessionPartition, fr.PartitionData]] = []
        self.total = 0
        self.got_error = False
        self.waiting: list[Partition] = []            # led here: a long poll waits on them
        self.pending: list[tuple[str, int]] = []     # to read again at the next fetch


async def _collect(broker: Broker, conn: ServerConnection, req: FetchRequest,
                   targets: list[SessionPartition], replica_id: int,
                   session: FetchSession | None) -> _Collected:
    """Read ``targets``, ``READ_CHUNK`` at a time: a follower's first fetch names every
    partition it replicates (thousands, after a restart), and the loop the brokers
    share runs between two chunks. The ISR changes of a replica's chunk are one
    metadata write."""
    budget = req.max_bytes
    if replica_id < 0:   # a consumer's fetch is bounded by what its quota allows at once
        window = broker.quotas.max_value_in_window(CONSUME, conn.info.principal,
                                                   conn.info.client_id)
        budget = int(min(budget, window))
    got = _Collected()
    first = True
    for start in range(0, len(targets), READ_CHUNK):
        if start:
            await asyncio.sleep(0)
            if not broker.running:
                break
        with broker.controller.batched() if replica_id >= 0 else contextlib.nullcontext():
            for sp in targets[start:start + READ_CHUNK]:
                data, p, pending = _read_partition(broker, conn, sp, replica_id,
                                                   req.isolation_level, budget - got.total,
                                                   first, session)
                size = len(data.records) if data.records is not None else 0
                if size:
                    first = False
                got.total += size
                got.got_error = got.got_error or data.error_code != 0 \
                    or data.diverging_epoch.epoch != -1
                if p is not None:
                    got.waiting.append(p)
                    if session is not None:
                        p.watch(session)
                if pending or (session is not None and sp.reported != _client_view(data)):
                    got.pending.append((sp.topic, sp.partition))   # (news not told yet)
                got.results.append((sp, data))
    return got


def _client_view(data: fr.PartitionData) -> tuple[int, int, int]:
    """What a session remembers having told its client of a partition."""
    return (data.high_watermark, data.last_stable_offset, data.log_start_offset)


def _worth_sending(sp: SessionPartition, data: fr.PartitionData) -> bool:
    """In an incremental response, does this partition have anything new?"""
    return bool(data.records) or data.error_code != 0 or data.diverging_epoch.epoch != -1 \
        or sp.reported != _client_view(data)


def _group(results: list[tuple[SessionPartition, fr.PartitionData]]
           ) -> list[fr.FetchableTopicResponse]:
    topics: list[fr.FetchableTopicResponse] = []
    for sp, data in results:
        if not topics or (topics[-1].topic, topics[-1].topic_id) != (sp.topic, sp.topic_id):
            topics.append(fr.FetchableTopicResponse(topic=sp.topic, topic_id=sp.topic_id))
        topics[-1].partitions.append(data)
    return topics


def _count_bytes_out(broker: Broker, results: list[tuple[SessionPartition, fr.PartitionData]],
                     replica_id: int) -> None:
    """Kafka's BytesOutPerSec (consumers, by topic) or ReplicationBytesOutPerSec; and the
    bytes of throttled partitions sent to a follower, against the leader's replication
    quota, in the ISR or not (Kafka's ``sizeOfThrottledPartitions``)."""
    metrics = broker.metrics
    quota = broker.replication_quotas.leader
    for sp, data in results:
        if data.records:
            if replica_id >= 0:
                metrics.replication_bytes_out += len(data.records)
                if quota.is_throttled(sp.topic, sp.partition):
                    quota.record(len(data.records))
            else:
                metrics.topic(sp.topic).bytes_out += len(data.records)


def _session_for(broker: Broker, req: FetchRequest, version: int
                 ) -> tuple[FetchSession | None, bool, int]:
    """(session, incremental, error code) for the request's session id and epoch."""
    cache = broker.fetch_sessions
    sid, epoch = req.session_id, req.session_epoch
    if version < 7 or (sid == 0 and epoch == FINAL_EPOCH):
        return None, False, 0
    if epoch in (FINAL_EPOCH, INITIAL_EPOCH) and sid != 0:
        cache.close(sid)
    if epoch == FINAL_EPOCH:
        return None, False, 0
    if epoch == INITIAL_EPOCH:
        return cache.new_session(), False, 0
    session = cache.get(sid)
    if session is None:
        return None, False, errors.FetchSessionIdNotFoundError.code
    if epoch != session.next_epoch:
        return None, False, errors.InvalidFetchSessionEpochError.code
    return session, True, 0


def _throttled(broker: Broker, conn: ServerConnection, header: RequestHeader,
               results: list[tuple[SessionPartition, fr.PartitionData]],
               session: FetchSession | None, incremental: bool) -> FetchResponse | None:
    """The empty response of a Fetch its client's quotas throttle (None: not throttled).

    As Kafka's ``getThrottledResponse``: no data and the session left as it was
    (an incremental session still moves to its next epoch; a new one is not kept)."""
    size = sum(len(d.records) for _, d in results if d.records)
    throttle = fetch_throttle_ms(broker.quotas, conn.info, header.client_id, size,
                                 time.perf_counter() - conn.handler_started - conn.waited_s)
    if not throttle:
        return None
    conn.quota_throttle_ms = throttle
    session_id = 0
    if session is not None and incremental:
        session.next_epoch += 1
        session_id = session.session_id
    elif session is not None:
        broker.fetch_sessions.close(session.session_id)
    return FetchResponse(throttle_time_ms=throttle, error_code=0, session_id=session_id,
                         responses=[])


async def handle_fetch(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: FetchRequest) -> FetchResponse:
    version = header.request_api_version
    replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
    if replica_id >= 0:
        conn.info.replica_id = replica_id
    session, incremental, code = _session_for(broker, req, version)
    if code:
        return FetchResponse(error_code=code, session_id=0)
    requested = _targets(broker, req, version)
    named = [(sp.topic, sp.partition) for sp in requested]
    if session is not None:
        if incremental:
            _forget(session, req, broker, version)
        for sp in requested:
            old = session.partitions.get((sp.topic, sp.partition))
            if old is not None:
                sp.reported = old.reported  # a new position, but the same client view
            session.partitions[(sp.topic, sp.partition)] = sp
    started = time.monotonic()
    # an incremental fetch reads what changed, and everything once per full_scan_s
    acls = broker.controller.acls.version
    everything = session is None or not incremental or started >= session.next_full_scan \
        or acls != session.acl_version
    if session is not None and everything:
        session.next_full_scan = started + FULL_SCAN_S
        session.acl_version = acls
    deadline = started + max(req.max_wait_ms, 0) / 1000
    while True:
        if session is None:
            targets = requested
        else:
            targets = session.targets(named, everything)
            everything = False
        got = await _collect(broker, conn, req, targets, replica_id, session)
        remaining = deadline - time.monotonic()
        if got.total >= req.min_bytes or got.got_error or remaining <= 0 \
                or not broker.running or (session is None and not got.waiting):
            break
        named = got.pending   # what the next read must cover besides the marked ones
        waited_from = time.perf_counter()
        try:
            if session is not None:
                await asyncio.wait([session.changed()], timeout=remaining)
            else:
                futures = [p.data_waiter() for p in got.waiting]
                try:
                    await asyncio.wait(futures, timeout=remaining,
                                       return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for p, f in zip(got.waiting, futures, strict=True):
                        p.discard_waiter(f)
        finally:
            conn.waited_s += time.perf_counter() - waited_from   # not work: no request quota
        if session is not None and session.closed:
            break
    results = got.results
    if session is not None:
        session.dirty.update(got.pending)
    throttled = _throttled(broker, conn, header, results, session, incremental)
    if throttled is not None:
        if session is not None:   # nothing was told: read all of it again next time
            session.dirty.update((sp.topic, sp.partition) for sp, _ in results)
        return throttled
    if session is not None:
        if incremental:
            results = [(sp, d) for sp, d in results if _worth_sending(sp, d)]
        for sp, d in results:
            sp.reported = _client_view(d)
        if incremental:  # a new session expects epoch 1 next
            session.next_epoch += 1
    _count_bytes_out(broker, results, replica_id)
    topics = _group(results)
    endpoints = []
    hinted = {pd.current_leader.leader_id for t in topics for pd in t.partitions
              if pd.current_leader.leader_id >= 0}
    for node in sorted(hinted):
        b = broker.controller.brokers.get(node)
        address = b.endpoint(conn.listener.name) if b is not None else None
        if b is not None and address is not None:
            endpoints.append(fr.NodeEndpoint(b.node_id, *address, b.rack))
    return FetchResponse(throttle_time_ms=0, error_code=0,
                         session_id=session.session_id if session is not None else 0,
                         responses=topics, node_endpoints=endpoints)


HANDLERS = [Handler(FetchRequest, 4, 18, handle_fetch)]
