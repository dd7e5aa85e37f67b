"""Committed offsets: OffsetCommit (8), OffsetFetch (9), OffsetDelete (47) and
TxnOffsetCommit (28).

OffsetCommit answers once the offsets are committed in ``__consumer_offsets``
(replicated to the ISR). OffsetFetch reads the coordinator's committed view:
v1 reports coordinator errors per partition, v2-v7 at the top, and v8+ (KIP-709)
per group, for a batch of groups. ``require_stable`` (KIP-447): a partition
with a transactional commit still pending is answered UNSTABLE_OFFSET_COMMIT,
and the client asks again.

A TxnOffsetCommit whose producer has no transaction open in the group's offsets
partition is first checked with the transaction coordinator (KIP-890): v5 adds
that partition to the transaction (transactions v2: the producer sends no
AddOffsetsToTxn), earlier versions verify that AddOffsetsToTxn added it. v6 names topics by id (an unknown one: UNKNOWN_TOPIC_ID).

OffsetCommit v10 and OffsetFetch v10 (Kafka 4.4) name topics by id as well: an id no
topic has gets UNKNOWN_TOPIC_ID for each of its partitions, as from Kafka's KafkaApis.

Versions follow Kafka 4.0 (KIP-896 removed OffsetCommit v0-v1, OffsetFetch v0).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kaflite.cluster.groups._records import OffsetAndMetadata
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers.groups import shard_for
from kaflite.cluster.internal_topics import OFFSETS_TOPIC
from kaflite.cluster.txn import IMPLICIT_OFFSETS_VERSION, txn_offset_commit_error
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kaflite.protocol.messages import offset_commit_response as ocr
from kaflite.protocol.messages import offset_delete_response as odr
from kaflite.protocol.messages import offset_fetch_request as ofq
from kaflite.protocol.messages import offset_fetch_response as ofr
from kaflite.protocol.messages import txn_offset_commit_response as tcr
from kaflite.protocol.primitives import ZERO_UUID

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.groups import CoordinatorShard
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

NONE = 0
UNSTABLE = errors.UnstableOffsetCommitError.code
TOPIC_IDS_TXN_OFFSETS = 6     # TxnOffsetCommit v6: topics by id (KIP-1319)
TOPIC_IDS_OFFSETS = 10        # OffsetCommit and OffsetFetch v10: topics by id
Wanted = list[tuple[str, list[int]]] | None


async def _commit(broker: Broker, conn: ServerConnection, group_id: str,
                  commit: Callable[[CoordinatorShard], Awaitable[dict[tuple[str, int], int]]]
                  ) -> Callable[[str, int], int]:
    """Run a commit on the group's shard; the error code of each (topic, partition)."""
    try:
        shard = shard_for(broker, conn, group_id)
    except errors.KafkaError as exc:
        code = exc.code
        return lambda topic, partition: code
    results = await commit(shard)
    return lambda topic, partition: results.get((topic, partition), NONE)


async def handle_offset_commit(broker: Broker, conn: ServerConnection, header: RequestHeader,
                               req: OffsetCommitRequest) -> OffsetCommitResponse:
    version = header.request_api_version
    asked = list(req.topics)
    if version >= TOPIC_IDS_OFFSETS:     # topics by id: resolved up front, as Kafka's KafkaApis
        for t in asked:
            topic = broker.controller.topics_by_id.get(t.topic_id)
            t.name = topic.name if topic is not None else ""
        req.topics = [t for t in asked if t.name]
    code_of = await _commit(broker, conn, req.group_id,
                            lambda shard: shard.offset_manager.commit(req, version))
    unknown = errors.UnknownTopicIdError.code
    topics = []
    for t in asked:
        parts = [ocr.OffsetCommitResponsePartition(
            partition_index=p.partition_index,
            error_code=code_of(t.name, p.partition_index) if t.name else unknown)
            for p in t.partitions]
        topics.append(ocr.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id,
                                                    partitions=parts))
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)


