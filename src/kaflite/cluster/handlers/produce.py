"""Produce (key 0): validate, append to the leader's log, wait for acks.

The records are never decoded: the log validates each batch's framing and CRC
and stamps offsets and the leader epoch into the batch headers. With
acks=all the response waits until the high watermark passes the appended batch,
which needs every ISR member to have fetched it; fewer ISR members than
``min.insync.replicas`` fails the request before the append
(NOT_ENOUGH_REPLICAS) or after it (NOT_ENOUGH_REPLICAS_AFTER_APPEND). With
acks=0 no response is sent at all.

A partition this broker does not lead answers NOT_LEADER_OR_FOLLOWER with the
current leader and its endpoint (KIP-951), so the producer can reroute without
a Metadata round trip.

Produce v13 names topics by id (KIP-516): an id no topic has is UNKNOWN_TOPIC_ID.

A producer's first transactional batch in a partition is checked with its
transaction coordinator before it is appended (``kaflite.cluster.txn._verify``):
Produce v12 and later add the partition to the transaction (transactions v2,
KIP-890 part 2), earlier versions only verify that the producer added it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NamedTuple

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import code_for_exception, leader_hint, now_ms
from kaflite.cluster.txn import produce_error
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import ProduceRequest, ProduceResponse
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.messages import produce_response as pr
from kaflite.protocol.records import (
    BatchProducer,
    Compression,
    InvalidRecordBatch,
    batch_codec,
    batch_producer,
)

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

ZSTD_MIN_VERSION = 7   # KIP-110: older Produce versions may not carry zstd batches
IMPLICIT_ADD_VERSION = 12   # KIP-890 part 2: the leader adds the partition to the txn
TOPIC_IDS_VERSION = 13      # KIP-516: topics by id, UNKNOWN_TOPIC_ID for one not known

TP = tuple[str, int]


class _Verified(NamedTuple):
    """The coordinator's answer for one partition, and the producer's markers there
    when the leader asked."""

    code: int
    producer_id: int
    producer_epoch: int
    markers: int
    implicit: bool      # transactions v2

    def ended_meanwhile(self, seen: tuple[int, int]) -> bool:
        """A marker applied while the leader asked ended the transaction it joined: in
        v1 any (the producer added the partition only after its last transaction was
        complete), in v2 one of a later epoch (each end bumps it, so the markers of the
        producer's previous transaction carry the epoch of this one)."""
        count, epoch = seen
        return count != self.markers and (not self.implicit or epoch > self.producer_epoch)


async def _verify_transactional(broker: Broker, req: ProduceRequest,
                                version: int) -> dict[TP, _Verified]:
    """Ask the coordinator about the partitions where the request's producer has no
    transaction open yet; the other partitions need no answer."""
    coordinator = broker.transactions
    tid = req.transactional_id
    if tid is None or coordinator is None:
        return {}
    if version < IMPLICIT_ADD_VERSION and not coordinator.config.verify_partitions:
        return {}
    first: BatchProducer | None = None
    wanted: dict[TP, int] = {}
    for t in req.topic_data:
        for d in t.partition_data:
            header = batch_producer(d.records) if d.records is not None else None
            if header is None or not header.transactional:
                continue
            p = broker.partitions.get((t.name, d.index))
            if p is None or p.leader != broker.node_id:
                continue        # the append answers NOT_LEADER_OR_FOLLOWER
            first = first or header
            if header.producer_id == first.producer_id and not p.log.producers.in_transaction(
                    header.producer_id, header.producer_epoch):
                wanted[(t.name, d.index)] = 0
    if first is None or not wanted:
        return {}
    pid = first.producer_id

    def take_guards() -> None:      # the markers of the producer each partition applied
        for tp in wanted:
            p = broker.partitions.get(tp)
            wanted[tp] = p.log.producers.markers_seen(pid)[0] if p is not None else -1

    implicit = version >= IMPLICIT_ADD_VERSION
    codes = await coordinator.verifier.verify(tid, pid, first.producer_epoch, list(wanted),
                                              implicit, take_guards)
    return {tp: _Verified(produce_error(codes.get(tp, 0), version), pid, first.producer_epoch,
                          seen, implicit) for tp, seen in wanted.items()}


async def _produce_partition(broker: Broker, conn: ServerConnection, topic: str,
                             data: pq.PartitionProduceData, acks: int, timeout_s: float,
                             version: int, verified: _Verified | None
                             ) -> pr.PartitionProduceResponse:
    index = data.index
    records = data.records
    res = pr.PartitionProduceResponse(index=index, error_code=0, base_offset=-1,
                                      log_append_time_ms=-1, log_start_offset=-1)
    try:
        p = broker.leader_partition(topic, index)
        conn.info.partitions.add((topic, index))
        min_isr = p.require_min_isr() if acks == -1 else 0
        if records is None:
            raise errors.InvalidRecordError("null records")
        if version < ZSTD_MIN_VERSION and batch_codec(records) == Compression.ZSTD:
            raise errors.UnsupportedCompressionTypeError(
                f"zstd needs Produce v{ZSTD_MIN_VERSION} or later, not v{version}")
        if verified is not None:
            if verified.code:
                raise errors.error_for_code(
                    verified.code, "the transaction coordinator did not confirm that the "
                    f"partition is in the transaction (error {verified.code})")
            if verified.ended_meanwhile(p.log.producers.markers_seen(verified.producer_id)):
                raise errors.InvalidTxnStateError(
                    "the transaction ended while its coordinator was asked")
        result = p.log.append_as_leader(records, p.leader_epoch, now_ms=now_ms())
        broker.metrics.produced(topic, len(records), result.record_count)
        res.base_offset = result.base_offset
        res.log_append_time_ms = result.log_append_time
        res.log_start_offset = p.log_start_offset
        p.wake_fetchers()
        p.maybe_advance_hw()
        if acks == -1:
            await p.wait_replicated(result.last_offset + 1, timeout_s, min_isr)
    except (errors.KafkaError, InvalidRecordBatch) as exc:
        res.error_code = code_for_exception(exc)
        res.error_message = getattr(exc, "message", None) or str(exc)
        rejected = exc.record_errors
        if rejected:     # KIP-467: each rejected record, as Kafka's RecordValidationException
            res.record_errors = [pr.BatchIndexAndErrorMessage(i, why) for i, why in rejected]
            res.error_message = (
                f"One or more records have been rejected due to {len(rejected)} record "
                f"errors in total, and only showing the first three errors at most: "
                + ", ".join(f"(index {i}: {why})" for i, why in rejected[:3]))
        elif isinstance(exc, InvalidRecordBatch) and \
                res.error_code == errors.InvalidRecordError.code:
            res.record_errors = [pr.BatchIndexAndErrorMessage(0, str(exc))]
        if res.error_code in (errors.NotLeaderOrFollowerError.code,
                              errors.FencedLeaderEpochError.code):
            hint = leader_hint(broker, topic, index)
            if hint is not None and hint[0] >= 0:
                res.current_leader = pr.LeaderIdAndEpoch(*hint)
    return res


async def handle_produce(broker: Broker, conn: ServerConnection, header: RequestHeader,
                         req: ProduceRequest) -> ProduceResponse | None:
    timeout_s = max(req.timeout_ms, 0) / 1000
    if req.acks not in (0, 1, -1):
        code = errors.InvalidRequiredAcksError.code
        return ProduceResponse(responses=[
            pr.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
                pr.PartitionProduceResponse(d.index, code, -1, -1, -1) for d in t.partition_data])
            for t in req.topic_data])
    version = header.request_api_version
    unknown_ids: list[pq.TopicProduceData] = []
    if version >= TOPIC_IDS_VERSION:     # KIP-516: topics named by id; resolved up front
        named = []
        for t in req.topic_data:
            topic = broker.controller.topics_by_id.get(t.topic_id)
            if topic is None:
                unknown_ids.append(t)
            else:
                t.name = topic.name
                named.append(t)
        req.topic_data = named
    verified = await _verify_transactional(broker, req, version)
    jobs = []
    for t in req.topic_data:
        for d in t.partition_data:
            jobs.append((t.name, _produce_partition(broker, conn, t.name, d, req.acks, timeout_s,
                                                    version, verified.get((t.name, d.index)))))
    results = await asyncio.gather(*(j for _, j in jobs))
    if req.acks == 0:
        return None
    by_topic: dict[str, list[pr.PartitionProduceResponse]] = {}
    for (name, _), res in zip(jobs, results, strict=True):
        by_topic.setdefault(name, []).append(res)
    ids = {t.name: t.topic_id for t in req.topic_data}
    endpoints = []
    hinted = {r.current_leader.leader_id for r in results if r.current_leader.leader_id >= 0}
    for node in sorted(hinted):
        b = broker.controller.brokers.get(node)
        address = b.endpoint(conn.listener.name) if b is not None else None
        if b is not None and address is not None:
            endpoints.append(pr.NodeEndpoint(b.node_id, *address, b.rack))
    unknown = errors.UnknownTopicIdError.code
    return ProduceResponse(
        responses=[pr.TopicProduceResponse(name=name, topic_id=ids[name],
                                           partition_responses=parts)
                   for name, parts in by_topic.items()] + [
            pr.TopicProduceResponse(topic_id=t.topic_id, partition_responses=[
                pr.PartitionProduceResponse(d.index, unknown, -1, -1, -1)
                for d in t.partition_data]) for t in unknown_ids],
        throttle_time_ms=0,
        node_endpoints=endpoints,
    )


HANDLERS = [Handler(ProduceRequest, 3, TOPIC_IDS_VERSION, handle_produce)]
