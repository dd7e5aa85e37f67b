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
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import code_for_exception, leader_hint, now_ms
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import ProduceRequest, ProduceResponse
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.messages import produce_response as pr
from kaflite.protocol.records import Compression, InvalidRecordBatch, batch_codec

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

ZSTD_MIN_VERSION = 7   # KIP-110: older Produce versions may not carry zstd batches


async def _produce_partition(broker: Broker, conn: ServerConnection, topic: str,
                             data: pq.PartitionProduceData, acks: int, timeout_s: float,
                             version: int) -> pr.PartitionProduceResponse:
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
            pr.TopicProduceResponse(t.name, [
                pr.PartitionProduceResponse(d.index, code, -1, -1, -1) for d in t.partition_data])
            for t in req.topic_data])
    jobs = []
    for t in req.topic_data:
        for d in t.partition_data:
            jobs.append((t.name, _produce_partition(broker, conn, t.name, d, req.acks, timeout_s,
                                                    header.request_api_version)))
    results = await asyncio.gather(*(j for _, j in jobs))
    if req.acks == 0:
        return None
    by_topic: dict[str, list[pr.PartitionProduceResponse]] = {}
    for (name, _), res in zip(jobs, results, strict=True):
        by_topic.setdefault(name, []).append(res)
    endpoints = []
    hinted = {r.current_leader.leader_id for r in results if r.current_leader.leader_id >= 0}
    for node in sorted(hinted):
        b = broker.controller.brokers.get(node)
        address = b.endpoint(conn.listener.name) if b is not None else None
        if b is not None and address is not None:
            endpoints.append(pr.NodeEndpoint(b.node_id, *address, b.rack))
    return ProduceResponse(
        responses=[pr.TopicProduceResponse(name, parts) for name, parts in by_topic.items()],
        throttle_time_ms=0,
        node_endpoints=endpoints,
    )


HANDLERS = [Handler(ProduceRequest, 3, 11, handle_produce)]
