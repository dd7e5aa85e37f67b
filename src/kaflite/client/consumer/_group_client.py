"""What both group protocols share: the coordinator, and committed offsets.

A consumer with a ``group.id`` is a member of its group through one of two
membership managers: the classic one (``_coordinator``: JoinGroup, SyncGroup,
Heartbeat) or KIP-848's (``_membership``: ConsumerGroupHeartbeat). Both find
the group's coordinator the same way and commit and fetch offsets through it
the same way; only what identifies the member in those requests (a generation
or a member epoch) and what some errors mean differ. This module is that
common part, ``GroupClient``; each manager fills in its ``_coordinator_error``
(the recovery table applied to its own state) and the member's identity.

The coordinator is the broker FindCoordinator names; the member talks to it on
the pool's separate *coordinator* channel. COORDINATOR_LOAD_IN_PROGRESS backs
off and retries the same coordinator; NOT_COORDINATOR looks it up again.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kaflite.client._find_coordinator import GROUP, find_coordinator
from kaflite.client.consumer._subscription import SubscriptionState
from kaflite.client.consumer._types import (
    GroupMembershipOperation,
    OffsetAndMetadata,
    TopicPartition,
)
from kaflite.client.events import Emit, Phase
from kaflite.client.metrics import AVG_MAX
from kaflite.client.pool import COORDINATOR
from kaflite.client.recovery import Action, action_for, error_name
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Request,
    Struct,
)
from kaflite.protocol.messages import offset_commit_request as ocq
from kaflite.protocol.messages import offset_fetch_request as ofq

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient
    from kaflite.net.connection import BrokerConnection

__all__ = ["CommitFailedError", "GroupClient", "MemberHooks", "Retry"]

R = TypeVar("R", bound=Struct)
T = TypeVar("T")

# OffsetFetch v9 (KIP-848) names the member and its epoch, checked by the coordinator
OFFSET_FETCH_MEMBER_VERSION = 9
LEAVE_TIMEOUT_S = 5.0        # how long a leave is tried, across coordinator moves
# the answers of a coordinator that is not (or not yet) the group's: ask again elsewhere
MOVED_COORDINATOR = frozenset({errors.NotCoordinatorError.code,
                               errors.CoordinatorNotAvailableError.code,
                               errors.CoordinatorLoadInProgressError.code})


class CommitFailedError(errors.KafkaError):
    """The commit cannot complete: the group rebalanced (the member must rejoin). A
    client-side verdict, as Java's CommitFailedException: no broker error code."""

    name = "COMMIT_FAILED"


class Retry(Exception):
    """A coordinator request failed on the wire: the coordinator is looked up again."""


