"""WriteTxnMarkers (key 27): a transaction coordinator ends a transaction in a partition.

For every marker of the request (producer id and epoch, COMMIT or ABORT, the
coordinator's epoch, and the partitions the transaction touched), the leader
of each partition appends a control batch holding one end-transaction marker,
as Kafka's ``ReplicaManager.appendRecords`` does with ``AppendOrigin.COORDINATOR``:

* the partition must be led here: NOT_LEADER_OR_FOLLOWER, or
  UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have;
* the producer state checks the marker (``ProducerStateManager.check_marker``):
  an epoch older than the producer's is INVALID_PRODUCER_EPOCH, a coordinator
  epoch older than the last marker's is TRANSACTION_COORDINATOR_FENCED;
* the write is acks=all: fewer in-sync replicas than ``min.insync.replicas``
  fails before the append (NOT_ENOUGH_REPLICAS), and the answer waits until the
  high watermark passes the marker, failing as Produce does on a timeout
  (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT).

Appending the marker closes the producer's transaction in the partition (the
last stable offset moves past it once the marker is replicated) and, for an
ABORT, adds the transaction to the aborted-transaction index. Once replicated,
``Broker.marker_hooks`` are called: the group coordinator completes
transactional offset commits on ``__consumer_offsets`` with them (Kafka's
``GroupCoordinator.onTransactionCompleted``).

Kafka accepts this request only from brokers (CLUSTER_ACTION); kaflite has no
ACLs yet and serves it on any connection. An in-process coordinator can call
``write_txn_marker`` directly instead of sending the request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import code_for_exception, now_ms
from kaflite.cluster.log import AppendOrigin
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kaflite.protocol.messages import write_txn_markers_response as wr
from kaflite.protocol.records import InvalidRecordBatch, encode_end_txn_marker_batch

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "write_txn_marker"]

log = logging.getLogger("kaflite.cluster.txn_markers")

DEFAULT_REQUEST_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms, bounding the acks wait


def _timeout_s(broker: Broker) -> float:
    value = broker.config.props.get("request.timeout.ms")
    return (int(value) if value is not None else DEFAULT_REQUEST_TIMEOUT_MS) / 1000


async def write_txn_marker(
    broker: Broker,
    topic: str,
    partition: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    committed: bool,
    timeout_s: float | None = None,
) -> int:
    """Append one COMMIT/ABORT marker as this partition's leader; returns an error code.

    0 once the marker is replicated (and ``broker.marker_hooks`` have run);
    otherwise the Kafka error code a WriteTxnMarkers response carries.
    """
    try:
        p = broker.leader_partition(topic, partition)
        min_isr = p.require_min_isr()
        now = now_ms()
        marker = encode_end_txn_marker_batch(
            committed, producer_id=producer_id, producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch, timestamp=now)
        result = p.log.append_as_leader(marker, p.leader_epoch, now_ms=now,
                                        origin=AppendOrigin.COORDINATOR)
        p.wake_fetchers()
        p.maybe_advance_hw()
        wait = _timeout_s(broker) if timeout_s is None else timeout_s
        await p.wait_replicated(result.last_offset + 1, wait, min_isr)
    except (errors.KafkaError, InvalidRecordBatch) as exc:
        return code_for_exception(exc)
    for hook in list(broker.marker_hooks):
        try:
            hook(topic, partition, producer_id, producer_epoch, committed)
        except Exception:
            log.exception("marker hook failed for %s-%s (producer %s)", topic, partition,
                          producer_id)
    return 0


async def handle_write_txn_markers(broker: Broker, conn: ServerConnection,
                                   header: RequestHeader,
                                   req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    timeout_s = _timeout_s(broker)
    jobs = []
    for m in req.markers:
        for t in m.topics:
            for index in t.partition_indexes:
                jobs.append(write_txn_marker(
                    broker, t.name, index, producer_id=m.producer_id,
                    producer_epoch=m.producer_epoch, coordinator_epoch=m.coordinator_epoch,
                    committed=m.transaction_result, timeout_s=timeout_s))
    codes = iter(await asyncio.gather(*jobs))
    results = []
    for m in req.markers:
        topics = [
            wr.WritableTxnMarkerTopicResult(t.name, [
                wr.WritableTxnMarkerPartitionResult(index, next(codes))
                for index in t.partition_indexes])
            for t in m.topics]
        results.append(wr.WritableTxnMarkerResult(m.producer_id, topics))
    return WriteTxnMarkersResponse(markers=results)


HANDLERS = [Handler(WriteTxnMarkersRequest, 0, 1, handle_write_txn_markers)]
