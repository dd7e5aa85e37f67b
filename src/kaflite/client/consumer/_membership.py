"""The KIP-848 group member (``group.protocol=consumer``): ConsumerGroupHeartbeat.

Theory of operation
-------------------
The coordinator assigns the partitions (its ``uniform`` or ``range`` assignor,
or the one ``group.remote.assignor`` names); the member heartbeats, takes what
each answer gives it, and says what it owns. Its states, as Java's
``MemberState``::

    UNSUBSCRIBED --poll with a subscription--> JOINING (epoch 0, a full request)
    JOINING --answer--> RECONCILING (an assignment came) or STABLE
    RECONCILING --revoked, then assigned--> ACKNOWLEDGING --heartbeat--> STABLE
    any --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID--> partitions lost, JOINING
    any --no poll within max.poll.interval.ms--> leave (epoch -1), STALE --poll--> JOINING
    any --UNRELEASED/FENCED_INSTANCE_ID, GROUP_AUTHORIZATION_FAILED...--> FATAL (raised)

One heartbeat is in flight at a time, every ``heartbeat_interval_ms`` as the
last answer set it, and at once when joining, acknowledging, leaving, when the
subscription changed or when a commit found its epoch stale. The member id is
the client's own (KIP-1082), kept across rejoins.

What a heartbeat carries follows the KIP (Java's ``HeartbeatState``): group,
member id, epoch and instance id always; the rebalance timeout, the
subscription (topic names or ``SubscribedTopicRegex``), the server assignor
and the rack only on a full request or when they changed since the last one
sent; the owned partitions (by topic id) on a full request or when the local
assignment changed (an acknowledgement). A request is full when joining and
after any failed heartbeat, since the coordinator may not have seen the last.

Reconciliation runs on its own task, one target at a time: the topic ids are
named from metadata (refreshed when one is unknown; partitions of topics still
unknown wait), the partitions that go are revoked first (a commit of their
positions when auto-commit is on, then ``on_partitions_revoked``), then the new
ones are assigned (``on_partitions_assigned``), and the next heartbeat
acknowledges with the owned partitions. A fence meanwhile discards the step.

OffsetCommit and OffsetFetch (v9+) name the member and its epoch. A
STALE_MEMBER_EPOCH answer sends a full heartbeat at once and retries with the
epoch it brings (if the partitions are still owned).

A share-group member (``kaflite.client.share``) is the same machine with
ShareGroupHeartbeat: it overrides what a heartbeat carries (``_build``,
``_leave_request``) and the API it is sent as (``API_KEY``, ``API_NAME``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflite.client._aio import cancel_and_wait, wait_event
from kaflite.client.consumer._group_client import CommitFailedError, GroupClient, MemberHooks, Retry
from kaflite.client.consumer._types import GroupMembershipOperation, TopicPartition
from kaflite.client.events import Phase
from kaflite.client.pool import COORDINATOR
from kaflite.client.recovery import Action, action_for, backoff_delay, error_name
from kaflite.net.connection import ConnectionClosed, NoCommonVersion
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from kaflite.protocol.messages import consumer_group_heartbeat_request as cghq

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient
    from kaflite.net.connection import BrokerConnection

__all__ = ["ConsumerMembership", "MemberState"]

HEARTBEAT_API = 68
REGEX_VERSION = 1              # SubscribedTopicRegex from ConsumerGroupHeartbeat v1
LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2
OwnedIds = frozenset[tuple[uuid.UUID, int]]
HeartbeatRequest = ConsumerGroupHeartbeatRequest | ShareGroupHeartbeatRequest
HeartbeatResponse = ConsumerGroupHeartbeatResponse | ShareGroupHeartbeatResponse


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"
    RECONCILING = "reconciling"
    ACKNOWLEDGING = "acknowledging"
    STABLE = "stable"
    STALE = "stale"            # left after max.poll.interval.ms; the next poll rejoins
    FATAL = "fatal"


S = MemberState
IN_GROUP = (S.JOINING, S.RECONCILING, S.ACKNOWLEDGING, S.STABLE)


def new_member_id() -> str:
    """KIP-1082: the client makes its member id, a UUID as Kafka prints one."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class _Sent:
    """What the coordinator has been told (Java's ``HeartbeatState.SentFields``)."""

    rebalance_timeout: int = -1
    names: tuple[str, ...] | None = None
    regex: str | None = None
    assignor: str | None = None
    owned: tuple[int, OwnedIds] | None = None   # (local assignment epoch, partitions)