def _partition(index: int, om: OffsetAndMetadata | None,
               code: int = NONE) -> ofr.OffsetFetchResponsePartitions:
    if om is None:
        return ofr.OffsetFetchResponsePartitions(partition_index=index, committed_offset=-1,
                                                 committed_leader_epoch=-1, metadata="",
                                                 error_code=code)
    return ofr.OffsetFetchResponsePartitions(partition_index=index, committed_offset=om.offset,
                                             committed_leader_epoch=om.leader_epoch,
                                             metadata=om.metadata, error_code=code)


def _fetch_group(broker: Broker, conn: ServerConnection, group_id: str, wanted: Wanted,
                 require_stable: bool = False, member_id: str | None = None,
                 member_epoch: int = -1) -> tuple[int, list[ofr.OffsetFetchResponseTopics]]:
    """One group's offsets, or its coordinator error (with no topics). A read, as an
    admin's: it does not make the connection the group's coordinator connection."""
    try:
        shard = shard_for(broker, conn, group_id, label=False)
        modern = shard.consumer_groups.get(group_id)
        if modern is not None:
            # v9+: a consumer group's member fetches with its member id and epoch.
            shard.consumer.validate_offset_fetch(modern, member_id, member_epoch)
    except errors.KafkaError as exc:
        return exc.code, []
    found = shard.offset_manager.fetch(group_id, wanted)
    unstable = shard.txn_offsets.unstable if require_stable else lambda g, tp: False
    return NONE, [ofr.OffsetFetchResponseTopics(name=name, partitions=[
        _partition(p, None, UNSTABLE) if unstable(group_id, (name, p)) else _partition(p, om)
        for p, om in parts]) for name, parts in found]


def _fetch_group_by_ids(broker: Broker, conn: ServerConnection, g: ofq.OffsetFetchRequestGroup,
                        require_stable: bool) -> tuple[int, list[ofr.OffsetFetchResponseTopics]]:
    """v10: topics named by id. An unknown id's partitions get UNKNOWN_TOPIC_ID; asked for
    every topic, a group's offsets of a topic that no longer exists are left out (as
    Kafka's ``fetchAllOffsetsForGroup``, which finds no id for its name)."""
    controller = broker.controller
    if g.topics is None:
        code, topics = _fetch_group(broker, conn, g.group_id, None, require_stable,
                                    g.member_id, g.member_epoch)
        for found in topics:
            state = controller.topics.get(found.name)
            found.topic_id = state.topic_id if state is not None else ZERO_UUID
        return code, [found for found in topics if found.topic_id != ZERO_UUID]
    names: dict[str, uuid.UUID] = {}
    missing: list[ofr.OffsetFetchResponseTopics] = []
    wanted: list[tuple[str, list[int]]] = []
    for t in g.topics:
        state = controller.topics_by_id.get(t.topic_id)
        if state is None:
            missing.append(ofr.OffsetFetchResponseTopics(topic_id=t.topic_id, partitions=[
                _partition(p, None, errors.UnknownTopicIdError.code)
                for p in t.partition_indexes]))
            continue
        names[state.name] = t.topic_id
        wanted.append((state.name, list(t.partition_indexes)))
    code, topics = _fetch_group(broker, conn, g.group_id, wanted, require_stable,
                                g.member_id, g.member_epoch)
    if code:
        return code, []
    for found in topics:
        found.topic_id = names[found.name]
    return code, topics + missing


async def handle_offset_fetch(broker: Broker, conn: ServerConnection, header: RequestHeader,
                              req: OffsetFetchRequest) -> OffsetFetchResponse:
    version = header.request_api_version
    if version >= 8:
        groups = []
        for g in req.groups:
            if version >= TOPIC_IDS_OFFSETS:
                code, topics = _fetch_group_by_ids(broker, conn, g, req.require_stable)
                groups.append(ofr.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics,
                                                           error_code=code))
                continue
            wanted: Wanted = None if g.topics is None else \
                [(t.name, list(t.partition_indexes)) for t in g.topics]
            code, topics = _fetch_group(broker, conn, g.group_id, wanted, req.require_stable,
                                        g.member_id, g.member_epoch)
            groups.append(ofr.OffsetFetchResponseGroup(group_id=g.group_id, topics=topics,
                                                       error_code=code))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    wanted = None if req.topics is None else \
        [(t.name, list(t.partition_indexes)) for t in req.topics]
    code, found = _fetch_group(broker, conn, req.group_id, wanted,
                               version >= 7 and req.require_stable)
    if code and version < 2:
        # v1 has no top-level error: every requested partition carries it.
        found = [ofr.OffsetFetchResponseTopics(name=name, partitions=[
            _partition(p, None, code) for p in parts])
                 for name, parts in wanted or []]
    legacy = [ofr.OffsetFetchResponseTopic(t.name, [
        ofr.OffsetFetchResponsePartition(p.partition_index, p.committed_offset,
                                         p.committed_leader_epoch, p.metadata, p.error_code)
        for p in t.partitions]) for t in found]
    return OffsetFetchResponse(throttle_time_ms=0, topics=legacy,
                               error_code=code if version >= 2 else NONE)


