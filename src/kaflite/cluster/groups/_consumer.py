"""ConsumerGroupHeartbeat: KIP-848 groups, served as Kafka 4.0's ``GroupMetadataManager``.

Theory of operation
-------------------
One heartbeat does, in order (each step as records, replayed at once and
written to ``__consumer_offsets`` before the member is answered):

1. Validate the request (Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``)
   and find or create the group and the member; a member epoch that does not
   match is FENCED_MEMBER_EPOCH, except the previous epoch with a subset of the
   member's partitions (its last response was lost). Nothing changes before
   every check has passed.
2. Update the member (MemberMetadata). If its subscription changed, or the
   subscribed topics did (one was created, deleted or grew; regular
   expressions are resolved again by the next heartbeat after the topics
   changed, to the topics its principal may describe, ``_regex``; so topics
   created later join), the group epoch is bumped (PartitionMetadata, GroupMetadata).
3. If the group epoch is ahead of the assignment epoch, the assignor computes
   a new target assignment (TargetAssignmentMember for each member whose
   target changed, TargetAssignmentMetadata).
4. The member takes one reconciliation step (``_reconcile``), recorded as its
   CurrentMemberAssignment. The answer carries its epoch, the heartbeat
   interval, and its assignment only when it changed (or on a full request).

Sessions (``group.consumer.session.timeout.ms``) and rebalance timeouts (the
member's ``RebalanceTimeoutMs`` while it has partitions to revoke) fence a
member: its records are tombstoned and the group epoch bumped, so the others
get its partitions.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kaflite.cluster.groups._assignors import ASSIGNORS, MemberSpec
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._consumer_checks import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    PartitionCheck,
    find_member,
    known_static_member,
    validate_heartbeat,
    validate_offset_commit,
    validate_offset_fetch,
)
from kaflite.cluster.groups._consumer_group import (
    Assignment,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicMeta,
    partitions_of,
)
from kaflite.cluster.groups._consumer_records import (
    ConsumerRecord,
    current_assignment,
    group_epoch,
    group_tombstones,
    member_metadata,
    member_tombstones,
    partition_metadata,
    replay,
    target_epoch,
    target_member,
)
from kaflite.cluster.groups._group import ClassicGroup, GroupState
from kaflite.cluster.groups._rebalance import NONE, Record, WriteFn
from kaflite.cluster.groups._reconcile import Owned, next_assignment, owned_from_request
from kaflite.cluster.groups._records import encode_group_key
from kaflite.cluster.groups._regex import RegexResolver, TopicAllowed
from kaflite.cluster.groups._timer import Timer
from kaflite.cluster.groups.removals import removed

if TYPE_CHECKING:
    from kaflite.cluster.groups._migration import Migration
from kaflite.protocol import errors
from kaflite.protocol.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from kaflite.protocol.messages import consumer_group_heartbeat_response as cghr

__all__ = ["LEAVE_EPOCH", "STATIC_LEAVE_EPOCH", "ConsumerGroupManager", "TopicView"]

log = logging.getLogger("kaflite.cluster.groups")



@dataclass(frozen=True)
class TopicView:
    """What the coordinator needs to know of the cluster's topics."""

    lookup: Callable[[str], TopicMeta | None]
    names: Callable[[], Iterable[str]]          # every topic, internal ones included
    name_of: Callable[[uuid.UUID], str | None]


def session_key(group_id: str, member_id: str) -> str:
    return f"consumer-session-{group_id}-{member_id}"


def rebalance_key(group_id: str, member_id: str) -> str:
    return f"consumer-rebalance-{group_id}-{member_id}"


def classic_keys(group_id: str, member_id: str) -> tuple[str, str]:
    """The join and sync timeouts of a classic member in a consumer group (``_migration``)."""
    return f"consumer-join-{group_id}-{member_id}", f"consumer-sync-{group_id}-{member_id}"


def _norm(a: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: ps for t, ps in a.items() if ps}