def consume_exception(task: asyncio.Task[T]) -> None:
    """Mark a shared task's failure as seen (each waiter gets it through its own await)."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class MemberHooks:
    """What a group member asks of its consumer beyond its config, metadata and
    connections: the subscription, its event log, the rebalance steps, and a
    way to wake a waiting poll when partitions arrive."""

    subscriptions: SubscriptionState
    emit: Emit
    revoke: Callable[[set[TopicPartition], str], Awaitable[None]]
    assigned: Callable[[set[TopicPartition], int, bool], Awaitable[None]]
    lost: Callable[[set[TopicPartition], str], Awaitable[None]]
    wake: Callable[[], None]


class GroupClient(abc.ABC):
    """A group member's coordinator and offsets; the protocol is the subclass's."""

    def __init__(self, consumer: BaseClient, hooks: MemberHooks) -> None:
        self.consumer = consumer
        self.hooks = hooks
        c = consumer.config
        group_id = c.optional_string("group.id")
        assert group_id is not None   # a Consumer makes a member only with a group.id
        self.group_id = group_id
        self.instance_id = c.optional_string("group.instance.id")
        self.rebalance_timeout = c.int("rebalance.timeout.ms")
        self.max_poll_interval = c.int("max.poll.interval.ms") / 1000
        self.backoff = c.int("retry.backoff.ms") / 1000
        self.coordinator: int | None = None
        self.member_id = ""
        # the classic generation, or the KIP-848 member epoch (-1 outside the group)
        self.generation = -1
        self.fatal: BaseException | None = None
        self.last_poll = time.monotonic()
        self._finding: asyncio.Task[int] | None = None
        self._last_coordinator: int | None = None
        # KIP-714's coordinator metrics: an OffsetCommit's round trip, and a rebalance's
        # time from its start until the member has its new assignment
        self.commit_latency = consumer.metrics.sensor("coordinator.commit.latency", AVG_MAX)
        self.rebalance_latency = consumer.metrics.sensor("coordinator.rebalance.latency",
                                                         ("avg", "max", "total"))

    # -- what each protocol says ------------------------------------------------------------
    @abc.abstractmethod
    def _coordinator_error(self, code: int, what: str) -> Action:
        """Apply the recovery table to a coordinator error; returns the action."""

    @abc.abstractmethod
    def _commit_identity(self) -> tuple[int, str, str | None]:
        """(generation or member epoch, member id, instance id) for an OffsetCommit."""

    def _fetch_identity(self) -> tuple[str | None, int]:
        """(member id, member epoch) for OffsetFetch v9; a classic member sends none."""
        return None, -1

    @abc.abstractmethod
    def _membership_token(self) -> object:
        """What must not change while one commit is retried: it changes when the member
        is reset, fenced or joins a new generation its partitions may have left."""

    async def _await_new_epoch(self, sent: int, tps: set[TopicPartition],
                               deadline: float) -> bool:
        """STALE_MEMBER_EPOCH: True once a newer epoch is known (the request is then
        sent again). Only KIP-848 members have member epochs."""
        return False

    @abc.abstractmethod
    async def ensure_active_group(self, timeout: float) -> bool:
        """Join (or rejoin) if needed, waiting at most ``timeout``; True when stable."""

    @abc.abstractmethod
    def request_rejoin(self, reason: str) -> None:
        """The subscription changed (or an error asks for it): join again."""

    @abc.abstractmethod
    async def close(self, membership: GroupMembershipOperation) -> None:
        """Stop every task and, as ``membership`` says, leave the group (as the protocol
        leaves) or not."""

    def leaves(self, membership: GroupMembershipOperation) -> bool:
        """Whether a close with ``membership`` tells the coordinator."""
        if membership is GroupMembershipOperation.DEFAULT:
            return self.instance_id is None
        return membership is GroupMembershipOperation.LEAVE_GROUP

    def _emit(self, kind: str, message: str, cause: str | None = None, *,
              phase: Phase | None = None, broker: int | None = None,
              error_code: int | None = None, duration_ms: float | None = None) -> None:
        """An event about this group (its ``group`` field is set)."""
        self.hooks.emit(kind, message, cause, phase=phase, broker=broker, group=self.group_id,
                        error_code=error_code, duration_ms=duration_ms)

    # -- the coordinator -----------------------------------------------------------------
    def mark_coordinator_unknown(self, cause: str, error_code: int | None = None) -> None:
        if self.coordinator is not None:
            self._emit("coordinator", f"coordinator {self.coordinator} unknown for group "
                       f"{self.group_id}", cause=cause, phase=Phase.ERROR,
                       broker=self.coordinator, error_code=error_code)
            self.consumer.pool.close_connection(self.coordinator, COORDINATOR, cause)
        self.coordinator = None

    async def ensure_coordinator(self, deadline: float) -> int:
        while self.coordinator is None:
            try:
                # Callers (the join, a commit, the heartbeat) share one lookup in flight,
                # as Java's lookupCoordinator does.
                task = self._finding
                if task is None or task.done():
                    task = self._finding = asyncio.get_running_loop().create_task(
                        self._find_coordinator())
                    task.add_done_callback(consume_exception)
                node = await asyncio.shield(task)
            except (ConnectionClosed, OSError, TimeoutError, errors.KafkaError) as exc:
                if isinstance(exc, errors.KafkaError) and action_for(exc.code) in (
                        Action.RAISE, Action.FATAL):
                    raise
                if time.monotonic() > deadline:
                    raise errors.CoordinatorNotAvailableError(
                        f"no coordinator for group {self.group_id}: {exc!r}") from exc
                await asyncio.sleep(self.backoff)
                continue
            return node
        return self.coordinator

    async def send_leave(self, send: Callable[[BrokerConnection], Awaitable[int]]
                         ) -> str | None:
        """Send a leave (built and sent by ``send``, which returns the error code) to the
        coordinator; if the coordinator moved or cannot be reached, look it up again and
        send it there, for up to ``LEAVE_TIMEOUT_S``. The error it ended with, or None.

        Kafka's Java client sends its leave once. A leave lost to a coordinator move
        leaves the member in the group until its session expires (45 s by default), and
        its partitions with nobody; a coordinator that keeps moving restarts that session
        at each load. Sent again to the new coordinator, the leave takes effect at once."""
        deadline = time.monotonic() + LEAVE_TIMEOUT_S
        failed = "no coordinator"
        while True:
            try:
                node = await self.ensure_coordinator(deadline)
                async with asyncio.timeout(max(0.1, deadline - time.monotonic())):
                    conn = await self.consumer.pool.get(node, COORDINATOR)
                code = await send(conn)
            except errors.KafkaError as exc:      # no coordinator found in time
                return error_name(exc.code)
            except (ConnectionClosed, OSError, TimeoutError) as exc:
                failed = type(exc).__name__
                self.mark_coordinator_unknown(f"leave failed: {failed}")
            else:
                if code == 0:
                    return None
                failed = error_name(code)
                if code not in MOVED_COORDINATOR:
                    return failed
                self.mark_coordinator_unknown(f"leave failed: {failed}", code)
            if time.monotonic() + self.backoff >= deadline:
                return failed
            await asyncio.sleep(self.backoff)

    async def _find_coordinator(self) -> int:
        node = await find_coordinator(self.consumer, self.group_id, GROUP)
        old = self.coordinator
        self.coordinator = node
        if old is None:
            prev = self._last_coordinator
            if prev is not None and prev != node:
                self._emit("coordinator", f"coordinator moved {prev}→{node}",
                           cause=f"group {self.group_id}", broker=node)
            else:
                self._emit("coordinator", f"group coordinator for {self.group_id} is "
                           f"broker {node}", broker=node)
        self._last_coordinator = node
        return node

    async def _coord_request(self, body: Request[R], deadline: float,
                             version: int | None = None) -> R:
        node = await self.ensure_coordinator(deadline)
        try:
            conn = await self.consumer.pool.get(node, COORDINATOR)
            timeout = None
            if isinstance(body, JoinGroupRequest):
                timeout = self.rebalance_timeout / 1000 + 5
            return await conn.request(body, version=version, timeout=timeout)
        except (ConnectionClosed, TimeoutError, OSError) as exc:
            self.mark_coordinator_unknown(f"{type(body).__name__[:-7]} failed: "
                                          f"{type(exc).__name__}")
            raise Retry() from exc

    # -- offsets -------------------------------------------------------------------------------
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     timeout: float) -> None:
        deadline = time.monotonic() + timeout
        # A commit belongs to the membership it was made in: retried after the member was
        # reset and joined again, it would land under the new one (a new epoch), over what
        # the partitions' owner meanwhile committed (the group soak, kaflite-sync KIP-848,
        # seed 1295088744: a commit of 6179 retried for 29 s landed after 9780).
        token = self._membership_token()
        by_topic: dict[str, list[ocq.OffsetCommitRequestPartition]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(ocq.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
        while True:
            if self._membership_token() != token:
                raise CommitFailedError(
                    "commit failed: the member was reset or rejoined while the commit was "
                    "retried, so the partitions may now belong to another member")
            epoch, member_id, instance_id = self._commit_identity()
            req = OffsetCommitRequest(
                group_id=self.group_id, generation_id_or_member_epoch=epoch,
                member_id=member_id, group_instance_id=instance_id,
                topics=[ocq.OffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])
            sent = time.monotonic()
            try:
                resp: OffsetCommitResponse = await self._coord_request(req, deadline)
            except Retry:
                if time.monotonic() > deadline:
                    raise errors.RequestTimedOutError("OffsetCommit timed out") from None
                await asyncio.sleep(self.backoff)
                continue
            self.commit_latency.record((time.monotonic() - sent) * 1000)
            codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            if not codes:
                return
            code = codes.pop()
            action = self._coordinator_error(code, "OffsetCommit")
            if action == Action.AWAIT_EPOCH:
                if await self._await_new_epoch(epoch, set(offsets), deadline):
                    continue
                raise errors.error_for_code(code, "OffsetCommit: no newer member epoch "
                                            "arrived in time")
            if action in (Action.REJOIN, Action.RESET_MEMBER, Action.FENCED):
                raise CommitFailedError(
                    f"commit failed: {error_name(code)}; the group rebalanced, so the "
                    "partitions may now belong to another member")
            if action in (Action.REDISCOVER_COORDINATOR, Action.BACKOFF) or \
                    errors.error_class(code).retriable:
                if time.monotonic() > deadline:
                    raise errors.error_for_code(code, "OffsetCommit")
                await asyncio.sleep(self.backoff)
                continue
            raise errors.error_for_code(code, "OffsetCommit")

    async def fetch_committed(self, tps: list[TopicPartition], timeout: float
                              ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        deadline = time.monotonic() + timeout
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        while True:
            node = await self.ensure_coordinator(deadline)
            try:
                conn = await self.consumer.pool.get(node, COORDINATOR)
            except (ConnectionClosed, TimeoutError, OSError) as exc:
                # its broker is gone: look the coordinator up again (as a failed request)
                self.mark_coordinator_unknown(f"OffsetFetch failed: {type(exc).__name__}")
                if time.monotonic() > deadline:
                    raise errors.CoordinatorNotAvailableError(
                        f"OffsetFetch: no coordinator for group {self.group_id}") from exc
                await asyncio.sleep(self.backoff)
                continue
            version = conn.version_for(9)
            member_id, epoch = self._fetch_identity()
            if version >= 8:
                group = ofq.OffsetFetchRequestGroup(
                    group_id=self.group_id,
                    topics=[ofq.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                            for t, ps in by_topic.items()])
                if version >= OFFSET_FETCH_MEMBER_VERSION:
                    group.member_id, group.member_epoch = member_id, epoch
                req = OffsetFetchRequest(groups=[group], require_stable=True)
            else:
                req = OffsetFetchRequest(group_id=self.group_id, topics=[
                    ofq.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()], require_stable=version >= 7)
            try:
                resp: OffsetFetchResponse = await self._coord_request(req, deadline, version)
            except Retry:
                await asyncio.sleep(self.backoff)
                continue
            if version >= 8:
                g = resp.groups[0]
                code = g.error_code
                parts = [(t.name, p.partition_index, p.committed_offset, p.metadata,
                          p.committed_leader_epoch, p.error_code)
                         for t in g.topics for p in t.partitions]
            else:
                code = resp.error_code
                parts = [(t.name, p.partition_index, p.committed_offset, p.metadata,
                          p.committed_leader_epoch, p.error_code)
                         for t in resp.topics for p in t.partitions]
            codes = {code} | {p[5] for p in parts}
            codes.discard(0)
            if codes:
                c = codes.pop()
                action = self._coordinator_error(c, "OffsetFetch")
                if action == Action.AWAIT_EPOCH and \
                        await self._await_new_epoch(epoch, set(), deadline):
                    continue
                retry = action in (Action.REDISCOVER_COORDINATOR, Action.BACKOFF) or \
                    c == errors.UnstableOffsetCommitError.code or errors.error_class(c).retriable
                if retry and time.monotonic() < deadline:
                    await asyncio.sleep(self.backoff)
                    continue
                raise errors.error_for_code(c, "OffsetFetch")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for topic, p, offset, meta, leader_epoch, _ in parts:
                out[TopicPartition(topic, p)] = (
                    OffsetAndMetadata(offset, meta or "", leader_epoch) if offset >= 0 else None)
            return out

    def roles(self, node_id: int, channel: str) -> list[str]:
        if channel == COORDINATOR and node_id == self.coordinator:
            return [f"group coordinator ({self.group_id})"]
        return []