async def handle_offset_delete(broker: Broker, conn: ServerConnection, header: RequestHeader,
                               req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not req.group_id:
        return OffsetDeleteResponse(error_code=errors.InvalidGroupIdError.code)
    try:
        shard = shard_for(broker, conn, req.group_id, label=False)     # an admin request
    except errors.KafkaError as exc:
        return OffsetDeleteResponse(error_code=exc.code)
    wanted = [(t.name, [p.partition_index for p in t.partitions]) for t in req.topics]
    top, results = await shard.offset_manager.delete_offsets(req.group_id, wanted)
    if top:
        return OffsetDeleteResponse(error_code=top)
    return OffsetDeleteResponse(error_code=NONE, throttle_time_ms=0, topics=[
        odr.OffsetDeleteResponseTopic(name, [
            odr.OffsetDeleteResponsePartition(p, results.get((name, p), NONE)) for p in parts])
        for name, parts in wanted])


async def _verify_offsets_partition(broker: Broker, req: TxnOffsetCommitRequest,
                                   version: int) -> int:
    """0, or why the producer's transaction may not take offsets of this group yet."""
    coordinator, groups = broker.transactions, broker.groups
    if coordinator is None or groups is None or not req.transactional_id:
        return NONE
    if version < IMPLICIT_OFFSETS_VERSION and not coordinator.config.verify_partitions:
        return NONE
    tp = (OFFSETS_TOPIC, groups.partition_for(req.group_id))
    p = broker.partitions.get(tp)
    if p is None or p.leader != broker.node_id \
            or p.log.producers.in_transaction(req.producer_id, req.producer_epoch):
        return NONE     # not the coordinator (the commit says so), or already verified
    codes = await coordinator.verifier.verify(req.transactional_id, req.producer_id,
                                              req.producer_epoch, [tp],
                                              version >= IMPLICIT_OFFSETS_VERSION)
    return txn_offset_commit_error(codes.get(tp, NONE), version)


async def handle_txn_offset_commit(broker: Broker, conn: ServerConnection,
                                   header: RequestHeader,
                                   req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    version = header.request_api_version
    asked = list(req.topics)
    if version >= TOPIC_IDS_TXN_OFFSETS:    # KIP-1319: topics by id; resolved up front
        for t in asked:
            topic = broker.controller.topics_by_id.get(t.topic_id)
            t.name = topic.name if topic is not None else ""
        req.topics = [t for t in asked if t.name]
    refused = await _verify_offsets_partition(broker, req, version)
    code_of: Callable[[str, int], int] = (lambda topic, partition: refused) if refused else \
        await _commit(broker, conn, req.group_id, lambda shard: shard.txn_offsets.commit(req))
    unknown = errors.UnknownTopicIdError.code
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[
        tcr.TxnOffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
            tcr.TxnOffsetCommitResponsePartition(
                partition_index=p.partition_index,
                error_code=code_of(t.name, p.partition_index) if t.name else unknown)
            for p in t.partitions])
        for t in asked])


HANDLERS = [
    Handler(OffsetCommitRequest, 2, TOPIC_IDS_OFFSETS, handle_offset_commit),
    Handler(OffsetFetchRequest, 1, TOPIC_IDS_OFFSETS, handle_offset_fetch),
    Handler(OffsetDeleteRequest, 0, 0, handle_offset_delete),
    Handler(TxnOffsetCommitRequest, 0, TOPIC_IDS_TXN_OFFSETS, handle_txn_offset_commit),
]
