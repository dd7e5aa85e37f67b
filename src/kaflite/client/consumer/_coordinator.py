"""The classic group member: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, commits.

Theory of operation
-------------------
The member's states and their transitions::

    UNJOINED --poll--> (coordinator known?) --JoinGroup--> SYNCING --SyncGroup--> STABLE
    STABLE --REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION (heartbeat)--> UNJOINED
    any    --UNKNOWN_MEMBER_ID--> UNJOINED with member id reset
    any    --NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / network--> coordinator unknown
    any    --FENCED_INSTANCE_ID--> FATAL (raised from poll)

The coordinator is the broker FindCoordinator names; the member talks to it
on the pool's separate *coordinator* channel. COORDINATOR_LOAD_IN_PROGRESS
backs off and retries the same coordinator; NOT_COORDINATOR looks it up again.

Joining and syncing run inside ``poll`` (as in Java's classic consumer):
``ensure_active_group``. The heartbeat runs on its own task every
``heartbeat.interval.ms`` while the member is STABLE (or syncing), so a slow
application does not lose its membership until ``max.poll.interval.ms`` has
passed without a ``poll``; then the heartbeat task leaves the group, as
Java's heartbeat thread does, and the next poll rejoins.

The leader of a generation runs the assignor the coordinator chose and sends
every member's assignment in SyncGroup. With an eager protocol every
partition is revoked before joining; with cooperative-sticky (KIP-429) only
the partitions that move are revoked, after the assignment arrives, and the
member rejoins at once so that the follow-up rebalance can hand them over.

Static membership (KIP-345): with ``group.instance.id`` the member joins
under that id, keeps its assignment across restarts within the session
timeout, and does not send LeaveGroup on close.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from kaflite.client._aio import cancel_and_wait
from kaflite.client._find_coordinator import GROUP, find_coordinator
from kaflite.client.consumer._assignors import (
    ASSIGNORS,
    Assignor,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kaflite.client.consumer._subscription import SubscriptionState
from kaflite.client.consumer._types import OffsetAndMetadata, TopicPartition
from kaflite.client.events import Emit
from kaflite.client.pool import COORDINATOR
from kaflite.client.recovery import Action, action_for, error_name
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    Request,
    Struct,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kaflite.protocol.messages import join_group_request as jq
from kaflite.protocol.messages import leave_group_request as lgq
from kaflite.protocol.messages import offset_commit_request as ocq
from kaflite.protocol.messages import offset_fetch_request as ofq
from kaflite.protocol.messages import sync_group_request as sq

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient

__all__ = ["CommitFailedError", "GroupMember"]



class MemberState(enum.Enum):
    """Where a classic group member is in its join cycle (the diagram above)."""

    UNJOINED = "unjoined"
    SYNCING = "syncing"
    STABLE = "stable"
    FATAL = "fatal"


UNJOINED, SYNCING, STABLE, FATAL = (MemberState.UNJOINED, MemberState.SYNCING,
                                    MemberState.STABLE, MemberState.FATAL)
MEMBER_ID_REQUIRED = errors.MemberIdRequiredError.code


class CommitFailedError(errors.KafkaError):
    """The commit cannot complete: the group rebalanced (the member must rejoin)."""


R = TypeVar("R", bound=Struct)
T = TypeVar("T")


class _Retry(Exception):
    pass


def _consume_exception(task: asyncio.Task[T]) -> None:
    """Mark a shared task's failure as seen (each waiter gets it through its own await)."""
    if not task.cancelled():
        task.exception()


@dataclass(frozen=True)
class MemberHooks:
    """What a group member asks of its consumer beyond its config, metadata and
    connections: the subscription, its event log, and the two rebalance steps."""

    subscriptions: SubscriptionState
    emit: Emit
    revoke: Callable[[set[TopicPartition], str], Awaitable[None]]
    assigned: Callable[[set[TopicPartition], int, bool], Awaitable[None]]


