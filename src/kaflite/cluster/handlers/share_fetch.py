"""ShareFetch (78) and ShareAcknowledge (79): share consumers on the partition leaders.

Versions are Kafka 4.2's, v1-v2 (and Kafka 4.0's early-access v0): v1 adds
``MaxRecords`` and ``BatchSize`` and drops ``PartitionMaxBytes``, and answers with
``AcquisitionLockTimeoutMs``; v2 adds ``ShareAcquireMode`` (KIP-1206: 0
batch-optimized, 1 record-limit) and RENEW acknowledgements (KIP-1222,
``IsRenewAck``).

One request does, in order: the share session step (``_sessions``), the
acknowledgements it carries (each partition's answered once its new state is
durable), then, for ShareFetch, acquiring records on every partition of the
session, waiting up to ``MaxWaitMs`` for some to become available. A session
closed (epoch -1) releases what its member still holds there.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kaflite.cluster import features
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import code_for_exception, leader_hint
from kaflite.cluster.observe import NOT_LEADER_CODES
from kaflite.cluster.share._manager import FetchedShare
from kaflite.cluster.share._partition import AckType, Acquired
from kaflite.cluster.share._sessions import FINAL_EPOCH, INITIAL_EPOCH
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from kaflite.protocol.messages import share_acknowledge_response as sar
from kaflite.protocol.messages import share_fetch_response as sfr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection
    from kaflite.cluster.partition import Partition
    from kaflite.cluster.share import SharePartitionManager

__all__ = ["HANDLERS"]

DEFAULT_MAX_RECORDS = 500      # v0 has no MaxRecords: Kafka's share.max.poll.records
RECORD_LIMIT_MODE = 1

Batches = list[tuple[int, int, list[int]]]
NameOf = Callable[[uuid.UUID], str | None]


@dataclass
class _Result:
    error: int = 0
    message: str | None = None
    ack_error: int = 0
    ack_message: str | None = None
    records: bytes = b""
    acquired: list[Acquired] = field(default_factory=list)
    touched: bool = False


def _manager(broker: Broker) -> SharePartitionManager:
    features.require_share_groups(broker.controller)
    if broker.share is None:
        raise errors.CoordinatorNotAvailableError("share groups are not running on this broker")
    return broker.share


def _ack_batches(raw: list[tuple[int, int, list[int]]], renew_allowed: bool) -> Batches:
    """Kafka's checks of a partition's AcknowledgementBatches: ascending, not overlapping,
    types known (RENEW only when the request says it has some)."""
    last = -1
    for first, end, types in raw:
        if first < 0 or end < first or first <= last:
            raise errors.InvalidRequestError("Acknowledgement batches must be ascending and "
                                             "must not overlap.")
        if not types or any(t < AckType.GAP or t > AckType.RENEW for t in types):
            raise errors.InvalidRequestError("Invalid acknowledge type.")
        if not renew_allowed and AckType.RENEW in types:
            raise errors.InvalidRequestError("Renew acknowledgements need IsRenewAck.")
        last = end
    return raw


async def _acknowledge(mgr: SharePartitionManager, broker: Broker, conn: ServerConnection,
                       group_id: str, member_id: str, topic: str, index: int,
                       batches: list[tuple[int, int, list[int]]], renew: bool) -> tuple[int,
                                                                                        str | None]:
    try:
        _check_read(broker, conn, topic)
        checked = _ack_batches(batches, renew)
        p = broker.leader_partition(topic, index)
        sp = await mgr.share_partition(group_id, p)
        failure: errors.KafkaError | None = None
        try:
            sp.acknowledge_all(member_id, checked)
        except errors.KafkaError as exc:     # none of the partition's batches applied
            failure = exc
        code = await mgr.persist(sp)
        if code:
            return code, None
        if failure is not None:
            return failure.code, failure.message
        return 0, None
    except errors.KafkaError as exc:
        return code_for_exception(exc), exc.message


def _check_read(broker: Broker, conn: ServerConnection, topic: str) -> None:
    from kaflite.cluster.acl._gate import fetch_denied

    if broker.authorizer is not None and fetch_denied(broker, conn, topic, -1):
        raise errors.TopicAuthorizationFailedError(topic)


def _session_step(mgr: SharePartitionManager, group_id: str, member_id: str, epoch: int,
                  client: str, has_acks: bool, fetch: bool, connection_id: int = -1
                  ) -> list[tuple[uuid.UUID, int]]:
    """Check and advance the share session; the partitions a closed session leaves."""
    if epoch == INITIAL_EPOCH:
        if not fetch:
            raise errors.InvalidShareSessionEpochError(
                "ShareAcknowledge cannot open a share session (epoch 0).")
        if has_acks:
            raise errors.InvalidRequestError(
                "Acknowledge data is not allowed in a request opening a share session.")
        _, old = mgr.sessions.open(group_id, member_id, client, connection_id)
        return [] if old is None else list(old.partitions)
    session = mgr.sessions.check(group_id, member_id, epoch)
    if epoch != FINAL_EPOCH:
        mgr.sessions.advance(session)
    return []


def _leader(broker: Broker, topic: str, index: int, code: int) -> tuple[int, int]:
    if code in (errors.NotLeaderOrFollowerError.code, errors.FencedLeaderEpochError.code):
        hint = leader_hint(broker, topic, index)
        if hint is not None:
            return hint
    return -1, -1


def _endpoints(broker: Broker, conn: ServerConnection, leaders: set[int]) -> list[tuple[int, str,
                                                                                       int,
                                                                                       str | None]]:
    out = []
    for node in sorted(n for n in leaders if n >= 0):
        b = broker.controller.brokers.get(node)
        address = b.endpoint(conn.listener.name) if b is not None else None
        if b is not None and address is not None:
            out.append((b.node_id, address[0], address[1], b.rack))
    return out


def _require_ids(group_id: str, member_id: str) -> None:
    """ShareFetch and ShareAcknowledge name their group and member (Kafka's messages)."""
    if not group_id.strip():
        raise errors.InvalidRequestError("GroupId can't be empty.")
    if not member_id.strip():
        raise errors.InvalidRequestError("MemberId can't be empty.")


async def handle_share_fetch(broker: Broker, conn: ServerConnection, header: RequestHeader,
                             req: ShareFetchRequest) -> ShareFetchResponse:
    version = header.request_api_version
    group_id, member_id = req.group_id or "", req.member_id or ""
    epoch = req.share_session_epoch
    try:
        mgr = _manager(broker)
        _require_ids(group_id, member_id)
        has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
        renew_only = version >= 2 and req.is_renew_ack
        if renew_only and (req.max_wait_ms or req.min_bytes or req.max_bytes or
                           req.max_records):
            # KIP-1222: a ShareFetch carrying RENEW acknowledgements fetches nothing
            raise errors.InvalidRequestError(
                "MaxWaitMs, MinBytes, MaxBytes and MaxRecords must be 0 when IsRenewAck is "
                "set.")
        released = _session_step(mgr, group_id, member_id, epoch, header.client_id or "",
                                 has_acks, True, conn.info.connection_id)
    except errors.KafkaError as exc:
        return ShareFetchResponse(error_code=exc.code, error_message=exc.message)
    settings = mgr.settings(group_id)
    for sp in mgr.release_session(group_id, member_id, released):
        await mgr.persist(sp)
    results: dict[tuple[uuid.UUID, int], _Result] = {}
    names: dict[uuid.UUID, str | None] = {}

    def name_of(topic_id: uuid.UUID) -> str | None:
        if topic_id not in names:
            topic = broker.controller.topics_by_id.get(topic_id)
            names[topic_id] = None if topic is None else topic.name
        return names[topic_id]

    session = mgr.sessions.get(group_id, member_id)
    # Acknowledgements first, then the session's partitions change.
    for t in req.topics:
        for fp in t.partitions:
            res = results.setdefault((t.topic_id, fp.partition_index), _Result())
            if session is not None and epoch != FINAL_EPOCH:
                session.partitions[(t.topic_id, fp.partition_index)] = None
            if not fp.acknowledgement_batches:
                continue
            res.touched = True
            name = name_of(t.topic_id)
            if name is None:
                res.ack_error = errors.UnknownTopicIdError.code
                continue
            res.ack_error, res.ack_message = await _acknowledge(
                mgr, broker, conn, group_id, member_id, name, fp.partition_index,
                [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                 for b in fp.acknowledgement_batches], version >= 2 and req.is_renew_ack)
    forgotten = [(f.topic_id, idx) for f in req.forgotten_topics_data for idx in f.partitions]
    if session is not None:
        for tp in forgotten:
            session.partitions.pop(tp, None)
            results.pop(tp, None)
    for sp in mgr.release_session(group_id, member_id, forgotten):
        await mgr.persist(sp)
    if epoch == FINAL_EPOCH:
        await mgr.close_session(group_id, member_id)
    elif session is not None and not renew_only:
        await _fetch(broker, conn, mgr, req, version, group_id, member_id,
                     list(session.partitions), results, name_of)
    return _fetch_response(broker, conn, results, name_of,
                           settings.record_lock_duration_ms if version >= 1 else 0)


async def _fetch(broker: Broker, conn: ServerConnection, mgr: SharePartitionManager,
                 req: ShareFetchRequest, version: int, group_id: str, member_id: str,
                 targets: list[tuple[uuid.UUID, int]], results: dict[tuple[uuid.UUID, int],
                                                                     _Result],
                 name_of: NameOf) -> None:
    max_records = req.max_records if version >= 1 and req.max_records > 0 else DEFAULT_MAX_RECORDS
    record_limit = version >= 2 and req.share_acquire_mode == RECORD_LIMIT_MODE
    batch_size = req.batch_size if version >= 1 else 0
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    while True:
        budget = req.max_bytes if req.max_bytes > 0 else 2**31 - 1
        left = max_records
        got = False
        waiters = []
        for tp in targets:
            res = results.setdefault(tp, _Result())
            if left <= 0 or budget <= 0:
                break
            name = name_of(tp[0])
            if name is None:
                res.error, res.touched = errors.UnknownTopicIdError.code, True
                continue
            try:
                _check_read(broker, conn, name)
                p = broker.leader_partition(name, tp[1])
                fetched = await _acquire(mgr, group_id, member_id, p, left, budget,
                                         record_limit)
            except errors.KafkaError as exc:
                res.error, res.message, res.touched = code_for_exception(exc), exc.message, True
                if res.error in NOT_LEADER_CODES:
                    conn.info.share_partitions.discard((name, tp[1]))
                continue
            conn.info.share_partitions.add((name, tp[1]))
            waiters.append(p)
            if fetched.acquired:
                res.records += fetched.records
                res.acquired.extend(_split(fetched.acquired, batch_size))
                res.touched = got = True
                left -= sum(a.last - a.first + 1 for a in fetched.acquired)
                budget -= len(fetched.records)
        remaining = deadline - time.monotonic()
        if got or remaining <= 0 or not waiters or not broker.running:
            return
        futures = [p.data_waiter() for p in waiters]
        share_waiter = mgr.waiter()
        try:
            await asyncio.wait([*futures, share_waiter], timeout=remaining,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            mgr.discard_waiter(share_waiter)
            for p, f in zip(waiters, futures, strict=True):
                p.discard_waiter(f)


def _split(acquired: list[Acquired], batch_size: int) -> list[Acquired]:
    """KIP-1206's BatchSize: AcquiredRecords entries of at most that many records, which the
    client acknowledges batch by batch."""
    if batch_size <= 0:
        return acquired
    out = []
    for a in acquired:
        for first in range(a.first, a.last + 1, batch_size):
            out.append(Acquired(first, min(first + batch_size - 1, a.last), a.delivery_count))
    return out


async def _acquire(mgr: SharePartitionManager, group_id: str, member_id: str, p: Partition,
                   max_records: int, budget: int, record_limit: bool) -> FetchedShare:
    """Acquire on the share-partition. As in Kafka, the acquisition is not waited for: its
    new delivery counts are written in the background (``SharePartitionManager._flush``),
    and a write fenced by a newer state epoch (the offsets were altered, the group deleted)
    drops the cached state, which the next request reads back."""
    sp = await mgr.share_partition(group_id, p)
    return mgr.acquire(sp, p, member_id, max_records, budget, record_limit)


def _fetch_response(broker: Broker, conn: ServerConnection,
                    results: dict[tuple[uuid.UUID, int], _Result], name_of: NameOf,
                    lock_ms: int) -> ShareFetchResponse:
    topics: dict[uuid.UUID, list[sfr.PartitionData]] = {}
    leaders: set[int] = set()
    for (topic_id, index), res in results.items():
        if not res.touched:
            continue
        name = name_of(topic_id) or ""
        leader = _leader(broker, name, index, res.error or res.ack_error)
        leaders.add(leader[0])
        topics.setdefault(topic_id, []).append(sfr.PartitionData(
            partition_index=index, error_code=res.error, error_message=res.message,
            acknowledge_error_code=res.ack_error, acknowledge_error_message=res.ack_message,
            current_leader=sfr.LeaderIdAndEpoch(*leader), records=res.records,
            acquired_records=[sfr.AcquiredRecords(a.first, a.last, a.delivery_count)
                              for a in res.acquired]))
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=0, acquisition_lock_timeout_ms=lock_ms,
        responses=[sfr.ShareFetchableTopicResponse(t, ps) for t, ps in topics.items()],
        node_endpoints=[sfr.NodeEndpoint(*e) for e in _endpoints(broker, conn, leaders)])


async def handle_share_acknowledge(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                   req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    version = header.request_api_version
    group_id, member_id = req.group_id or "", req.member_id or ""
    epoch = req.share_session_epoch
    try:
        mgr = _manager(broker)
        _require_ids(group_id, member_id)
        _session_step(mgr, group_id, member_id, epoch, header.client_id or "", True, False)
    except errors.KafkaError as exc:
        return ShareAcknowledgeResponse(error_code=exc.code, error_message=exc.message)
    settings = mgr.settings(group_id)
    topics: dict[uuid.UUID, list[sar.PartitionData]] = {}
    leaders: set[int] = set()
    for t in req.topics:
        topic = broker.controller.topics_by_id.get(t.topic_id)
        for ap in t.partitions:
            if topic is None:
                code, message = errors.UnknownTopicIdError.code, None
                leader = (-1, -1)
            else:
                code, message = await _acknowledge(
                    mgr, broker, conn, group_id, member_id, topic.name, ap.partition_index,
                    [(b.first_offset, b.last_offset, list(b.acknowledge_types))
                     for b in ap.acknowledgement_batches], version >= 2 and req.is_renew_ack)
                leader = _leader(broker, topic.name, ap.partition_index, code)
            leaders.add(leader[0])
            topics.setdefault(t.topic_id, []).append(sar.PartitionData(
                partition_index=ap.partition_index, error_code=code, error_message=message,
                current_leader=sar.LeaderIdAndEpoch(*leader)))
    if epoch == FINAL_EPOCH:
        await mgr.close_session(group_id, member_id)
    return ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=0,
        acquisition_lock_timeout_ms=settings.record_lock_duration_ms if version >= 2 else 0,
        responses=[sar.ShareAcknowledgeTopicResponse(t, ps) for t, ps in topics.items()],
        node_endpoints=[sar.NodeEndpoint(*e) for e in _endpoints(broker, conn, leaders)])


HANDLERS = [
    Handler(ShareFetchRequest, 0, 2, handle_share_fetch),
    Handler(ShareAcknowledgeRequest, 0, 2, handle_share_acknowledge),
]