class ConsumerMembership(GroupClient):
    API_KEY = HEARTBEAT_API
    API_NAME = "ConsumerGroupHeartbeat"
    NEEDS = "group.protocol=consumer needs Kafka 4"
    JOIN_NOTE = "group.protocol=consumer"
    _join_started: float | None = None     # monotonic, when the last join was sent

    def __init__(self, consumer: BaseClient, hooks: MemberHooks) -> None:
        super().__init__(consumer, hooks)
        c = consumer.config
        self.member_id = new_member_id()
        self.generation = 0               # the member epoch
        self.server_assignor = c.optional_string("group.remote.assignor")
        self.rack = c.string("client.rack") or None
        self.state = S.UNSUBSCRIBED
        self.heartbeat_interval = 5.0     # until the coordinator says
        self.retry_backoff_max = c.int("retry.backoff.max.ms")
        self._sent: _Sent | None = None   # None: the next heartbeat is full
        self._owned: tuple[int, OwnedIds] = (0, frozenset())   # the local assignment
        self._target: dict[uuid.UUID, frozenset[int]] | None = None   # not reconciled yet
        self._unresolved: dict[uuid.UUID, frozenset[int]] = {}
        self._incarnation = 0             # bumped when the partitions are lost
        self._now = asyncio.Event()       # heartbeat now
        self._epoch_moved = asyncio.Event()
        self._hb_task: asyncio.Task[None] | None = None
        self._reconciler: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def member_epoch(self) -> int:
        return self.generation

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.generation:
            self.generation = epoch
            self._epoch_moved.set()
            self._epoch_moved = asyncio.Event()

    def _membership_token(self) -> object:
        # the epoch may move on (a newer epoch is what STALE_MEMBER_EPOCH waits for);
        # losing the partitions may not
        return self.member_id, self._incarnation

    def _commit_identity(self) -> tuple[int, str, str | None]:
        if self.generation > 0 and self.state in IN_GROUP:
            return self.generation, self.member_id, self.instance_id
        return -1, "", None

    def _fetch_identity(self) -> tuple[str | None, int]:
        if self.generation > 0 and self.state in IN_GROUP:
            return self.member_id, self.generation
        return None, -1

    def _coordinator_error(self, code: int, what: str) -> Action:
        action = action_for(code)
        if action == Action.REDISCOVER_COORDINATOR:
            self.mark_coordinator_unknown(f"{error_name(code)} on {what}", code)
        elif action in (Action.FENCED, Action.RESET_MEMBER):
            # A commit or fetch learns it first; the heartbeat (sent now) acts on it.
            self._sent = None
            self._now.set()
        return action

    # -- joining -------------------------------------------------------------------------------
    async def ensure_active_group(self, timeout: float) -> bool:
        """Join if needed and wait (at most ``timeout``) until the member has reconciled."""
        if self.fatal is not None:
            raise self.fatal
        if self.state in (S.UNSUBSCRIBED, S.STALE) and self.hooks.subscriptions.subscribed:
            self._join(self.state.value)
        if self._hb_task is None or self._hb_task.done():
            self._hb_task = asyncio.get_running_loop().create_task(self._heartbeat_loop())
        deadline = time.monotonic() + max(timeout, 0.0)
        while self.state in (S.JOINING, S.RECONCILING) and self.fatal is None:
            event = self._epoch_moved
            if not await wait_event(event, min(deadline - time.monotonic(), 0.05)) and \
                    time.monotonic() >= deadline:
                break
        if self.fatal is not None:
            raise self.fatal
        return self.state in (S.STABLE, S.ACKNOWLEDGING)

    def _join(self, why: str) -> None:
        self._emit("rebalance", f"joining group {self.group_id} ({self.JOIN_NOTE})",
                   cause=why, phase=Phase.ACTION)
        self._join_started = time.monotonic()
        self._set_epoch(0)
        self._sent = None
        self._owned = (self._owned[0] + 1, frozenset())
        self.state = S.JOINING
        self._now.set()

    def request_rejoin(self, reason: str) -> None:
        """The subscription changed: the next heartbeat (sent now) carries it."""
        if self.state in (S.UNSUBSCRIBED, S.STALE, S.FATAL):
            return   # the next poll joins
        self._emit("rebalance", "subscription sent to the coordinator", cause=reason)
        self._now.set()

    # -- heartbeats ----------------------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        failures = 0
        next_at = time.monotonic()
        while not self._closing and self.state is not S.FATAL:
            if self.state in IN_GROUP and not self.hooks.subscriptions.subscribed:
                await self._leave("unsubscribed")
                self.state = S.UNSUBSCRIBED
            if self.state in IN_GROUP and \
                    time.monotonic() - self.last_poll > self.max_poll_interval:
                # Java's poll timer: the application is stuck, so its partitions go to the
                # others; the next poll joins again.
                await self._lose("max.poll.interval.ms exceeded between polls")
                await self._leave("max.poll.interval.ms exceeded")
                self.state = S.STALE
            if self.state not in IN_GROUP:
                self._now.clear()
                await wait_event(self._now, 1.0)
                continue
            if self.state not in (S.JOINING, S.ACKNOWLEDGING) and not self._now.is_set():
                await wait_event(self._now, next_at - time.monotonic())
                if time.monotonic() < next_at and not self._now.is_set():
                    continue
            self._now.clear()
            ok = await self._heartbeat()
            if self._unresolved and self._reconciler_idle():
                self._start_reconcile(dict(self._unresolved))
            failures = 0 if ok else failures + 1
            next_at = time.monotonic() + (self.heartbeat_interval if ok else backoff_delay(
                int(self.backoff * 1000), self.retry_backoff_max, failures))
            if not ok:
                self._now.clear()
                await asyncio.sleep(max(next_at - time.monotonic(), 0))

    def _build(self, version: int) -> tuple[HeartbeatRequest, _Sent]:
        subs = self.hooks.subscriptions
        full = self._sent is None or self.state is S.JOINING
        sent = _Sent() if full else self._sent
        assert sent is not None
        req = ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                            member_epoch=self.generation,
                                            instance_id=self.instance_id)
        if full:
            req.rack_id = self.rack
        if full or sent.rebalance_timeout != self.rebalance_timeout:
            req.rebalance_timeout_ms = self.rebalance_timeout
        names: tuple[str, ...] | None
        regex: str | None
        if subs.pattern is not None and version >= REGEX_VERSION:
            names, regex = None, subs.pattern.pattern   # the coordinator resolves it
        else:
            names, regex = tuple(sorted(self._topics())), None
        if names is not None and (full or names != sent.names):
            req.subscribed_topic_names = list(names)
        if names is None and sent.names:
            req.subscribed_topic_names = []   # no longer by names
        if regex is not None and (full or regex != sent.regex):
            req.subscribed_topic_regex = regex
        if regex is None and sent.regex:
            req.subscribed_topic_regex = ""   # no longer by a regex
        if self.server_assignor is not None and (full or self.server_assignor != sent.assignor):
            req.server_assignor = self.server_assignor
        if full or self._owned != sent.owned:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for topic_id, p in sorted(self._owned[1]):
                by_topic.setdefault(topic_id, []).append(p)
            req.topic_partitions = [cghq.TopicPartitions(topic_id=t, partitions=ps)
                                    for t, ps in by_topic.items()]
        return req, _Sent(self.rebalance_timeout, names, regex, self.server_assignor,
                          self._owned)

    def _topics(self) -> set[str]:
        """A subscription by names; a pattern resolved here when the coordinator is too
        old for SubscribedTopicRegex."""
        subs = self.hooks.subscriptions
        md = self.consumer.metadata
        if subs.pattern is not None:
            return {t for t in md.topics if subs.matches(t) and not md.topics[t].internal}
        return set(subs.topics)

    async def _heartbeat(self) -> bool:
        """One heartbeat; False when it failed (the caller backs off)."""
        deadline = time.monotonic() + max(self.heartbeat_interval, 5.0)
        state_sent, incarnation = self.state, self._incarnation
        try:
            node = await self.ensure_coordinator(deadline)
            conn = await self.consumer.pool.get(node, COORDINATOR)
            version = conn.version_for(self.API_KEY)
            req, sent = self._build(version)
            resp: HeartbeatResponse = await self._coord_request(req, deadline, version)
        except NoCommonVersion as exc:
            self._fail(errors.UnsupportedVersionError(
                f"the coordinator does not serve {self.API_NAME} ({self.NEEDS}): {exc}"))
            return False
        except errors.KafkaError as exc:
            if action_for(exc.code) in (Action.RAISE, Action.FATAL):
                self._fail(exc)
            self._sent = None
            return False
        except Retry:
            self._sent = None
            return False
        except (ConnectionClosed, OSError, TimeoutError) as exc:
            # The coordinator cannot be reached (its broker died or left the metadata):
            # look it up again, as Java does on a disconnect, rather than wait for it.
            self.mark_coordinator_unknown(f"{self.API_NAME} failed: {type(exc).__name__}")
            self._sent = None
            return False
        if incarnation != self._incarnation:
            return True   # the member was fenced or left while the request was out
        if resp.error_code:
            self._sent = None
            await self._heartbeat_error(resp)
            return False
        self._sent = sent
        if resp.heartbeat_interval_ms > 0:
            self.heartbeat_interval = resp.heartbeat_interval_ms / 1000
        if resp.member_id:
            self.member_id = resp.member_id
        if state_sent is S.JOINING:
            started = self._join_started
            self._emit("rebalance", f"joined group {self.group_id} as {self.member_id} "
                       f"(member epoch {resp.member_epoch})", broker=self.coordinator,
                       duration_ms=None if started is None
                       else round((time.monotonic() - started) * 1000, 3))
        self._set_epoch(resp.member_epoch)
        if resp.assignment is not None:
            target: dict[uuid.UUID, frozenset[int]] = {}
            for tp in resp.assignment.topic_partitions:
                target[tp.topic_id] = target.get(tp.topic_id, frozenset()) | set(tp.partitions)
            self._start_reconcile(target)
        elif self.state in (S.JOINING, S.ACKNOWLEDGING) and self._reconciler_idle():
            self.state = S.STABLE
        return True

    async def _heartbeat_error(self, resp: HeartbeatResponse) -> None:
        code, name = resp.error_code, error_name(resp.error_code)
        action = action_for(code)
        detail = f"{name} on {self.API_NAME}" + (
            f": {resp.error_message}" if resp.error_message else "")
        if action == Action.REDISCOVER_COORDINATOR:
            self.mark_coordinator_unknown(detail)
        elif action in (Action.FENCED, Action.RESET_MEMBER):
            await self._lose(detail)
            self._join(detail)
        elif action in (Action.RAISE, Action.FATAL):
            self._fail(errors.error_for_code(code, detail))
        else:
            self._emit("rebalance", "heartbeat failed; retrying", cause=detail)

    def _fail(self, exc: errors.KafkaError) -> None:
        self._emit("rebalance", f"group {self.group_id} failed", cause=str(exc))
        self.fatal = exc
        self.state = S.FATAL
        self._epoch_moved.set()

    # -- reconciliation ------------------------------------------------------------------------
    def _reconciler_idle(self) -> bool:
        return self._reconciler is None or self._reconciler.done()

    def _start_reconcile(self, target: dict[uuid.UUID, frozenset[int]]) -> None:
        self._target = target
        self._unresolved = {}
        if self.state in (S.JOINING, S.STABLE, S.ACKNOWLEDGING):
            self.state = S.RECONCILING
        if self._reconciler_idle():
            self._reconciler = asyncio.get_running_loop().create_task(self._reconcile_loop())

    async def _reconcile_loop(self) -> None:
        started = time.monotonic()
        while self._target is not None and not self._closing:
            target, self._target = self._target, None
            await self._reconcile(target)
        if not self._closing:   # a rebalance: from the new target to its reconciliation
            self.rebalance_latency.record((time.monotonic() - started) * 1000)

    async def _resolve(self, target: dict[uuid.UUID, frozenset[int]]
                       ) -> dict[uuid.UUID, str]:
        md = self.consumer.metadata
        if any(t not in md.topics_by_id for t in target):
            md.add_topics(self.hooks.subscriptions.topics)
            with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
                await md.refresh("topic ids of the assignment")
        return {t: md.topics_by_id[t] for t in target if t in md.topics_by_id}

    async def _reconcile(self, target: dict[uuid.UUID, frozenset[int]]) -> None:
        incarnation, epoch = self._incarnation, self.generation
        names = await self._resolve(target)
        unresolved = {t: ps for t, ps in target.items() if t not in names and ps}
        wanted = {TopicPartition(names[t], p) for t, ps in target.items() if t in names
                  for p in ps}
        owned = set(self.hooks.subscriptions.assignment)
        revoked, added = owned - wanted, wanted - owned
        if revoked:
            await self.hooks.revoke(revoked, f"member epoch {epoch}")
        if incarnation != self._incarnation:
            return   # the partitions were lost meanwhile: this target is gone
        await self.hooks.assigned(wanted, epoch, False)
        if incarnation != self._incarnation:
            return
        ids = {name: t for t, name in names.items()}
        self._owned = (self._owned[0] + 1,
                       frozenset((ids[tp.topic], tp.partition) for tp in wanted))
        self._unresolved = unresolved
        if unresolved:
            self.consumer.metadata.request_update("topic ids of the assignment")
        if added:
            self.hooks.wake()
        if self.state is S.RECONCILING and self._target is None:
            self.state = S.ACKNOWLEDGING
            self._now.set()

    async def _lose(self, why: str) -> None:
        """Fenced (or gone stale): the partitions may be another member's already."""
        self._incarnation += 1
        self._target, self._unresolved = None, {}
        lost = set(self.hooks.subscriptions.assignment)
        if self._reconciler is not None and not self._reconciler.done() and \
                self._reconciler is not asyncio.current_task():
            await cancel_and_wait(self._reconciler)
        self._owned = (self._owned[0] + 1, frozenset())
        await self.hooks.lost(lost, why)

    # -- epochs for commits ----------------------------------------------------------------
    async def _await_new_epoch(self, sent: int, tps: set[TopicPartition],
                               deadline: float) -> bool:
        """STALE_MEMBER_EPOCH: heartbeat now (a full request, so that the coordinator
        takes the previous epoch with the owned partitions) and wait for the new epoch."""
        owned = set(self.hooks.subscriptions.assignment)
        if self.generation == sent:
            self._sent = None
            self._now.set()
            while self.generation == sent and self.state in IN_GROUP:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                await wait_event(self._epoch_moved, remaining)
        if self.generation <= 0 or self.state not in IN_GROUP:
            raise CommitFailedError(f"member {self.member_id} lost its partitions while "
                                    "waiting for a new member epoch")
        if not (tps & owned) <= set(self.hooks.subscriptions.assignment):
            raise CommitFailedError("the partitions of the commit were revoked while it "
                                    "waited for a new member epoch")
        self._emit("offsets", f"retrying with member epoch {self.generation}",
                   cause=f"STALE_MEMBER_EPOCH (epoch {sent})")
        return True

    # -- leaving -------------------------------------------------------------------------------
    async def _leave(self, reason: str, static_stays: bool = True) -> None:
        """A heartbeat with epoch -1 (-2 for a static member that stays: the coordinator
        keeps its assignment for a while)."""
        epoch = STATIC_LEAVE_EPOCH if self.instance_id is not None and static_stays \
            else LEAVE_EPOCH
        if self.coordinator is not None and self.generation > 0:
            req = self._leave_request(epoch)

            async def send(conn: BrokerConnection) -> int:
                resp: HeartbeatResponse = await conn.request(req, timeout=5)
                return int(resp.error_code)

            failed = await self.send_leave(send)
            if failed is None:
                self._emit("rebalance", f"left group {self.group_id} (member epoch {epoch})",
                           cause=reason)
            else:
                self._emit("rebalance", f"leaving group {self.group_id} failed ({failed}); the "
                           "coordinator drops the member when its session times out",
                           cause=reason)
        self._incarnation += 1
        self._sent = None
        self._set_epoch(epoch)
        self._owned = (self._owned[0] + 1, frozenset())

    def _leave_request(self, epoch: int) -> HeartbeatRequest:
        return ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                             member_epoch=epoch, instance_id=self.instance_id)

    async def close(self, membership: GroupMembershipOperation) -> None:
        self._closing = True
        await cancel_and_wait(self._finding, self._hb_task, self._reconciler)
        if self.state in IN_GROUP:
            # DEFAULT: -1, or -2 for a static member; LEAVE_GROUP: -1 for both
            if membership is not GroupMembershipOperation.REMAIN_IN_GROUP:
                await self._leave("consumer closed", membership is GroupMembershipOperation.DEFAULT)
            self.state = S.UNSUBSCRIBED
