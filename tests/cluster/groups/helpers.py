"""A coordinator shard on a fake clock and a fake log, for state-machine tests."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Coroutine
from typing import Any

from kaflite.cluster.groups import CoordinatorShard, GroupConfig, RequestContext
from kaflite.cluster.groups._classic import Record
from kaflite.cluster.groups._timer import ManualTimer
from kaflite.protocol.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from kaflite.protocol.messages import join_group_request as jgq
from kaflite.protocol.messages import offset_commit_request as ocq
from kaflite.protocol.messages import sync_group_request as sgq

TOPIC = "orders"


def run(coro_fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test body in a fresh event loop."""
    def wrapper() -> None:
        asyncio.run(coro_fn())
    wrapper.__name__ = coro_fn.__name__
    return wrapper


async def settle() -> None:
    """Let completed writes run their callbacks."""
    for _ in range(5):
        await asyncio.sleep(0)


class FakeLog:
    """Records every write; completes them at once with ``error`` unless ``hold``."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.error = 0
        self.hold = False
        self.held: list[asyncio.Future[int]] = []

    def __call__(self, records: list[Record]) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.records.extend(records)
        if self.hold:
            self.held.append(fut)
        else:
            fut.set_result(self.error)
        return fut

    def release(self, error: int = 0) -> None:
        held, self.held = self.held, []
        for fut in held:
            fut.set_result(error)


def make_shard(**config: Any) -> tuple[CoordinatorShard, ManualTimer, FakeLog]:
    defaults: dict[str, Any] = {"initial_rebalance_delay_ms": 0}
    defaults.update(config)
    timer = ManualTimer()
    log = FakeLog()
    shard = CoordinatorShard(0, 0, log, timer, GroupConfig(**defaults), lambda t: t == TOPIC)
    shard.finish_loading()
    return shard, timer, log


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


def join_req(group: str = "g", member_id: str = "", *, protocols: list[tuple[str, bytes]] | None = None,
             instance_id: str | None = None, session_ms: int = 10_000, rebalance_ms: int = 30_000,
             protocol_type: str = "consumer") -> JoinGroupRequest:
    if protocols is None:
        protocols = [("range", subscription(TOPIC))]
    return JoinGroupRequest(group_id=group, session_timeout_ms=session_ms,
                            rebalance_timeout_ms=rebalance_ms, member_id=member_id,
                            group_instance_id=instance_id, protocol_type=protocol_type,
                            protocols=[jgq.JoinGroupRequestProtocol(n, m) for n, m in protocols])


def sync_req(group: str, member_id: str, generation: int,
             assignments: dict[str, bytes] | None = None,
             instance_id: str | None = None) -> SyncGroupRequest:
    return SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id,
                            group_instance_id=instance_id,
                            assignments=[sgq.SyncGroupRequestAssignment(m, a)
                                         for m, a in (assignments or {}).items()])


CTX = RequestContext("client-a", "/127.0.0.1", 9)


async def join_dynamic(shard: CoordinatorShard, group: str = "g",
                       **kw: Any) -> asyncio.Future[JoinGroupResponse]:
    """KIP-394's two-step join; returns the parked second JoinGroup."""
    first = await shard.classic.join(CTX, join_req(group, **kw))
    assert first.error_code == 79, first  # MEMBER_ID_REQUIRED
    return shard.classic.join(CTX, join_req(group, first.member_id, **kw))


def commit_req(group: str = "g", offsets: dict[int, int] | None = None, *, member: str = "",
               generation: int = -1, topic: str = TOPIC, metadata: str | None = "m",
               retention_ms: int = -1) -> OffsetCommitRequest:
    parts = [ocq.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                              committed_leader_epoch=3, committed_metadata=metadata)
             for p, o in (offsets or {0: 10}).items()]
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation,
                               member_id=member, retention_time_ms=retention_ms,
                               topics=[ocq.OffsetCommitRequestTopic(name=topic, partitions=parts)])
