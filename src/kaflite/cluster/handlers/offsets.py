"""ListOffsets (2), OffsetForLeaderEpoch (23) and DeleteRecords (21).

ListOffsets' special timestamps of tiered storage (KIP-1005's latest tiered offset,
-5, and from v11 KIP-1023's earliest pending upload offset, -6) have no tiered log
to look at in kaflite: they are answered as Kafka answers them for a topic without remote storage,
offset, timestamp and leader epoch all -1.

The leader epoch answered (v4+) is Kafka's UnifiedLog's: for the latest offset the
leader's; for the earliest, the epoch in force at the log start; for a record found
by timestamp (or the largest timestamp), the epoch it was written in; and -1 when no
record is found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import code_for_exception
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kaflite.protocol.messages import delete_records_response as drr
from kaflite.protocol.messages import list_offsets_response as lor
from kaflite.protocol.messages import offset_for_leader_epoch_response as ofl

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection
    from kaflite.cluster.partition import Partition

__all__ = ["HANDLERS"]

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL = -1, -2, -3, -4
LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -5, -6
READ_COMMITTED = 1


def _check_not_lagging(p: Partition) -> None:
    """KIP-207: until a new leader's high watermark reaches the start of its epoch, the
    latest offset (or a lookup past the fetchable end) could go back: retriable."""
    if p.high_watermark_lagging:
        raise errors.OffsetNotAvailableError(
            f"{p.topic}-{p.index}: the high watermark {p.high_watermark} is behind "
            f"the start of this leader's epoch, {p.epoch_start_offset}")


async def handle_list_offsets(broker: Broker, conn: ServerConnection, header: RequestHeader,
                              req: ListOffsetsRequest) -> ListOffsetsResponse:
    topics = []
    for t in req.topics:
        parts = []
        for lp in t.partitions:
            res = lor.ListOffsetsPartitionResponse(partition_index=lp.partition_index,
                                                   error_code=0, timestamp=-1, offset=-1)
            try:
                p = broker.leader_partition(t.name, lp.partition_index, lp.current_leader_epoch)
                ts = lp.timestamp
                epoch = p.leader_epoch
                # Kafka: read_committed sees offsets below the last stable offset only.
                fetchable = (p.last_stable_offset if req.isolation_level == READ_COMMITTED
                             else p.high_watermark)
                if ts == LATEST:
                    _check_not_lagging(p)
                    res.offset = fetchable
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    res.offset = p.log_start_offset
                    epoch = p.log.epoch_for_offset(res.offset)
                elif ts in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
                    res.offset = -1
                    epoch = -1
                else:
                    # A record found: the epoch it was written in; none: offset,
                    # timestamp and epoch all -1, as Kafka's (UnifiedLog answers no
                    # TimestampAndOffset, and the response keeps its defaults).
                    found = p.log.max_timestamp() if ts == MAX_TIMESTAMP \
                        else p.log.offset_for_timestamp(ts)
                    epoch = -1
                    if found is not None and found[0] < fetchable:
                        res.offset, res.timestamp = found
                        epoch = p.log.epoch_for_offset(res.offset)
                    elif found is not None and ts != MAX_TIMESTAMP:
                        _check_not_lagging(p)
                if header.request_api_version >= 4:
                    res.leader_epoch = epoch
            except errors.KafkaError as exc:
                res.error_code = code_for_exception(exc)
            parts.append(res)
        topics.append(lor.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


async def handle_offset_for_leader_epoch(broker: Broker, conn: ServerConnection,
                                         header: RequestHeader,
                                         req: OffsetForLeaderEpochRequest
                                         ) -> OffsetForLeaderEpochResponse:
    topics = []
    for t in req.topics:
        parts = []
        for q in t.partitions:
            res = ofl.EpochEndOffset(error_code=0, partition=q.partition, leader_epoch=-1,
                                     end_offset=-1)
            try:
                p = broker.leader_partition(t.topic, q.partition, q.current_leader_epoch)
                res.leader_epoch, res.end_offset = p.log.end_offset_for_epoch(q.leader_epoch)
            except errors.KafkaError as exc:
                res.error_code = code_for_exception(exc)
            parts.append(res)
        topics.append(ofl.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


async def handle_delete_records(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    for t in req.topics:
        parts = []
        for dp in t.partitions:
            res = drr.DeleteRecordsPartitionResult(partition_index=dp.partition_index,
                                                   low_watermark=-1, error_code=0)
            try:
                p = broker.leader_partition(t.name, dp.partition_index)
                offset = p.high_watermark if dp.offset == -1 else dp.offset
                if offset < 0 or offset > p.high_watermark:
                    raise errors.OffsetOutOfRangeError(
                        f"offset {offset} is beyond the high watermark {p.high_watermark}")
                if offset > p.log_start_offset:
                    p.log.delete_records_before(offset)
                res.low_watermark = p.log_start_offset
            except errors.KafkaError as exc:
                res.error_code = code_for_exception(exc)
            parts.append(res)
        topics.append(drr.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


HANDLERS = [
    Handler(ListOffsetsRequest, 1, 11, handle_list_offsets),
    Handler(OffsetForLeaderEpochRequest, 2, 4, handle_offset_for_leader_epoch),
    Handler(DeleteRecordsRequest, 0, 2, handle_delete_records),
]
