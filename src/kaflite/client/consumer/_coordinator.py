"""The classic group member: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, commits.

Theory of operation
-------------------
The member's states and their transitions::

    UNJOINED --poll--> (coordinator known?) --JoinGroup--> SYNCING --SyncGroup--> STABLE
    STABLE --REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION (heartbeat)--> UNJOINED
    any    --UNKNOWN_MEMBER_ID--> UNJOINED with member id reset
    any    --NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / network--> coordinator unknown
    any    --FENCED_INSTANCE_ID--> FATAL (raised from poll)

The coordinator lookup and the offsets (OffsetCommit, OffsetFetch) are
``_group_client``'s, shared with KIP-848's member (``_membership``).

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
from typing import TYPE_CHECKING

from kaflite.client._aio import cancel_and_wait
from kaflite.client.consumer._assignors import (
    ASSIGNORS,
    Assignor,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kaflite.client.consumer._group_client import (
    CommitFailedError,
    GroupClient,
    MemberHooks,
    Retry,
)
from kaflite.client.consumer._types import GroupMembershipOperation, TopicPartition
from kaflite.client.events import Phase
from kaflite.client.recovery import Action, action_for, error_name
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kaflite.protocol.messages import join_group_request as jq
from kaflite.protocol.messages import leave_group_request as lgq
from kaflite.protocol.messages import sync_group_request as sq

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient
    from kaflite.net.connection import BrokerConnection

__all__ = ["CommitFailedError", "GroupMember", "MemberHooks"]


class MemberState(enum.Enum):
    """Where a classic group member is in its join cycle (the diagram above)."""

    UNJOINED = "unjoined"
    SYNCING = "syncing"
    STABLE = "stable"
    FATAL = "fatal"


UNJOINED, SYNCING, STABLE, FATAL = (MemberState.UNJOINED, MemberState.SYNCING,
                                    MemberState.STABLE, MemberState.FATAL)
MEMBER_ID_REQUIRED = errors.MemberIdRequiredError.code


class GroupMember(GroupClient):
    def __init__(self, consumer: BaseClient, hooks: MemberHooks) -> None:
        super().__init__(consumer, hooks)
        c = consumer.config
        self.session_timeout = c.int("session.timeout.ms")
        self.heartbeat_interval = c.int("heartbeat.interval.ms") / 1000
        self.assignors: list[Assignor] = [ASSIGNORS[n]() for n in
                                          c.strings("partition.assignment.strategy")]
        self.protocol: str | None = None
        self.leader_id = ""
        self.state: MemberState = UNJOINED
        self.rejoin_reason: str | None = "initial join"
        self.last_heartbeat_ok = time.monotonic()
        self._hb_task: asyncio.Task[None] | None = None
        self._join_task: asyncio.Task[None] | None = None
        self._rebalancing = False      # a JoinGroup or SyncGroup of ours is in flight
        self._closing = False
        self.joined_topics: set[str] = set()

    def _membership_token(self) -> object:
        # (Java's commitSync cannot see a new generation: the rejoin happens in poll.)
        return self.member_id, self.generation

    def _commit_identity(self) -> tuple[int, str, str | None]:
        # While its JoinGroup or SyncGroup waits on the coordinator connection, a commit
        # would wait behind it (a broker answers a connection's requests in order): as
        # Java's generationIfStable, it fails at once, and poll() completes the rebalance.
        if self._rebalancing:
            raise errors.RebalanceInProgressError(
                f"group {self.group_id} is rebalancing: poll() to complete the rebalance, "
                "then commit again")
        # A member that must rejoin (REBALANCE_IN_PROGRESS, or an ILLEGAL_GENERATION
        # that may be spurious) but has not sent its JoinGroup yet still commits under
        # the generation it has: the coordinator takes it if that generation is current,
        # and answers ILLEGAL_GENERATION otherwise, so nothing is committed over a newer
        # owner.
        if self.generation >= 0 and bool(self.member_id) and self.state != FATAL:
            return self.generation, self.member_id, self.instance_id
        if self.hooks.subscriptions.subscribed:
            # As Java's sendOffsetCommitRequest: a subscribed member outside the group
            # (its session expired, it was fenced) must not commit as a standalone
            # consumer (generation -1), which an empty group would take, over whoever
            # holds its partitions now.
            raise CommitFailedError(
                f"commit failed: the member is not part of an active generation of group "
                f"{self.group_id}; poll() to rejoin")
        return -1, "", None

    @property
    def cooperative(self) -> bool:
        proto = self.protocol or self.assignors[0].name
        return ASSIGNORS[proto].cooperative if proto in ASSIGNORS else False

    def _coordinator_error(self, code: int, what: str) -> Action:
        """Apply the recovery table to a coordinator error; returns the action."""
        action = action_for(code)
        if action == Action.REDISCOVER_COORDINATOR:
            self.mark_coordinator_unknown(f"{error_name(code)} on {what}", code)
        elif action == Action.RESET_MEMBER:
            self.member_id = ""
            self.generation = -1
            self.request_rejoin(f"{error_name(code)} on {what}", code)
        elif action == Action.REJOIN:
            self.request_rejoin(f"{error_name(code)} on {what}", code)
        elif action == Action.FATAL:
            self.fatal = errors.error_for_code(code, f"{what}: group.instance.id "
                                               f"{self.instance_id} fenced")
            self.state = FATAL
        return action

    def request_rejoin(self, reason: str, error_code: int | None = None) -> None:
        if self.state != FATAL:
            if self.rejoin_reason is None:
                self._emit("rebalance", "rejoin needed", cause=reason, error_code=error_code,
                           phase=Phase.ERROR if error_code else Phase.ACTION)
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
        await self._drop_lost_partitions()
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

    async def _drop_lost_partitions(self) -> None:
        """Java's onJoinPrepare: a member whose id or generation was reset (its session
        expired, it was fenced, UNKNOWN_MEMBER_ID) has lost its partitions, which the
        group may have given to another member meanwhile: ``on_partitions_lost``, and
        nothing of them is fetched or committed from now on. Called in poll, before
        anything is fetched, and before each JoinGroup."""
        owned = set(self.hooks.subscriptions.assignment)
        if owned and self.hooks.subscriptions.subscribed and \
                (not self.member_id or self.generation < 0):
            await self.hooks.lost(owned, "the member was reset: its partitions may belong "
                                         "to another member now")

    async def _join_loop(self) -> None:
        started = time.monotonic()
        while self.state != STABLE:
            if self.fatal is not None:
                return
            with contextlib.suppress(Retry):
                await self._join_once(time.monotonic() + self.rebalance_timeout / 1000)
            if self.state != STABLE:
                await asyncio.sleep(self.backoff)
        # as Java's successful-rebalance sensor: from the first JoinGroup to the assignment
        self.rebalance_latency.record((time.monotonic() - started) * 1000)

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
        await self._drop_lost_partitions()
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
                   cause=self.rejoin_reason, phase=Phase.ACTION)
        self._rebalancing = True
        try:
            await self._join_and_sync(req, topics, deadline)
        finally:
            self._rebalancing = False

    async def _join_and_sync(self, req: JoinGroupRequest, topics: set[str],
                             deadline: float) -> None:
        resp: JoinGroupResponse = await self._coord_request(req, deadline)
        if resp.error_code == MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id  # KIP-394: join again with the given id
            raise Retry()
        if resp.error_code:
            action = self._coordinator_error(resp.error_code, "JoinGroup")
            if action in (Action.RAISE,) or resp.error_code in (
                    errors.InconsistentGroupProtocolError.code,
                    errors.GroupMaxSizeReachedError.code, errors.InvalidSessionTimeoutError.code):
                raise errors.error_for_code(resp.error_code, f"JoinGroup {self.group_id}")
            raise Retry()
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
            raise Retry()
        assigned = {TopicPartition(t, p) for t, p in decode_assignment(sresp.assignment)}
        self.state = STABLE
        self._rebalancing = False       # the listener may commit (as in Java)
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
            except (Retry, errors.KafkaError, ConnectionError, OSError, TimeoutError):
                if time.monotonic() - self.last_heartbeat_ok > self.session_timeout / 1000:
                    self.request_rejoin("no successful heartbeat within session.timeout.ms")
                continue
            if resp.error_code:
                self._coordinator_error(resp.error_code, "Heartbeat")
            else:
                self.last_heartbeat_ok = time.monotonic()

    # -- leaving -------------------------------------------------------------------------------
    async def leave(self, reason: str, static_too: bool = False) -> None:
        """LeaveGroup; a static member (KIP-345) only when ``static_too`` (a close that
        asked to leave), and then by its instance id (v3+)."""
        static = self.instance_id is not None
        if (static and not static_too) or not self.member_id or self.coordinator is None:
            self.state = UNJOINED if self.state != FATAL else FATAL
            return

        async def send(conn: BrokerConnection) -> int:
            # v0-2 name the member at the top; v3+ (KIP-345) list members, v5+ with a reason.
            version = conn.version_for(13)
            if version >= 3:
                req = LeaveGroupRequest(group_id=self.group_id, members=[lgq.MemberIdentity(
                    member_id=self.member_id, group_instance_id=self.instance_id,
                    reason=reason if version >= 5 else None)])
            else:
                req = LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id)
            resp: LeaveGroupResponse = await conn.request(req, version=version, timeout=5)
            codes = [resp.error_code, *(m.error_code for m in resp.members)]
            return next((int(c) for c in codes if c), 0)

        failed = await self.send_leave(send)
        if failed is None:
            self._emit("rebalance", f"left group {self.group_id}", cause=reason)
        else:
            self._emit("rebalance", f"LeaveGroup for {self.group_id} failed ({failed}); the "
                       "coordinator drops the member when its session times out", cause=reason)
        self.member_id = ""
        self.generation = -1
        if self.state != FATAL:
            self.state = UNJOINED

    async def close(self, membership: GroupMembershipOperation) -> None:
        self._closing = True
        await cancel_and_wait(self._finding, self._join_task, self._hb_task)
        # A member the coordinator knows leaves, even one that was about to rejoin
        # (the rebalance then need not wait for it), as Java's maybeLeaveGroup does.
        if self.member_id and self.state != FATAL and self.leaves(membership):
            await self.leave("consumer closed", static_too=True)
