"""Fetch (key 1): consumers and follower replicas read from partition leaders.

Consumers read up to the high watermark (read_uncommitted) or the last stable
offset (read_committed); followers, identified by their replica id, read up to
the log end and report their position by the offset they ask for, which is how
the leader learns their progress, advances the high watermark and grows the
ISR.

The records go out exactly as they lie in the log: the bytes read from the
segment file are handed to the response encoder, which keeps them as a
separate chunk and never copies them into the frame.

Long polling: when less than ``min_bytes`` is available the request waits, up
to ``max_wait_ms``, on every partition it asked for, and is answered as soon as
one of them gets new data.

A follower that sends ``last_fetched_epoch`` (v12+) and whose log has diverged
from the leader's gets ``diverging_epoch`` instead of records, and truncates.

Fetch sessions (KIP-227): this broker does not create sessions; it answers
``session_id`` 0, which tells clients to keep sending full fetch requests.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.handlers._util import error_code_of, leader_hint
from kaflite.cluster.partition import Partition
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import FetchRequest, FetchResponse
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import fetch_response as fr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

READ_COMMITTED = 1
FETCH_SESSION_ID_NOT_FOUND = 70


def _read_partition(broker: Broker, conn: ServerConnection, topic: str, fp: fq.FetchPartition,
                    replica_id: int, isolation: int, budget: int, first: bool
                    ) -> tuple[fr.PartitionData, Partition | None]:
    index = fp.partition
    out = fr.PartitionData(partition_index=index, error_code=0, high_watermark=-1,
                           last_stable_offset=-1, log_start_offset=-1,
                           aborted_transactions=[] if isolation == READ_COMMITTED else None)
    p: Partition | None = None
    try:
        if broker.faults is not None and replica_id < 0:
            broker.faults.check_partition(broker, conn, 1, topic, index)
        p = broker.leader_partition(topic, index, fp.current_leader_epoch)
        offset = fp.fetch_offset
        if replica_id >= 0:
            if p.update_follower(replica_id, offset):
                broker.alter_isr(p, [*p.isr, replica_id])
            max_offset = p.log_end_offset
        else:
            conn.info.partitions.add((topic, index))
            max_offset = p.high_watermark  # the LSO equals the HW until transactions exist
        out.high_watermark = p.high_watermark
        out.last_stable_offset = p.high_watermark
        out.log_start_offset = p.log_start_offset
        last_epoch = fp.last_fetched_epoch
        if last_epoch >= 0:
            epoch, end = p.log.end_offset_for_epoch(last_epoch)
            if epoch < last_epoch or end < offset:
                out.diverging_epoch = fr.EpochEndOffset(epoch, end)
                return out, p
        if offset < p.log_start_offset or offset > p.log_end_offset:
            raise errors.OffsetOutOfRangeError(
                f"{topic}-{index}: offset {offset} outside "
                f"[{p.log_start_offset}, {p.log_end_offset}]")
        if offset < max_offset and budget > 0:
            limit = min(fp.partition_max_bytes, budget)
            result = p.log.read(offset, limit, max_offset=max_offset,
                                min_one_batch=first)
            out.records = result.records
        else:
            out.records = b""
    except errors.KafkaError as exc:
        out.error_code = error_code_of(exc)
        out.records = None
        if exc.code in (errors.NotLeaderOrFollowerError.code, errors.FencedLeaderEpochError.code):
            hint = leader_hint(broker, topic, index)
            if hint is not None and hint[0] >= 0:
                out.current_leader = fr.LeaderIdAndEpoch(*hint)
    return out, p


def _collect(broker: Broker, conn: ServerConnection, req: FetchRequest, names: list[str],
             replica_id: int) -> tuple[list[fr.FetchableTopicResponse], int, list[Partition], bool]:
    budget = req.max_bytes
    total = 0
    got_error = False
    first = True
    waiting: list[Partition] = []
    topics = []
    for t, name in zip(req.topics, names, strict=True):
        parts = []
        for fp in t.partitions:
            if not name:
                parts.append(fr.PartitionData(partition_index=fp.partition,
                                              error_code=errors.UnknownTopicIdError.code))
                got_error = True
                continue
            data, p = _read_partition(broker, conn, name, fp, replica_id, req.isolation_level,
                                      budget - total, first)
            size = len(data.records) if data.records is not None else 0
            if size:
                first = False
            total += size
            got_error = got_error or data.error_code != 0 or data.diverging_epoch.epoch != -1
            if p is not None:
                waiting.append(p)
            parts.append(data)
        topics.append(fr.FetchableTopicResponse(topic=name if name else t.topic,
                                                topic_id=t.topic_id, partitions=parts))
    return topics, total, waiting, got_error


async def handle_fetch(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: FetchRequest) -> FetchResponse:
    version = header.request_api_version
    replica_id = req.replica_state.replica_id if version >= 15 else req.replica_id
    if replica_id >= 0:
        conn.info.replica_id = replica_id
    if req.session_id != 0:
        return FetchResponse(error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0)
    names: list[str] = []
    for t in req.topics:
        if version >= 13:
            topic = broker.controller.topics_by_id.get(t.topic_id)
            names.append(topic.name if topic is not None else "")
        else:
            names.append(t.topic)
    deadline = time.monotonic() + max(req.max_wait_ms, 0) / 1000
    while True:
        topics, total, waiting, got_error = _collect(broker, conn, req, names, replica_id)
        remaining = deadline - time.monotonic()
        if total >= req.min_bytes or got_error or remaining <= 0 or not waiting \
                or not broker.running:
            break
        futures = [p.data_waiter() for p in waiting]
        try:
            await asyncio.wait(futures, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for p, f in zip(waiting, futures, strict=True):
                p.discard_waiter(f)
    endpoints = []
    hinted = {pd.current_leader.leader_id for t in topics for pd in t.partitions
              if pd.current_leader.leader_id >= 0}
    for node in sorted(hinted):
        b = broker.controller.brokers.get(node)
        if b is not None:
            endpoints.append(fr.NodeEndpoint(b.node_id, b.host, b.port, b.rack))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=topics,
                         node_endpoints=endpoints)


HANDLERS = [Handler(1, 4, 17, handle_fetch)]
