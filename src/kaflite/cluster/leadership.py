"""Leadership and ISRs, as the controller decides them: elections, a broker's start
and stop, AlterPartition, leader moves and reassignments (KIP-455).

A mixin of ``Controller`` (``kaflite.cluster.controller``), which owns the metadata
and its persistence; here is what changes a partition's leader, ISR or replicas and
tells the brokers hosting it (``Listener.on_partition_change``).

A broker's start or stop touches every partition it replicates: a third of a
20,000-partition cluster's leaders move when one of three brokers dies. That work
goes ``EVENT_CHUNK`` partitions at a time, each chunk one metadata batch, as KRaft's
controller writes a broker's leader changes in batches of records; the async
variants let the event loop (which the brokers of a process share) run between
two chunks.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Protocol

from kaflite.cluster.metadata_state import BrokerInfo, PartitionState, TopicState
from kaflite.protocol import errors
from kaflite.protocol.messages._generated.fence_broker_record import FenceBrokerRecord
from kaflite.protocol.messages._generated.unfence_broker_record import UnfenceBrokerRecord
from kaflite.protocol.messages._generated.unregister_broker_record import UnregisterBrokerRecord
from kaflite.protocol.messages._runtime import Struct

__all__ = ["EVENT_CHUNK", "Leadership", "Listener"]

# Partitions a broker's start or stop changes per metadata batch, between two of which
# the async variants let the event loop run (the brokers of a process share it).
EVENT_CHUNK = 256


class Listener(Protocol):
    """What a broker must do when the controller changes a partition."""

    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None: ...

    def on_topic_deleted(self, topic: TopicState) -> None: ...

    def log_preparer(self, name: str, topic_id: uuid.UUID, configs: dict[str, str],
                     partitions: list[int]) -> Callable[[], int] | None:
        """A function that opens the logs of a topic about to be created, for a worker
        thread (None: nothing to prepare here)."""
        ...

    def drop_prepared(self, name: str, topic_id: uuid.UUID) -> None:
        """The topic was not created: remove what its preparer made."""
        ...


class Leadership:
    """What moves leaders and ISRs; ``Controller`` provides the state and its saving."""

    brokers: dict[int, BrokerInfo]
    topics: dict[str, TopicState]
    listeners: dict[int, Listener]

    def save(self) -> None:
        raise NotImplementedError

    def _record(self, *records: Struct) -> None:
        raise NotImplementedError

    def _touch(self, topic: TopicState, p: PartitionState) -> None:
        raise NotImplementedError

    # -- a broker's start and stop ----------------------------------------------------
    def broker_started(self, node_id: int) -> None:
        """A broker (re)joined (``broker_started_async`` yields between chunks)."""
        for _ in self._started_steps(node_id):
            pass

    async def broker_started_async(self, node_id: int) -> None:
        for _ in self._started_steps(node_id):
            await asyncio.sleep(0)

    def broker_stopped(self, node_id: int) -> None:
        """A broker died or shut down (``broker_stopped_async`` yields between chunks)."""
        for _ in self._stopped_steps(node_id):
            pass

    async def broker_stopped_async(self, node_id: int) -> None:
        for _ in self._stopped_steps(node_id):
            await asyncio.sleep(0)

    def unregister_broker(self, node_id: int) -> None:
        """UnregisterBroker (key 64), as Kafka 4.4's controller answered it: an unknown id
        is BROKER_ID_NOT_REGISTERED; a registered broker, fenced or not, is fenced (its
        leaderships move, it leaves the ISRs) and its registration removed, so that
        DescribeCluster and Metadata no longer list it. Replica assignments keep its id
        (offline). A broker still running stays out until it registers again, at its
        next start. (``unregister_broker_async`` yields between chunks.)"""
        if self._registered(node_id).alive:
            self.broker_stopped(node_id)
        self._forget_broker(node_id)

    async def unregister_broker_async(self, node_id: int) -> None:
        if self._registered(node_id).alive:
            await self.broker_stopped_async(node_id)
        self._forget_broker(node_id)

    def _registered(self, node_id: int) -> BrokerInfo:
        info = self.brokers.get(node_id)
        if info is None:
            raise errors.BrokerIdNotRegisteredError(
                f"Broker ID {node_id} is not currently registered")
        return info

    def _forget_broker(self, node_id: int) -> None:
        info = self.brokers.pop(node_id, None)
        if info is not None:
            self._record(UnregisterBrokerRecord(node_id, info.epoch))
            self.save()

    def _alive(self, node_id: int) -> bool:
        """Registered and not fenced."""
        info = self.brokers.get(node_id)
        return info is not None and info.alive

    def _replicated_by(self, node_id: int) -> Iterator[tuple[TopicState, PartitionState]]:
        """The partitions ``node_id`` replicates, ``EVENT_CHUNK`` at a time: between two
        chunks (the steps below yield) the caller may let the loop run, so topics
        deleted meanwhile are skipped."""
        for topic in list(self.topics.values()):
            if self.topics.get(topic.name) is not topic:
                continue
            for p in list(topic.partitions):
                if node_id in p.replicas:
                    yield topic, p

    def _in_chunks(self, node_id: int, step: Callable[[TopicState, PartitionState], None]
                   ) -> Iterator[None]:
        """Apply ``step`` to ``node_id``'s partitions, one metadata batch a chunk, as
        KRaft's controller writes a broker's leader changes in batches of records."""
        pairs = self._replicated_by(node_id)
        while True:
            chunk = list(itertools.islice(pairs, EVENT_CHUNK))
            for topic, p in chunk:
                if self.topics.get(topic.name) is topic:
                    step(topic, p)
            self.save()     # the chunk's records as one batch (or the enclosing one's)
            if len(chunk) < EVENT_CHUNK:
                return
            yield

    def _started_steps(self, node_id: int) -> Iterator[None]:
        """It becomes a follower of everything it replicates. It is not put back into
        any ISR here; its leaders add it once it has caught up, as Kafka's AlterPartition
        ISR expansion does. Leaderless partitions whose ISR has it get it as leader."""
        self.brokers[node_id].alive = True
        # saved with the first chunk: the fence and the first leader changes are one batch
        self._record(UnfenceBrokerRecord(node_id, self.brokers[node_id].epoch))

        def step(topic: TopicState, p: PartitionState) -> None:
            if p.leader == -1 and node_id in p.isr:
                self._set_leader(topic, p, node_id)
            else:
                self._notify(topic, p, only=node_id)
        yield from self._in_chunks(node_id, step)

    def _stopped_steps(self, node_id: int) -> Iterator[None]:
        """Its leaderships move and it leaves every ISR (nothing for a broker that is
        not registered: UnregisterBroker fenced it already)."""
        if node_id not in self.brokers:
            return
        self.brokers[node_id].alive = False
        # saved with the first chunk: the fence and the first leader changes are one batch
        self._record(FenceBrokerRecord(node_id, self.brokers[node_id].epoch))

        def step(topic: TopicState, p: PartitionState) -> None:
            if p.leader == node_id:
                self._elect(topic, p, exclude={node_id})
            elif node_id in p.isr and len(p.isr) > 1:
                self._touch(topic, p)
                p.isr = [r for r in p.isr if r != node_id]
                p.partition_epoch += 1
                self._notify(topic, p)
        yield from self._in_chunks(node_id, step)

    # -- leadership and ISR -------------------------------------------------------
    def _set_leader(self, topic: TopicState, p: PartitionState, leader: int) -> None:
        self._touch(topic, p)
        p.leader = leader
        p.leader_epoch += 1
        p.partition_epoch += 1
        self._notify(topic, p)

    def _elect(self, topic: TopicState, p: PartitionState, exclude: AbstractSet[int] = frozenset(),
               prefer: int | None = None) -> None:
        live_isr = [r for r in p.replicas if r in p.isr and r not in exclude
                    and self.brokers.get(r) is not None and self.brokers[r].alive]
        if prefer is not None and prefer in live_isr:
            new = prefer
        else:
            new = live_isr[0] if live_isr else -1
        self._touch(topic, p)
        if new == -1:
            # Kafka keeps the last leader in the ISR when no election is possible,
            # so it can come back as leader without losing acknowledged data.
            p.leader = -1
            p.leader_epoch += 1
            p.partition_epoch += 1
            self._notify(topic, p)
            return
        p.isr = [r for r in p.isr if r not in exclude] or [new]
        self._set_leader(topic, p, new)

    def move_leader(self, topic_name: str, partition: int, to: int | None = None) -> int:
        """Move leadership to ``to`` (an ISR member) or to another ISR member."""
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        if to is not None:
            if to not in p.isr or not self._alive(to):
                raise errors.NotLeaderOrFollowerError(f"broker {to} is not a live ISR member")
            self._elect(topic, p, prefer=to)
        else:
            others = {p.leader} if len([r for r in p.isr if self._alive(r)]) > 1 else set()
            self._elect(topic, p, exclude=set(), prefer=next(
                (r for r in p.replicas if r in p.isr and r not in others
                 and self._alive(r)), None))
        self.save()
        return p.leader

    def preferred_election(self, topic_name: str, partition: int) -> bool:
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        preferred = p.replicas[0]
        if p.leader == preferred:
            return False
        if preferred not in p.isr or not self._alive(preferred):
            raise errors.PreferredLeaderNotAvailableError(f"{topic_name}-{partition}")
        self._elect(topic, p, prefer=preferred)
        self.save()
        return True

    def alter_isr(self, topic_name: str, partition: int, leader: int, leader_epoch: int,
                  isr: list[int]) -> PartitionState:
        """A leader's request to change the ISR (Kafka's AlterPartition)."""
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        if p.leader != leader or p.leader_epoch != leader_epoch:
            raise errors.FencedLeaderEpochError(f"{topic_name}-{partition}")
        # As Kafka's controller (KIP-841): a broker that is down or shutting down does
        # not join an ISR, even if its last Fetch, still in flight, said it caught up.
        for r in isr:
            broker = self.brokers.get(r)
            if r not in p.isr and (broker is None or not broker.alive):
                raise errors.IneligibleReplicaError(
                    f"{topic_name}-{partition}: broker {r} is not alive")
        if sorted(isr) != sorted(p.isr):
            self._touch(topic, p)
            p.isr = [r for r in p.replicas if r in isr]
            p.partition_epoch += 1
            # Reassignment completes once every target replica is in the ISR.
            if p.adding and all(r in p.isr for r in p.adding):
                self._finish_reassignment(topic, p)
            self.save()
            self._notify(topic, p, skip=leader)
        return p

    def reassign(self, topic_name: str, partition: int, target: list[int] | None) -> None:
        """Start (or cancel, with ``None``) a partition reassignment (KIP-455)."""
        topic = self.topics[topic_name]
        p = topic.partitions[partition]
        self._touch(topic, p)
        if target is None:
            if not p.adding and not p.removing:
                raise errors.NoReassignmentInProgressError(f"{topic_name}-{partition}")
            p.replicas = [r for r in p.replicas if r not in p.adding]
            p.isr = [r for r in p.isr if r in p.replicas] or p.isr
            p.adding, p.removing = [], []
        else:
            for r in target:
                if r not in self.brokers:
                    raise errors.InvalidReplicaAssignmentError(f"unknown broker {r}")
            p.adding = [r for r in target if r not in p.replicas]
            p.removing = [r for r in p.replicas if r not in target]
            p.replicas = list(target) + [r for r in p.replicas if r not in target]
            if not p.adding:
                self._finish_reassignment(topic, p)
        p.partition_epoch += 1
        self.save()
        self._notify(topic, p)

    def _finish_reassignment(self, topic: TopicState, p: PartitionState) -> None:
        self._touch(topic, p)
        removed = list(p.removing)
        keep = [r for r in p.replicas if r not in p.removing]
        p.replicas, p.adding, p.removing = keep, [], []
        p.isr = [r for r in p.isr if r in keep]
        if p.leader not in keep:
            self._elect(topic, p, exclude={p.leader})
        # Brokers no longer hosting the partition learn it too, and drop their replica.
        for node in removed:
            self._notify(topic, p, only=node)

    def _notify(self, topic: TopicState, p: PartitionState, only: int | None = None,
                skip: int | None = None) -> None:
        """Tell the brokers hosting ``p`` (or just ``only``) its new state."""
        targets: Iterable[int] = [only] if only is not None else list(p.replicas)
        for node in targets:
            listener = self.listeners.get(node)
            if listener is not None and node != skip and self._alive(node):
                listener.on_partition_change(topic, p)