def new_member_id() -> str:
    """A member id as Kafka's ``Uuid.randomUuid().toString()`` prints one (URL-safe base64)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class ConsumerGroupManager:
    def __init__(self, groups: dict[str, ConsumerGroup], classic_groups: dict[str, ClassicGroup],
                 timer: Timer, config: GroupConfig, write: WriteFn, topics: TopicView) -> None:
        self.groups = groups
        self.classic_groups = classic_groups
        self.timer = timer
        self.config = config
        self.cfg = config.consumer
        self.write = write
        self.topics = topics
        self.regexes = RegexResolver(topics.names, timer.now_ms)
        self.migration: Migration | None = None   # set by the shard
        # group -> (session timeout, heartbeat interval): its group configs over the
        # broker's settings (the coordinator sets this; read on every heartbeat)
        self.timeouts: Callable[[str], tuple[int, int]] = \
            lambda gid: (self.cfg.session_timeout_ms, self.cfg.heartbeat_interval_ms)

    # -- records -----------------------------------------------------------------------------
    def apply(self, records: list[ConsumerRecord], out: list[Record]) -> None:
        for rec in records:
            replay(self.groups, rec)
            out.append(rec.encode())

    def _write(self, out: list[Record]) -> asyncio.Future[int]:
        if not out:
            fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            fut.set_result(NONE)
            return fut
        return self.write(out)

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------------
    def heartbeat(self, client_id: str, client_host: str, req: ConsumerGroupHeartbeatRequest,
                  version: int, topic_allowed: TopicAllowed = lambda topic: True
                  ) -> asyncio.Future[ConsumerGroupHeartbeatResponse]:
        """``topic_allowed``: whether the caller may DESCRIBE a topic (regular
        expressions are resolved to those topics only, see ``_regex``)."""
        fut: asyncio.Future[ConsumerGroupHeartbeatResponse] = \
            asyncio.get_running_loop().create_future()
        out: list[Record] = []
        try:
            validate_heartbeat(req, version, self.cfg.assignors)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                resp = self._leave(req, out)
            else:
                with self.regexes.asking(topic_allowed):
                    resp = self._heartbeat(client_id, client_host, req, out)
        except errors.KafkaError as exc:
            fut.set_result(ConsumerGroupHeartbeatResponse(error_code=exc.code,
                                                          error_message=exc.message))
            return fut

        def done(f: asyncio.Future[int]) -> None:
            if fut.done():
                return
            code = f.result()
            fut.set_result(resp if code == NONE else ConsumerGroupHeartbeatResponse(
                error_code=code))

        self._write(out).add_done_callback(done)
        return fut

    def consumer_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            if group_id in self.classic_groups:
                raise errors.GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            raise errors.GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        return group

    def _group_for_join(self, group_id: str, joining: bool
                        ) -> tuple[ConsumerGroup, ClassicGroup | None]:
        """The group (a fresh one, or a classic group converted, neither stored yet) and
        the classic group of that id that must go first (empty, or upgraded)."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, None
        classic = self.classic_groups.get(group_id)
        if not joining:
            self.consumer_group(group_id)  # raises GROUP_ID_NOT_FOUND
        if classic is None:
            return ConsumerGroup(group_id), None
        if classic.is_in(GroupState.EMPTY, GroupState.DEAD) and not classic.members:
            return ConsumerGroup(group_id), classic
        if self.migration is not None and self.migration.can_upgrade(classic):
            return self.migration.preview(classic), classic
        raise errors.GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")

    def _heartbeat(self, client_id: str, client_host: str, req: ConsumerGroupHeartbeatRequest,
                   out: list[Record]) -> ConsumerGroupHeartbeatResponse:
        gid = req.group_id
        joining = req.member_epoch == 0
        group, drop_classic = self._group_for_join(gid, joining)
        if len(group.members) >= self.cfg.max_size and \
                (not req.member_id or req.member_id not in group.members):
            raise errors.GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {self.cfg.max_size} "
                "members.")
        member_id = req.member_id or new_member_id()
        owned = owned_from_request(req.topic_partitions)
        member, replaced = find_member(group, member_id, req, owned)
        if member.state is MemberState.UNKNOWN and (owned is None or owned):
            raise errors.FencedMemberEpochError(
                "The consumer group member is in a unknown state. The member must abandon all "
                "its partitions and rejoin.")
        names = member.subscribed_topic_names if req.subscribed_topic_names is None \
            else tuple(sorted(set(req.subscribed_topic_names)))
        regex = member.subscribed_topic_regex if req.subscribed_topic_regex is None \
            else (req.subscribed_topic_regex or None)
        updated = replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor if req.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=names, subscribed_topic_regex=regex,
            client_id=client_id, client_host=client_host, classic=None)
        # -- every check passed: from here on, records ------------------------------------
        if drop_classic is not None and drop_classic.members and self.migration is not None:
            self.migration.upgrade(drop_classic, out)
        elif drop_classic is not None:
            self.classic_groups.pop(gid, None)
            out.append((encode_group_key(gid), None))
            log.info("group %s: the empty classic group becomes a consumer group", gid)
        before = group.members.get(member_id)
        if replaced is not None:
            self.timer.cancel(session_key(gid, replaced.member_id))
            self.timer.cancel(rebalance_key(gid, replaced.member_id))
            self.apply([*member_tombstones(gid, replaced.member_id), member_metadata(gid, updated), target_member(gid, member_id, group.target.get(replaced.member_id, {})), current_assignment(gid, updated)], out)
            before = None
            log.info("group %s: static member %s rejoins as %s", gid, updated.instance_id,
                     member_id)
        current = self.groups.get(gid, group).members.get(member_id)
        bump = False
        if current is None or not current.same_metadata(updated):
            self.apply([member_metadata(gid, updated)], out)
            bump = current is None and replaced is None and bool(names or regex)
            if current is not None and (current.subscribed_topic_names != names
                                        or current.subscribed_topic_regex != regex):
                bump = True
        group = self.groups[gid]
        self._maybe_bump(group, bump, out)
        if group.group_epoch > group.assignment_epoch:
            self._update_target(group, out)
        member = group.members[member_id]
        target = group.target.get(member_id, {})
        if not member.is_reconciled_to(group.assignment_epoch):
            self._reconcile(group, member, target, owned, out)
        member = group.members[member_id]
        session_ms, interval_ms = self.timeouts(gid)
        self.timer.schedule(session_key(gid, member_id), session_ms,
                            self._fence_callback(gid, member_id))
        resp = ConsumerGroupHeartbeatResponse(
            member_id=member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=interval_ms)
        full = joining or (req.rebalance_timeout_ms != -1 and req.topic_partitions is not None
                           and (req.subscribed_topic_names is not None
                                or req.subscribed_topic_regex is not None))
        changed = before is None or _norm(before.assigned) != _norm(member.assigned)
        if full or changed:
            resp.assignment = cghr.Assignment(topic_partitions=[
                cghr.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(member.assigned.items()) if ps])
        return resp

    def _reconcile(self, group: ConsumerGroup, member: ConsumerMember, target: Assignment,
                   owned: Owned, out: list[Record]) -> None:
        nxt = next_assignment(member, group.assignment_epoch, target,
                              group.current_partition_epoch, owned)
        if nxt is member or nxt.same_assignment(member):
            return
        gid, mid = group.group_id, member.member_id
        self.apply([current_assignment(gid, nxt)], out)
        if nxt.classic is not None:
            return
        if nxt.state is MemberState.UNREVOKED_PARTITIONS:
            epoch = nxt.member_epoch
            self.timer.schedule(rebalance_key(gid, mid), max(nxt.rebalance_timeout_ms, 0),
                                lambda: self._rebalance_timeout(gid, mid, epoch))
        else:
            self.timer.cancel(rebalance_key(gid, mid))

    # -- subscriptions and the target assignment ---------------------------------------------
    def member_topics(self, group: ConsumerGroup, member: ConsumerMember) -> set[str]:
        topics = set(member.subscribed_topic_names)
        regex = member.subscribed_topic_regex
        if regex:
            topics |= self.regexes.resolve(group.group_id, regex, group.subscription_metadata)
        return topics

    def subscription_metadata(self, group: ConsumerGroup) -> dict[str, TopicMeta]:
        names: set[str] = set()
        for m in group.members.values():
            names |= self.member_topics(group, m)
        self.regexes.forget(group.group_id, group.regexes())
        out = {}
        for name in sorted(names):
            meta = self.topics.lookup(name)
            if meta is not None:
                out[name] = meta
        return out

    def _maybe_bump(self, group: ConsumerGroup, bump: bool, out: list[Record]) -> None:
        metadata = self.subscription_metadata(group)
        if metadata != group.subscription_metadata:
            self.apply([partition_metadata(group.group_id, metadata)], out)
            bump = True
        if bump:
            self.apply([group_epoch(group.group_id, group.group_epoch + 1)], out)
            log.info("group %s: group epoch bumped to %s", group.group_id, group.group_epoch)

    def _update_target(self, group: ConsumerGroup, out: list[Record]) -> None:
        assignor = group.preferred_assignor(self.cfg.assignors[0])
        if assignor not in self.cfg.assignors:
            assignor = self.cfg.assignors[0]
        meta = group.subscription_metadata
        specs = [MemberSpec(m.member_id, m.instance_id, frozenset(
            meta[n].topic_id for n in self.member_topics(group, m) if n in meta))
            for m in group.members.values()]
        partitions = {t.topic_id: t.partitions for t in meta.values()}
        new = ASSIGNORS[assignor](specs, partitions, group.target)
        gid = group.group_id
        records = [target_member(gid, mid, a) for mid, a in sorted(new.items())
                   if _norm(a) != _norm(group.target.get(mid, {}))]
        records.append(target_epoch(gid, group.group_epoch))
        self.apply(records, out)
        log.info("group %s: new target assignment for epoch %s with the %s assignor", gid,
                 group.group_epoch, assignor)

    # -- leaving and fencing ---------------------------------------------------------------------
    def _leave(self, req: ConsumerGroupHeartbeatRequest,
               out: list[Record]) -> ConsumerGroupHeartbeatResponse:
        group = self.consumer_group(req.group_id)
        resp = ConsumerGroupHeartbeatResponse(member_id=req.member_id,
                                              member_epoch=req.member_epoch)
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise errors.UnknownMemberIdError(
                    f"Member {req.member_id} is not a member of group {group.group_id}.")
            log.info("group %s: member %s left", group.group_id, member.member_id)
            self.fence_records(group, member, out)
            return resp
        member = known_static_member(group, req.member_id, req.instance_id)
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            log.info("group %s: static member %s left for now", group.group_id, req.instance_id)
            self.apply([current_assignment(group.group_id, replace(
                member, member_epoch=STATIC_LEAVE_EPOCH, pending_revocation={}))], out)
            return ConsumerGroupHeartbeatResponse(member_id=member.member_id,
                                                  member_epoch=STATIC_LEAVE_EPOCH)
        self.fence_records(group, member, out)
        return resp

    def fence_records(self, group: ConsumerGroup, member: ConsumerMember,
                      out: list[Record]) -> None:
        """Kafka's ``consumerGroupFenceMember``: drop the member and bump the group epoch
        (or, the last consumer-protocol member leaving classic ones, downgrade the group)."""
        gid, mid = group.group_id, member.member_id
        if self.migration is not None and self.migration.should_downgrade(group, member):
            self.migration.downgrade(group, member, out)
            return
        self.apply(member_tombstones(gid, mid), out)
        metadata = self.subscription_metadata(group)
        if metadata != group.subscription_metadata:
            self.apply([partition_metadata(gid, metadata)], out)
        self.apply([group_epoch(gid, group.group_epoch + 1)], out)
        self.cancel_timers(gid, mid)

    def cancel_timers(self, group_id: str, member_id: str) -> None:
        for key in (session_key(group_id, member_id), rebalance_key(group_id, member_id),
                    *classic_keys(group_id, member_id)):
            self.timer.cancel(key)

    def fence(self, group_id: str, member_id: str, reason: str) -> bool:
        """Fence a member (timers, fault injection); False if there is no such member."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return False
        log.info("group %s: member %s fenced because %s", group_id, member_id, reason)
        removed(group_id, member_id, member.client_id, "consumer", reason)
        out: list[Record] = []
        self.fence_records(group, member, out)
        self._write(out).add_done_callback(lambda f: _log_write(f, group_id, reason))
        return True

    def _rebalance_timeout(self, group_id: str, member_id: str, epoch: int) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if member is not None and member.member_epoch == epoch:
            self.fence(group_id, member_id,
                       f"it failed to transition from epoch {epoch} within "
                       f"{member.rebalance_timeout_ms}ms.")

    def delete_records(self, group: ConsumerGroup) -> list[Record]:
        """DeleteGroups and expiry: tombstones for everything the group wrote (replayed)."""
        out: list[Record] = []
        self.apply(group_tombstones(group), out)
        return out

    # -- offsets (the checks are in ``_consumer_checks``) --------------------------------------
    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, epoch: int,
                               api_version: int, transactional: bool,
                               instance_id: str | None = None) -> PartitionCheck | None:
        return validate_offset_commit(group, member_id, epoch, api_version, transactional,
                                      instance_id, self.topics.lookup)

    validate_offset_fetch = staticmethod(validate_offset_fetch)

    # -- load / unload ------------------------------------------------------------------------
    def on_loaded(self) -> None:
        for gid, group in self.groups.items():
            for mid, member in group.members.items():
                session = member.classic.session_timeout_ms if member.classic is not None \
                    else self.timeouts(gid)[0]
                self.timer.schedule(session_key(gid, mid), session,
                                    self._fence_callback(gid, mid))
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    epoch = member.member_epoch
                    self.timer.schedule(
                        rebalance_key(gid, mid), max(member.rebalance_timeout_ms, 0),
                        self._rebalance_callback(gid, mid, epoch))

    def _fence_callback(self, gid: str, mid: str) -> Callable[[], None]:
        def fire() -> None:
            self.fence(gid, mid, "the member session expired.")
        return fire

    def _rebalance_callback(self, gid: str, mid: str, epoch: int) -> Callable[[], None]:
        return lambda: self._rebalance_timeout(gid, mid, epoch)

    # -- fault injection -----------------------------------------------------------------------
    def bump_epoch(self, group_id: str) -> int:
        """STALE_MEMBER_EPOCH as Kafka produces it: the group epoch moves on and every member
        that can follow without revoking anything is moved there, as if the heartbeat answer
        carrying its new epoch was lost, and its partitions given again at that epoch. Its next
        commit with the old epoch is stale; its next heartbeat (previous epoch, owned
        partitions a subset) learns the new one. Returns the number of members moved."""
        group = self.consumer_group(group_id)
        out: list[Record] = []
        self.apply([group_epoch(group_id, group.group_epoch + 1)], out)
        self._update_target(group, out)
        moved = 0
        for member in list(group.members.values()):
            if member.member_epoch < 0 or member.classic is not None:
                continue
            self._reconcile(group, member, group.target.get(member.member_id, {}),
                            dict(member.assigned), out)
            now = group.members[member.member_id]
            if now.member_epoch != member.member_epoch:
                moved += 1
                # As if its partitions had been given again at the new epoch: a commit with
                # the old epoch is refused (Kafka 4.4 would take it for partitions held since).
                self.apply([current_assignment(group_id, replace(now, epochs={
                    tp: now.member_epoch for a in (now.assigned, now.pending_revocation)
                    for tp in partitions_of(a)}))], out)
        self._write(out).add_done_callback(lambda f: _log_write(f, group_id, "epoch bump"))
        return moved

    def fence_epoch(self, group_id: str, member_id: str) -> bool:
        """FENCED_MEMBER_EPOCH as Kafka produces it: the coordinator's member epoch is two
        steps ahead of the member's (two answers lost), so its next heartbeat is fenced. Its
        rejoin with epoch 0 under the same member id is let in (``check_epoch``)."""
        group = self.consumer_group(group_id)
        member = group.members.get(member_id)
        if member is None:
            return False
        out: list[Record] = []
        ahead = member.with_epoch(member.member_epoch + 1).with_epoch(member.member_epoch + 2)
        self.apply([current_assignment(group_id, ahead)], out)
        self._write(out).add_done_callback(lambda f: _log_write(f, group_id, "member fenced"))
        return True


def _log_write(f: asyncio.Future[int], group_id: str, what: str) -> None:
    code = f.result()
    if code != NONE:
        log.warning("group %s: writing %s failed with error %s", group_id, what, code)
