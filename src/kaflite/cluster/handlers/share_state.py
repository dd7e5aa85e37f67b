"""The share coordinator's inter-broker APIs: InitializeShareGroupState (83),
ReadShareGroupState (84), WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87, what the offset admin APIs read).

Share-partition leaders send them (``share._coordinator.CoordinatorPersister``) to
the leader of the ``__share_group_state`` partition that owns the key; this
broker answers from its shard, once what it wrote is replicated. A broker that
is not the coordinator answers NOT_COORDINATOR, and the sender looks again.
Reading a share-partition that has no state answers StateEpoch and StartOffset -1.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.share._partition import RecordState, StateBatch
from kaflite.cluster.share._persister import PersistedState
from kaflite.cluster.share._state import ShareStateShard, StateKey
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from kaflite.protocol.messages import delete_share_group_state_request as dsq
from kaflite.protocol.messages import delete_share_group_state_response as dsr
from kaflite.protocol.messages import initialize_share_group_state_request as isq
from kaflite.protocol.messages import initialize_share_group_state_response as isr
from kaflite.protocol.messages import read_share_group_state_request as rsq
from kaflite.protocol.messages import read_share_group_state_response as rsr
from kaflite.protocol.messages import read_share_group_state_summary_request as rssq
from kaflite.protocol.messages import read_share_group_state_summary_response as rssr
from kaflite.protocol.messages import write_share_group_state_request as wsq
from kaflite.protocol.messages import write_share_group_state_response as wsr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]


def _shard(broker: Broker, key: StateKey) -> ShareStateShard:
    if broker.share_coordinator is None:
        raise errors.NotCoordinatorError("no share coordinator here")
    return broker.share_coordinator.shard_of(key)


async def _code(make: Callable[[], asyncio.Future[int]]) -> int:
    try:
        return await make()
    except errors.KafkaError as exc:
        return exc.code


class _Partition(Protocol):
    partition: int


P = TypeVar("P", bound=_Partition)
R = TypeVar("R")
T = TypeVar("T")


class _Topic(Protocol[P]):
    topic_id: uuid.UUID
    partitions: list[P]


async def _each(group_id: str, topics: Sequence[_Topic[P]],
                one: Callable[[StateKey, P], Awaitable[R]],
                topic: Callable[[uuid.UUID, list[R]], T]) -> list[T]:
    """Answer every (topic, partition) of a request in order, one key at a time."""
    return [topic(t.topic_id, [await one((group_id, t.topic_id, p.partition), p)
                               for p in t.partitions]) for t in topics]


async def handle_read(broker: Broker, conn: ServerConnection, header: RequestHeader,
                      req: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    async def one(key: StateKey, p: rsq.PartitionData) -> rsr.PartitionResult:
        out = rsr.PartitionResult(partition=p.partition, state_epoch=-1, start_offset=-1)
        try:
            state, written = _shard(broker, key).read(key, p.leader_epoch)
            out.error_code = 0 if written is None else await written
            if state is not None and not out.error_code:
                out.state_epoch, out.start_offset = state.state_epoch, state.start_offset
                out.state_batches = [rsr.StateBatch(b.first, b.last, int(b.state),
                                                    b.delivery_count) for b in state.batches]
        except errors.KafkaError as exc:
            out.error_code, out.error_message = exc.code, exc.message
        return out

    return ReadShareGroupStateResponse(results=await _each(
        req.group_id, req.topics, one,
        lambda tid, parts: rsr.ReadStateResult(topic_id=tid, partitions=parts)))


async def handle_summary(broker: Broker, conn: ServerConnection, header: RequestHeader,
                         req: ReadShareGroupStateSummaryRequest
                         ) -> ReadShareGroupStateSummaryResponse:
    async def one(key: StateKey, p: rssq.PartitionData) -> rssr.PartitionResult:
        out = rssr.PartitionResult(partition=p.partition, state_epoch=-1, start_offset=-1)
        try:
            state = _shard(broker, key).states.get(key)
            if state is not None:
                out.state_epoch, out.start_offset = state.state_epoch, state.start_offset
        except errors.KafkaError as exc:
            out.error_code, out.error_message = exc.code, exc.message
        return out

    return ReadShareGroupStateSummaryResponse(results=await _each(
        req.group_id, req.topics, one,
        lambda tid, parts: rssr.ReadStateSummaryResult(topic_id=tid, partitions=parts)))


async def handle_write(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    async def one(key: StateKey, p: wsq.PartitionData) -> wsr.PartitionResult:
        state = PersistedState(p.state_epoch, p.start_offset, [
            StateBatch(b.first_offset, b.last_offset, _state(b.delivery_state),
                       b.delivery_count) for b in p.state_batches], p.leader_epoch)
        if _sane(state):
            code = await _code(lambda: _shard(broker, key).write(key, state))
        else:
            code = errors.InvalidRequestError.code
        return wsr.PartitionResult(partition=p.partition, error_code=code)

    return WriteShareGroupStateResponse(results=await _each(
        req.group_id, req.topics, one,
        lambda tid, parts: wsr.WriteStateResult(topic_id=tid, partitions=parts)))


async def handle_initialize(broker: Broker, conn: ServerConnection, header: RequestHeader,
                            req: InitializeShareGroupStateRequest
                            ) -> InitializeShareGroupStateResponse:
    async def one(key: StateKey, p: isq.PartitionData) -> isr.PartitionResult:
        code = await _code(lambda: _shard(broker, key).initialize(key, p.state_epoch,
                                                                  p.start_offset))
        return isr.PartitionResult(partition=p.partition, error_code=code)

    return InitializeShareGroupStateResponse(results=await _each(
        req.group_id, req.topics, one,
        lambda tid, parts: isr.InitializeStateResult(topic_id=tid, partitions=parts)))


async def handle_delete(broker: Broker, conn: ServerConnection, header: RequestHeader,
                        req: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    async def one(key: StateKey, p: dsq.PartitionData) -> dsr.PartitionResult:
        code = await _code(lambda: _shard(broker, key).delete(key))
        return dsr.PartitionResult(partition=p.partition, error_code=code)

    return DeleteShareGroupStateResponse(results=await _each(
        req.group_id, req.topics, one,
        lambda tid, parts: dsr.DeleteStateResult(topic_id=tid, partitions=parts)))


MAX_IN_FLIGHT = 1_000_000   # offsets a state may cover past its start (far above any limit)


def _sane(state: PersistedState) -> bool:
    """A state a share-partition can load: batches in order, within reach of the start."""
    last = state.start_offset - 1
    for b in state.batches:
        if b.first > b.last or b.first <= last or b.first < state.start_offset \
                or b.last - state.start_offset >= MAX_IN_FLIGHT:
            return False
        last = b.last
    return state.start_offset >= 0


def _state(value: int) -> RecordState:
    try:
        return RecordState(value)
    except ValueError:
        return RecordState.AVAILABLE


HANDLERS = [
    Handler(InitializeShareGroupStateRequest, 0, 0, handle_initialize),
    Handler(ReadShareGroupStateRequest, 0, 0, handle_read),
    Handler(WriteShareGroupStateRequest, 0, 0, handle_write),
    Handler(DeleteShareGroupStateRequest, 0, 0, handle_delete),
    Handler(ReadShareGroupStateSummaryRequest, 0, 0, handle_summary),
]
