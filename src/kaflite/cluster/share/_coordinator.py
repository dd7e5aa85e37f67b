"""The share coordinator (Kafka's ``ShareCoordinatorService``) and the persister that
share-partition leaders reach it through.

The leader of partition ``abs(javaStringHashCode("group:topicId:partition")) % n``
of ``__share_group_state`` coordinates that share-partition's durable state
(FindCoordinator with KeyType SHARE finds it; the topic is created on first use,
with ``share.coordinator.state.topic.*``). Like the group and transaction
coordinators, it keeps one shard per partition it leads (``ShareStateShard``),
loaded by replaying the partition and writing every change to it before
answering.

A share-partition leader reads and writes that state with the inter-broker APIs
ReadShareGroupState, WriteShareGroupState, InitializeShareGroupState and
DeleteShareGroupState; ``CoordinatorPersister`` sends them, or calls the shard
directly when this broker is the coordinator. NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and a lost connection
mean "look the coordinator up again", retried with a backoff until
``share.coordinator.write.timeout.ms``.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kaflite.broker_clients import persister_client_id
from kaflite.cluster._internal_log import PartitionWriter
from kaflite.cluster._peers import PeerConnections
from kaflite.cluster._sharded import ShardedCoordinator
from kaflite.cluster.internal_topics import (
    SHARE_KEY,
    SHARE_STATE,
    SHARE_STATE_TOPIC,
    find_coordinator,
)
from kaflite.cluster.share._config import ShareConfig
from kaflite.cluster.share._partition import RecordState, StateBatch
from kaflite.cluster.share._persister import PersistedState
from kaflite.cluster.share._state import ShareStateShard, StateKey, state_key
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import KafkaError, ProtocolError, errors
from kaflite.protocol.messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    WriteShareGroupStateRequest,
)
from kaflite.protocol.messages import delete_share_group_state_request as dsq
from kaflite.protocol.messages import initialize_share_group_state_request as isq
from kaflite.protocol.messages import read_share_group_state_request as rsq
from kaflite.protocol.messages import read_share_group_state_summary_request as rssq
from kaflite.protocol.messages import write_share_group_state_request as wsq

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition

__all__ = ["CoordinatorPersister", "ShareCoordinator"]

log = logging.getLogger("kaflite.cluster.share")

Attempt = Callable[[int], Awaitable[tuple[int, PersistedState | None]]]
_RETRY = {errors.NotCoordinatorError.code, errors.CoordinatorLoadInProgressError.code,
          errors.CoordinatorNotAvailableError.code, errors.RequestTimedOutError.code,
          errors.NotEnoughReplicasError.code}


class ShareCoordinator(ShardedCoordinator[ShareStateShard]):
    TOPIC = SHARE_STATE_TOPIC

    def __init__(self, broker: Broker) -> None:
        self.config = ShareConfig.from_props(broker.config.props)
        super().__init__(broker, SHARE_STATE.partitions(broker.config.props),
                         self.config.load_buffer_size, log)

    def _new_shard(self, p: Partition) -> ShareStateShard:
        writer = PartitionWriter(self.broker, SHARE_STATE_TOPIC, p.index, p.leader_epoch,
                                 self.config.write_timeout_ms)
        return ShareStateShard(p.index, p.leader_epoch, writer, self.config.updates_per_snapshot)

    def shard_of(self, key: StateKey) -> ShareStateShard:
        return self.shard_for(state_key(*key))

    def bump_state_epoch(self, group_id: str, topic_id: uuid.UUID, partition: int) -> bool:
        """Fault injection (FENCED_STATE_EPOCH): see ``ShareStateShard.bump_state_epoch``."""
        key = (group_id, topic_id, partition)
        written = self.shard_of(key).bump_state_epoch(key)
        if written is not None:
            written.add_done_callback(_warn_failed)
        return written is not None

    def states(self) -> dict[StateKey, PersistedState]:
        """Every share-partition state this broker coordinates (tools)."""
        out: dict[StateKey, PersistedState] = {}
        for shard in self.active_shards():
            out.update(shard.states)
        return out


class CoordinatorPersister:
    """The ``Persister`` of a broker's share-partitions: ``__share_group_state`` by way of
    its coordinator."""

    def __init__(self, broker: Broker, coordinator: ShareCoordinator,
                 timeout_ms: int = 5000) -> None:
        self.broker = broker
        self.coordinator = coordinator
        self.timeout_s = timeout_ms / 1000
        self.peers = PeerConnections(broker, persister_client_id(broker.node_id), timeout_ms)

    def close(self) -> None:
        self.peers.close()

    async def _node(self, key: StateKey) -> int:
        info = find_coordinator(self.broker.controller, self.broker.config.props,
                                state_key(*key), SHARE_KEY)
        return info.node_id

    async def _retrying(self, key: StateKey, op: str,
                        attempt: Attempt) -> tuple[int, PersistedState | None]:
        deadline = time.monotonic() + self.timeout_s
        backoff = 0.02
        code = errors.CoordinatorNotAvailableError.code
        while True:
            try:
                node = await self._node(key)
                got: tuple[int, PersistedState | None] = await attempt(node)
                code = got[0]
                if code not in _RETRY:
                    return got
            except (KafkaError, ConnectionClosed, OSError, TimeoutError, ProtocolError) as exc:
                code = exc.code if isinstance(exc, KafkaError) and exc.code in _RETRY \
                    else errors.CoordinatorNotAvailableError.code
                if isinstance(exc, KafkaError) and exc.code not in _RETRY and exc.code > 0:
                    return exc.code, None
            if time.monotonic() + backoff > deadline or not self.broker.running:
                log.warning("%s of %s failed: error %s", op, key, code)
                return code, None
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)

    # -- the Persister interface ----------------------------------------------------------------
    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> PersistedState | None:
        key = (group_id, topic_id, partition)

        async def attempt(node: int) -> tuple[int, PersistedState | None]:
            if node == self.broker.node_id:
                shard = self.coordinator.shard_of(key)
                state, written = shard.read(key, leader_epoch)
                code = 0 if written is None else await written
                return code, state
            req = ReadShareGroupStateRequest(group_id=group_id, topics=[rsq.ReadStateData(
                topic_id=topic_id, partitions=[rsq.PartitionData(partition, leader_epoch)])])
            resp = await (await self.peers.connection(node)).request(req)
            r = resp.results[0].partitions[0]
            if r.error_code:
                return r.error_code, None
            if r.state_epoch < 0 and r.start_offset < 0:
                return 0, None
            return 0, PersistedState(r.state_epoch, r.start_offset, [
                StateBatch(b.first_offset, b.last_offset, _state(b.delivery_state),
                           b.delivery_count) for b in r.state_batches], leader_epoch)

        code, state = await self._retrying(key, "ReadShareGroupState", attempt)
        if code:
            raise errors.error_for_code(code, f"reading the share state of {key}")
        return state

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int:
        key = (group_id, topic_id, partition)

        async def attempt(node: int) -> tuple[int, PersistedState | None]:
            if node == self.broker.node_id:
                return await self.coordinator.shard_of(key).initialize(
                    key, state_epoch, start_offset), None
            req = InitializeShareGroupStateRequest(group_id=group_id, topics=[
                isq.InitializeStateData(topic_id=topic_id, partitions=[
                    isq.PartitionData(partition, state_epoch, start_offset)])])
            resp = await (await self.peers.connection(node)).request(req)
            return resp.results[0].partitions[0].error_code, None

        return (await self._retrying(key, "InitializeShareGroupState", attempt))[0]

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                    leader_epoch: int, state: PersistedState) -> int:
        key = (group_id, topic_id, partition)
        full = PersistedState(state_epoch, state.start_offset, state.batches, leader_epoch)

        async def attempt(node: int) -> tuple[int, PersistedState | None]:
            if node == self.broker.node_id:
                return await self.coordinator.shard_of(key).write(key, full), None
            req = WriteShareGroupStateRequest(group_id=group_id, topics=[wsq.WriteStateData(
                topic_id=topic_id, partitions=[wsq.PartitionData(
                    partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                    start_offset=state.start_offset, state_batches=[
                        wsq.StateBatch(b.first, b.last, int(b.state), b.delivery_count)
                        for b in state.batches])])])
            resp = await (await self.peers.connection(node)).request(req)
            return resp.results[0].partitions[0].error_code, None

        return (await self._retrying(key, "WriteShareGroupState", attempt))[0]

    async def summary(self, group_id: str, topic_id: uuid.UUID,
                      partition: int) -> PersistedState | None:
        """ReadShareGroupStateSummary: the state as it is (the leader epoch is not moved)."""
        key = (group_id, topic_id, partition)

        async def attempt(node: int) -> tuple[int, PersistedState | None]:
            if node == self.broker.node_id:
                return 0, self.coordinator.shard_of(key).states.get(key)
            req = ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[
                rssq.ReadStateSummaryData(topic_id=topic_id, partitions=[
                    rssq.PartitionData(partition, -1)])])
            resp = await (await self.peers.connection(node)).request(req)
            r = resp.results[0].partitions[0]
            if r.error_code or (r.state_epoch < 0 and r.start_offset < 0):
                return r.error_code, None
            return 0, PersistedState(r.state_epoch, r.start_offset)

        code, state = await self._retrying(key, "ReadShareGroupStateSummary", attempt)
        if code:
            raise errors.error_for_code(code, f"reading the share state of {key}")
        return state

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        key = (group_id, topic_id, partition)

        async def attempt(node: int) -> tuple[int, PersistedState | None]:
            if node == self.broker.node_id:
                return await self.coordinator.shard_of(key).delete(key), None
            req = DeleteShareGroupStateRequest(group_id=group_id, topics=[
                dsq.DeleteStateData(topic_id=topic_id, partitions=[dsq.PartitionData(partition)])])
            resp = await (await self.peers.connection(node)).request(req)
            return resp.results[0].partitions[0].error_code, None

        return (await self._retrying(key, "DeleteShareGroupState", attempt))[0]


def _warn_failed(f: asyncio.Future[int]) -> None:
    if f.result():
        log.warning("bumping a share state epoch failed: error %s", f.result())


def _state(value: int) -> RecordState:
    try:
        return RecordState(value)
    except ValueError:
        return RecordState.AVAILABLE
