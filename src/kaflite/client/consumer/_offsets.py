"""ListOffsets against partition leaders: earliest, latest and offsets for times.

One request per leader, sent in parallel. Partition errors go through the
recovery table: a leader change or a missing leader refreshes metadata and
retries the partition, until ``timeout`` runs out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kaflite.client.consumer._types import OffsetAndTimestamp, TopicPartition
from kaflite.client.recovery import Action, action_for, backoff_delay, error_name
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from kaflite.protocol.messages import list_offsets_request as lq

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient

__all__ = ["EARLIEST", "LATEST", "list_offsets"]

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


async def list_offsets(client: BaseClient, query: Mapping[TopicPartition, int],
                       isolation_level: int = 0, timeout: float = 60.0
                       ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """Offsets for ``{tp: timestamp}`` (or LATEST / EARLIEST); ``None`` if no such record."""
    md = client.metadata
    md.add_topics({tp.topic for tp in query})
    deadline = time.monotonic() + timeout
    todo = dict(query)
    result: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    cfg = client.config
    attempts = 0
    last_error: BaseException | None = None
    while todo:
        if any(tp.topic not in md.topics for tp in todo):
            for topic in {tp.topic for tp in todo}:
                await md.ensure_topic(topic, max(deadline - time.monotonic(), 0.1))
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in todo.items():
            leader = md.leader(tp.topic, tp.partition)
            if leader is None:
                continue
            by_node.setdefault(leader.leader, {})[tp] = ts
        outcomes = await asyncio.gather(
            *(_ask(client, node, q, isolation_level) for node, q in by_node.items()),
            return_exceptions=True)
        retry = False
        for (_node, q), outcome in zip(by_node.items(), outcomes, strict=True):
            if isinstance(outcome, BaseException):
                last_error = outcome
                retry = True
                md.request_update("ListOffsets failed")
                continue
            for tp, (code, value) in outcome.items():
                if code == 0:
                    result[tp] = value
                    todo.pop(tp, None)
                    continue
                action = action_for(code)
                last_error = errors.error_for_code(code, f"ListOffsets {tp}")
                if action in (Action.RAISE, Action.FATAL):
                    raise last_error
                md.request_update(f"{error_name(code)} on {tp}")
                retry = True
            del q
        if not todo:
            break
        if time.monotonic() > deadline:
            raise last_error or errors.LeaderNotAvailableError(
                f"no leader for {', '.join(map(str, todo))}")
        if retry or len(by_node) == 0:
            attempts += 1
            await asyncio.sleep(backoff_delay(cfg.int("retry.backoff.ms"),
                                              cfg.int("retry.backoff.max.ms"), attempts))
            await md.refresh("ListOffsets retry")
    return result


async def _ask(client: BaseClient, node: int, query: dict[TopicPartition, int],
               isolation_level: int
               ) -> dict[TopicPartition, tuple[int, OffsetAndTimestamp | None]]:
    topics: dict[str, list[lq.ListOffsetsPartition]] = {}
    md = client.metadata
    for tp, ts in query.items():
        leader = md.leader(tp.topic, tp.partition)
        topics.setdefault(tp.topic, []).append(lq.ListOffsetsPartition(
            partition_index=tp.partition,
            current_leader_epoch=leader.leader_epoch if leader else -1, timestamp=ts))
    req = ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level,
                             topics=[lq.ListOffsetsTopic(name=t, partitions=ps)
                                     for t, ps in topics.items()],
                             timeout_ms=client.config.int("request.timeout.ms"))
    try:
        resp: ListOffsetsResponse = await client._request(node, req)
    except (ConnectionClosed, TimeoutError, OSError):
        raise
    out: dict[TopicPartition, tuple[int, OffsetAndTimestamp | None]] = {}
    for t in resp.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                out[tp] = (p.error_code, None)
                continue
            offset = p.offset
            out[tp] = (0, None if offset < 0 else
                       OffsetAndTimestamp(offset, p.timestamp, p.leader_epoch))
    return out