class GroupMember:
    def __init__(self, consumer: BaseClient, hooks: MemberHooks) -> None:
        self.consumer = consumer
        self.hooks = hooks
        c = consumer.config
        group_id = c.optional_string("group.id")
        assert group_id is not None   # a Consumer makes a GroupMember only with a group.id
        self.group_id = group_id
        self.instance_id = c.optional_string("group.instance.id")
        self.session_timeout = c.int("session.timeout.ms")
        self.rebalance_timeout = c.int("rebalance.timeout.ms")
        self.heartbeat_interval = c.int("heartbeat.interval.ms") / 1000
        self.max_poll_interval = c.int("max.poll.interval.ms") / 1000
        self.backoff = c.int("retry.backoff.ms") / 1000
        self.assignors: list[Assignor] = [ASSIGNORS[n]() for n in
                                          c.strings("partition.assignment.strategy")]
        self.coordinator: int | None = None
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader_id = ""
        self.state: MemberState = UNJOINED
        self.rejoin_reason: str | None = "initial join"
        self.fatal: BaseException | None = None
        self.last_poll = time.monotonic()
        self.last_heartbeat_ok = time.monotonic()
        self._hb_task: asyncio.Task[None] | None = None
        self._join_task: asyncio.Task[None] | None = None
        self._finding: asyncio.Task[int] | None = None
        self._closing = False
        self._last_coordinator: int | None = None
        self.joined_topics: set[str] = set()

    @property
    def cooperative(self) -> bool:
        proto = self.protocol or self.assignors[0].name
        return ASSIGNORS[proto].cooperative if proto in ASSIGNORS else False

    def _emit(self, kind: str, message: str, cause: str | None = None) -> None:
        self.hooks.emit(kind, message, cause)

    # -- the coordinator -----------------------------------------------------------------
    def mark_coordinator_unknown(self, cause: str) -> None:
        if self.coordinator is not None:
            self._emit("coordinator", f"coordinator {self.coordinator} unknown for group "
                       f"{self.group_id}", cause=cause)
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
                    task.add_done_callback(_consume_exception)
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

    async def _find_coordinator(self) -> int:
        node = await find_coordinator(self.consumer, self.group_id, GROUP)
        old = self.coordinator
        self.coordinator = node
        if old is None:
            prev = self._last_coordinator
            if prev is not None and prev != node:
                self._emit("coordinator", f"coordinator moved {prev}→{node}",
                           cause=f"group {self.group_id}")
            else:
                self._emit("coordinator", f"group coordinator for {self.group_id} is "
                           f"broker {node}")
        self._last_coordinator = node
        return node

    async def _coord_request(self, body: Request[R], deadline: float) -> R:
        node = await self.ensure_coordinator(deadline)
        try:
            conn = await self.consumer.pool.get(node, COORDINATOR)
            timeout = None
            if isinstance(body, JoinGroupRequest):
                timeout = self.rebalance_timeout / 1000 + 5
            return await conn.request(body, timeout=timeout)
        except (ConnectionClosed, TimeoutError, OSError) as exc:
            self.mark_coordinator_unknown(f"{type(body).__name__[:-7]} failed: "
                                          f"{type(exc).__name__}")
            raise _Retry() from exc

    def _coordinator_error(self, code: int, what: str) -> Action:
        """Apply the recovery table to a coordinator error; returns the action."""
        action = action_for(code)
        if action == Action.REDISCOVER_COORDINATOR:
            self.mark_coordinator_unknown(f"{error_name(code)} on {what}")
        elif action == Action.RESET_MEMBER:
            self.member_id = ""
            self.generation = -1
            self.request_rejoin(f"{error_name(code)} on {what}")
        elif action == Action.REJOIN:
            self.request_rejoin(f"{error_name(code)} on {what}")
        elif action == Action.FATAL:
            self.fatal = errors.error_for_code(code, f"{what}: group.instance.id "
                                               f"{self.instance_id} fenced")
            self.state = FATAL
        return action

    def request_rejoin(self, reason: str) -> None:
        if self.state != FATAL:
            if self.rejoin_reason is None:
                self._emit("rebalance", "rejoin needed", cause=reason)
            self.rejoin_reason = reason
            self.state = UNJOINED

    # -- joining -------------------------------------------------------------------------------
    async def ensure_active_group(self, timeout: float) -> bool:
        """Join (or rejoin) if needed, waiting at most ``timeout``; True when STABLE.

        The join runs on its own task, so a poll with a short timeout returns on
        time while a rebalance that waits for other members goes on.
        """
        if self.fatal is not None:
            raise self.fatal
        self.start_heartbeat()
        if self.state == STABLE and self._subscription_changed():
            self.request_rejoin("subscription changed")
        if self.state == STABLE:
            return True
        task = self._join_task
        if task is None or task.done():
            task = self._join_task = asyncio.get_running_loop().create_task(self._join_loop())
        await asyncio.wait({task}, timeout=max(timeout, 0.0))
        if task.done() and task.exception() is not None:
            exc = task.exception()
            assert exc is not None
            raise exc
        if self.fatal is not None:
            raise self.fatal
        return self.state == STABLE

    async def _join_loop(self) -> None:
        while self.state != STABLE:
            if self.fatal is not None:
                return
            with contextlib.suppress(_Retry):
                await self._join_once(time.monotonic() + self.rebalance_timeout / 1000)
            if self.state != STABLE:
                await asyncio.sleep(self.backoff)

    def _subscription_changed(self) -> bool:
        return self._topics() != self.joined_topics

    def _topics(self) -> set[str]:
        subs = self.hooks.subscriptions
        md = self.consumer.metadata
        if subs.pattern is not None:
            return {t for t in md.topics if subs.matches(t)
                    and not (md.topics[t].internal and
                             self.consumer.config.bool("exclude.internal.topics"))}
        return set(subs.topics)

    async def _join_once(self, deadline: float) -> None:
        consumer = self.consumer
        subs = self.hooks.subscriptions
        owned = sorted(subs.assignment)
        if not self.cooperative and owned:
            await self.hooks.revoke(set(owned), "eager rebalance")
            owned = []
        topics = self._topics()
        md = consumer.metadata
        if subs.pattern is None:
            md.add_topics(topics)
        if not all(t in md.topics for t in topics):
            await md.refresh("topics of the subscription")
        metadata = encode_subscription(sorted(topics), [(tp.topic, tp.partition) for tp in owned],
                                       self.generation, consumer.config.string("client.rack") or None)
        req = JoinGroupRequest(
            group_id=self.group_id, session_timeout_ms=self.session_timeout,
            rebalance_timeout_ms=self.rebalance_timeout, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer",
            protocols=[jq.JoinGroupRequestProtocol(name=a.name, metadata=metadata)
                       for a in self.assignors],
            reason=self.rejoin_reason)
        self._emit("rebalance", f"joining group {self.group_id}",
                   cause=self.rejoin_reason)
        resp: JoinGroupResponse = await self._coord_request(req, deadline)
        if resp.error_code == MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id  # KIP-394: join again with the given id
            raise _Retry()
        if resp.error_code:
            action = self._coordinator_error(resp.error_code, "JoinGroup")
            if action in (Action.RAISE,) or resp.error_code in (
                    errors.InconsistentGroupProtocolError.code,
                    errors.GroupMaxSizeReachedError.code, errors.InvalidSessionTimeoutError.code):
                raise errors.error_for_code(resp.error_code, f"JoinGroup {self.group_id}")
            raise _Retry()
        self.member_id = resp.member_id
        self.generation = resp.generation_id
        self.protocol = resp.protocol_name
        self.leader_id = resp.leader
        self.joined_topics = topics
        assignments: list[sq.SyncGroupRequestAssignment] = []
        if resp.leader == resp.member_id and not resp.skip_assignment:
            assignments = self._lead(resp)
        self.state = SYNCING
        sync = SyncGroupRequest(
            group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer",
            protocol_name=self.protocol, assignments=assignments)
        sresp: SyncGroupResponse = await self._coord_request(sync, deadline)
        if sresp.error_code:
            self._coordinator_error(sresp.error_code, "SyncGroup")
            if self.state == SYNCING:
                self.state = UNJOINED
            raise _Retry()
        assigned = {TopicPartition(t, p) for t, p in decode_assignment(sresp.assignment)}
        self.state = STABLE
        self.rejoin_reason = None
        self.last_heartbeat_ok = time.monotonic()
        await self.hooks.assigned(assigned, self.generation, self.cooperative)

    def _lead(self, resp: JoinGroupResponse) -> list[sq.SyncGroupRequestAssignment]:
        md = self.consumer.metadata
        members = [decode_subscription(m.member_id, m.metadata, m.group_instance_id)
                   for m in resp.members]
        topics = {t for m in members for t in m.topics}
        md.add_topics(topics)
        partitions = {t: len(md.topics[t].partitions) for t in topics if t in md.topics}
        assignor = ASSIGNORS[self.protocol or "range"]()
        plan = assignor.assign(partitions, members)
        self._emit("rebalance", f"leader of generation {self.generation}: {assignor.name} "
                   f"assignment for {len(members)} members")
        return [sq.SyncGroupRequestAssignment(member_id=mid, assignment=encode_assignment(tps))
                for mid, tps in plan.items()]

    # -- heartbeats ----------------------------------------------------------------------------
    def start_heartbeat(self) -> None:
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())

    async def _heartbeat_loop(self) -> None:
        while self.state != FATAL and not self._closing:
            await asyncio.sleep(self.heartbeat_interval)
            if time.monotonic() - self.last_poll > self.max_poll_interval and \
                    self.state == STABLE:
                # Java's heartbeat thread does this: the application is stuck, so leave
                # and let the others have the partitions; the next poll rejoins.
                self._emit("rebalance", "leaving group", cause="max.poll.interval.ms "
                           "exceeded between polls")
                await self.leave("max.poll.interval.ms exceeded")
                self.request_rejoin("max.poll.interval.ms exceeded")
                continue
            if self.state != STABLE:
                continue
            # An unknown coordinator (NOT_COORDINATOR, a lost connection) is looked up
            # again right here, as Java's heartbeat thread does: a STABLE member whose
            # poll() needs nothing from the coordinator must not stop heartbeating.
            req = HeartbeatRequest(group_id=self.group_id, generation_id=self.generation,
                                   member_id=self.member_id,
                                   group_instance_id=self.instance_id)
            try:
                resp: HeartbeatResponse = await self._coord_request(
                    req, time.monotonic() + self.heartbeat_interval)
            except (_Retry, errors.KafkaError, ConnectionError, OSError, TimeoutError):
                if time.monotonic() - self.last_heartbeat_ok > self.session_timeout / 1000:
                    self.request_rejoin("no successful heartbeat within session.timeout.ms")
                continue
            if resp.error_code:
                self._coordinator_error(resp.error_code, "Heartbeat")
            else:
                self.last_heartbeat_ok = time.monotonic()

    # -- offsets -------------------------------------------------------------------------------
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     timeout: float) -> None:
        deadline = time.monotonic() + timeout
        by_topic: dict[str, list[ocq.OffsetCommitRequestPartition]] = {}
        for tp, om in offsets.items():
            by_topic.setdefault(tp.topic, []).append(ocq.OffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata))
        while True:
            # A member that must rejoin (REBALANCE_IN_PROGRESS, or an ILLEGAL_GENERATION
            # that may be spurious) still commits under the generation it has: the
            # coordinator takes it if that generation is current, and answers
            # ILLEGAL_GENERATION otherwise, so nothing is committed over a newer owner.
            in_group = self.generation >= 0 and bool(self.member_id) and self.state != FATAL
            req = OffsetCommitRequest(
                group_id=self.group_id,
                generation_id_or_member_epoch=self.generation if in_group else -1,
                member_id=self.member_id if in_group else "",
                group_instance_id=self.instance_id if in_group else None,
                topics=[ocq.OffsetCommitRequestTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()])
            try:
                resp: OffsetCommitResponse = await self._coord_request(req, deadline)
            except _Retry:
                if time.monotonic() > deadline:
                    raise errors.RequestTimedOutError("OffsetCommit timed out") from None
                await asyncio.sleep(self.backoff)
                continue
            codes = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            if not codes:
                return
            code = codes.pop()
            action = self._coordinator_error(code, "OffsetCommit")
            if action in (Action.REJOIN, Action.RESET_MEMBER):
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
            conn = await self.consumer.pool.get(node, COORDINATOR)
            version = conn.version_for(9)
            if version >= 8:
                req = OffsetFetchRequest(groups=[ofq.OffsetFetchRequestGroup(
                    group_id=self.group_id,
                    topics=[ofq.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
                            for t, ps in by_topic.items()])], require_stable=True)
            else:
                req = OffsetFetchRequest(group_id=self.group_id, topics=[
                    ofq.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()], require_stable=version >= 7)
            try:
                resp: OffsetFetchResponse = await self._coord_request(req, deadline)
            except _Retry:
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
                retry = action in (Action.REDISCOVER_COORDINATOR, Action.BACKOFF) or \
                    c == errors.UnstableOffsetCommitError.code or errors.error_class(c).retriable
                if retry and time.monotonic() < deadline:
                    await asyncio.sleep(self.backoff)
                    continue
                raise errors.error_for_code(c, "OffsetFetch")
            out: dict[TopicPartition, OffsetAndMetadata | None] = {}
            for topic, p, offset, meta, epoch, _ in parts:
                out[TopicPartition(topic, p)] = (OffsetAndMetadata(offset, meta or "", epoch)
                                                 if offset >= 0 else None)
            return out

    # -- leaving -------------------------------------------------------------------------------
    async def leave(self, reason: str) -> None:
        if self.instance_id is not None or not self.member_id or self.coordinator is None:
            self.state = UNJOINED if self.state != FATAL else FATAL
            return
        failed: str | None = None
        try:
            async with asyncio.timeout(5):
                conn = await self.consumer.pool.get(self.coordinator, COORDINATOR)
            # v0-2 name the member at the top; v3+ (KIP-345) list members, v5+ with a reason.
            version = conn.version_for(13)
            if version >= 3:
                req = LeaveGroupRequest(group_id=self.group_id, members=[lgq.MemberIdentity(
                    member_id=self.member_id, reason=reason if version >= 5 else None)])
            else:
                req = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
            resp: LeaveGroupResponse = await conn.request(req, version=version, timeout=5)
            codes = {resp.error_code} | {m.error_code for m in resp.members}
            codes.discard(0)
            if codes:
                failed = error_name(codes.pop())
        except Exception as exc:
            failed = type(exc).__name__
        if failed is None:
            self._emit("rebalance", f"left group {self.group_id}", cause=reason)
        else:
            self._emit("rebalance", f"LeaveGroup for {self.group_id} failed ({failed}); the "
                       "coordinator drops the member when its session times out", cause=reason)
        self.member_id = ""
        self.generation = -1
        if self.state != FATAL:
            self.state = UNJOINED

    async def close(self) -> None:
        self._closing = True
        await cancel_and_wait(self._finding, self._join_task, self._hb_task)
        # A member the coordinator knows leaves, even one that was about to rejoin
        # (the rebalance then need not wait for it), as Java's maybeLeaveGroup does.
        if self.member_id and self.state != FATAL:
            await self.leave("consumer closed")

    def roles(self, node_id: int, channel: str) -> list[str]:
        if channel == COORDINATOR and node_id == self.coordinator:
            return [f"group coordinator ({self.group_id})"]
        return []
