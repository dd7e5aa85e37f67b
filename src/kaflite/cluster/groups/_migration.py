"""Online migration between classic and consumer (KIP-848) groups, as Kafka 4.0 does it.

Theory of operation
-------------------
``group.consumer.migration.policy`` (``bidirectional`` by default; ``upgrade``,
``downgrade``, ``disabled``) allows:

* **Upgrade.** A consumer-protocol member joins (ConsumerGroupHeartbeat, epoch 0)
  a classic group that has members and uses the ``consumer`` protocol type. The
  classic group becomes a consumer group (Kafka's ``convertToConsumerGroup``):
  its generation becomes the group epoch and the assignment epoch, each classic
  member becomes a member at that epoch that owns what it was assigned, with its
  subscription and its classic metadata (session timeout, protocols). The
  records: the classic GroupMetadata tombstone, then the consumer group's records.
  The joining member then bumps the epoch as any new member does.
* **Classic members inside a consumer group** (``classicGroupJoinToConsumerGroup``
  and friends). JoinGroup updates the member from its subscription (topics and,
  for cooperative clients, the partitions it still owns), lets the server-side
  assignor compute the target and takes one reconciliation step, and answers at
  once with its member epoch as the generation; SyncGroup answers the member's
  assigned partitions. Heartbeat says REBALANCE_IN_PROGRESS when the group
  epoch is ahead of the member's (or partitions it waits for are now free), so
  the client rejoins: an eager client has revoked everything by then, which is
  what lets the others take its partitions. No partition is given away before
  its owner has released it, as for consumer-protocol members. LeaveGroup and
  session expiry remove the member, and so do Kafka's two timeouts for classic
  members: a member told to rejoin (REBALANCE_IN_PROGRESS) must join again within
  its rebalance timeout, and one that joined must sync within it.
  Static members (``group.instance.id``) as Kafka: a JoinGroup without a member
  id takes the place of the member holding the instance id (it keeps its
  partitions, no rebalance); a request naming another member id than the
  instance id's holder gets FENCED_INSTANCE_ID, an unknown instance id
  UNKNOWN_MEMBER_ID (Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``
  and ``validateConsumerGroupMember``).
* **Downgrade.** When the last consumer-protocol member leaves (or is fenced) and
  classic members remain, the group becomes a classic group again
  (``convertToClassicGroup``): the consumer group's tombstones, a GroupMetadata
  record with the members' current assignments, and a rebalance, so they rejoin.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from kaflite.cluster.groups._consumer import classic_keys, known_static_member
from kaflite.cluster.groups._consumer_group import (
    Assignment,
    ClassicInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
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
from kaflite.cluster.groups._group import ClassicGroup, complete_join, complete_sync
from kaflite.cluster.groups._rebalance import NONE, Record, hb_key, join_error
from kaflite.cluster.groups._records import encode_group_key, encode_group_value
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    GroupMetadataValue,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kaflite.protocol.messages import consumer_protocol_assignment as cpa
from kaflite.protocol.messages import group_metadata_value as gmv
from kaflite.protocol.messages import leave_group_request as lgq
from kaflite.protocol.messages import leave_group_response as lgr
from kaflite.protocol.primitives import Reader

if TYPE_CHECKING:
    from kaflite.cluster.groups._classic import ClassicGroupManager, RequestContext
    from kaflite.cluster.groups._consumer import ConsumerGroupManager

__all__ = ["Migration"]

log = logging.getLogger("kaflite.cluster.groups")

PROTOCOL_TYPE = "consumer"
ASSIGNMENT_VERSION = 0


def decode_subscription(data: bytes) -> tuple[list[str], list[tuple[str, int]]]:
    """(topics, owned partitions) of a ConsumerProtocolSubscription."""
    r = Reader(data)
    version = min(r.int16(), 3)
    sub = ConsumerProtocolSubscription.read(r, version)
    return list(sub.topics), [(tp.topic, p) for tp in sub.owned_partitions for p in tp.partitions]


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    if len(data) < 2:
        return []
    r = Reader(data)
    version = min(r.int16(), 3)
    body = ConsumerProtocolAssignment.read(r, version)
    return [(tp.topic, p) for tp in body.assigned_partitions for p in tp.partitions]


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    body = ConsumerProtocolAssignment(assigned_partitions=[
        cpa.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(partitions.items())
        if ps], user_data=None)
    return ASSIGNMENT_VERSION.to_bytes(2, "big") + body.encode(ASSIGNMENT_VERSION)


class Migration:
    """Upgrades, downgrades, and the classic requests of members of a consumer group."""

    def __init__(self, consumer: ConsumerGroupManager, classic: ClassicGroupManager) -> None:
        self.consumer = consumer
        self.classic = classic
        self.cfg = consumer.cfg

    # -- names <-> ids ----------------------------------------------------------------------
    def _ids(self, pairs: list[tuple[str, int]]) -> dict[uuid.UUID, frozenset[int]]:
        out: dict[uuid.UUID, set[int]] = {}
        for topic, p in pairs:
            meta = self.consumer.topics.lookup(topic)
            if meta is not None:
                out.setdefault(meta.topic_id, set()).add(p)
        return {t: frozenset(ps) for t, ps in out.items()}

    def _names(self, group: ConsumerGroup, a: Assignment) -> dict[str, list[int]]:
        names = {t.topic_id: t.name for t in group.subscription_metadata.values()}
        out: dict[str, list[int]] = {}
        for t, ps in a.items():
            name = names.get(t) or self.consumer.topics.name_of(t)
            if name is not None and ps:
                out[name] = sorted(ps)
        return out

    # -- upgrade ------------------------------------------------------------------------------
    def can_upgrade(self, classic: ClassicGroup) -> bool:
        """Kafka's ``validateOnlineUpgrade``."""
        return (self.cfg.upgrade_enabled and classic.protocol_type == PROTOCOL_TYPE
                and len(classic.members) <= self.cfg.max_size)

    def upgrade_records(self, classic: ClassicGroup) -> list[ConsumerRecord]:
        """The consumer group a classic group becomes (Kafka's ``fromClassicGroup``)."""
        gid, epoch = classic.group_id, classic.generation_id
        records: list[ConsumerRecord] = []
        members = []
        for m in classic.members.values():
            data = m.metadata(classic.protocol_name) if classic.protocol_name and any(
                n == classic.protocol_name for n, _ in m.protocols) else m.protocols[0][1]
            topics, _ = decode_subscription(data)
            assigned = self._ids(decode_assignment(m.assignment))
            member = ConsumerMember(
                m.member_id, instance_id=m.group_instance_id, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=tuple(sorted(set(topics))),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic=ClassicInfo(m.session_timeout_ms, tuple(m.protocols)),
                member_epoch=epoch, previous_member_epoch=epoch, state=MemberState.STABLE,
                assigned=assigned)
            members.append(member)
            records += [member_metadata(gid, member), target_member(gid, m.member_id, assigned),
                        current_assignment(gid, member)]
        tmp: dict[str, ConsumerGroup] = {}
        for rec in records:
            replay(tmp, rec)
        group = tmp.get(gid) or ConsumerGroup(gid)
        metadata = self.consumer.subscription_metadata(group)
        records += [partition_metadata(gid, metadata), group_epoch(gid, epoch),
                    target_epoch(gid, epoch)]
        return records

    def preview(self, classic: ClassicGroup) -> ConsumerGroup:
        """The converted group, in memory only (nothing is stored before the checks pass)."""
        tmp: dict[str, ConsumerGroup] = {}
        for rec in self.upgrade_records(classic):
            replay(tmp, rec)
        return tmp[classic.group_id]

    def upgrade(self, classic: ClassicGroup, out: list[Record]) -> None:
        """Convert ``classic`` into a consumer group: records replayed into ``out``."""
        gid = classic.group_id
        code = errors.RebalanceInProgressError.code
        for m in classic.members.values():
            complete_join(m, join_error(code, m.member_id))
            complete_sync(m, SyncGroupResponse(error_code=code))
            self.classic.timer.cancel(hb_key(gid, m.member_id))
        self.classic.timer.cancel(f"join-{gid}")
        self.consumer.classic_groups.pop(gid, None)
        out.append((encode_group_key(gid), None))
        self.consumer.apply(self.upgrade_records(classic), out)
        for m in classic.members.values():
            self.touch(gid, m.member_id, m.session_timeout_ms)
        log.info("group %s: classic group upgraded to a consumer group at epoch %s (%s "
                 "members)", gid, classic.generation_id, len(classic.members))

    def touch(self, gid: str, mid: str, session_timeout_ms: int) -> None:
        from kaflite.cluster.groups._consumer import session_key

        self.consumer.timer.schedule(session_key(gid, mid), session_timeout_ms,
                                     self.consumer._fence_callback(gid, mid))

    # -- downgrade ----------------------------------------------------------------------------
    def should_downgrade(self, group: ConsumerGroup, leaving: ConsumerMember) -> bool:
        """Kafka's ``validateOnlineDowngrade``: the last consumer-protocol member leaves."""
        rest = [m for m in group.members.values() if m.member_id != leaving.member_id]
        return (self.cfg.downgrade_enabled and leaving.classic is None and bool(rest)
                and all(m.classic is not None for m in rest)
                and len(rest) <= self.consumer.config.max_size)

    def downgrade(self, group: ConsumerGroup, leaving: ConsumerMember, out: list[Record]) -> None:
        """The group becomes a classic group of its classic members, which rebalance."""
        gid = group.group_id
        rest = [m for m in group.members.values() if m.member_id != leaving.member_id]
        protocol = next(n for n, _ in (rest[0].classic.protocols if rest[0].classic else ()))
        value = GroupMetadataValue(
            protocol_type=PROTOCOL_TYPE, generation=group.group_epoch, protocol=protocol,
            leader=rest[0].member_id, current_state_timestamp=self.consumer.timer.now_ms(),
            members=[gmv.MemberMetadata(
                member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.classic.session_timeout_ms if m.classic else 45000,
                subscription=dict(m.classic.protocols).get(protocol, b"") if m.classic else b"",
                assignment=encode_assignment(self._names(group, m.assigned)))
                for m in rest])
        for m in group.members.values():
            self.consumer.cancel_timers(gid, m.member_id)
        self.consumer.apply(group_tombstones(group), out)
        classic = ClassicGroup.from_record(gid, value)
        for m in rest:
            if m.classic is not None:
                classic.members[m.member_id].protocols = list(m.classic.protocols)
        self.consumer.classic_groups[gid] = classic
        out.append((encode_group_key(gid), encode_group_value(value)))
        for member in classic.members.values():
            self.classic.reschedule_heartbeat(classic, member)
        self.classic.prepare_rebalance(classic, f"downgrade group {gid} from consumer to classic")
        log.info("group %s: downgraded to a classic group (%s members)", gid, len(rest))

    # -- classic requests ---------------------------------------------------------------------
    def _write(self, out: list[Record]) -> asyncio.Future[int]:
        return self.consumer._write(out)

    def join(self, ctx: RequestContext, req: JoinGroupRequest, group: ConsumerGroup
             ) -> asyncio.Future[JoinGroupResponse]:
        fut: asyncio.Future[JoinGroupResponse] = asyncio.get_running_loop().create_future()
        cfg = self.classic.config
        gid = group.group_id
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            fut.set_result(join_error(errors.InvalidSessionTimeoutError.code, req.member_id))
            return fut
        protocols = tuple((p.name, bytes(p.metadata)) for p in req.protocols)
        names = {n for n, _ in protocols}
        others = [m.classic for m in group.members.values() if m.classic is not None]
        if req.protocol_type != PROTOCOL_TYPE or not protocols or \
                any(not names & {n for n, _ in c.protocols} for c in others):
            fut.set_result(join_error(errors.InconsistentGroupProtocolError.code, req.member_id))
            return fut
        try:
            topics, owned = decode_subscription(protocols[0][1])
        except Exception:
            fut.set_result(join_error(errors.InconsistentGroupProtocolError.code, req.member_id))
            return fut
        member_id = req.member_id
        if not member_id:
            raw = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            member_id = f"{req.group_instance_id or ctx.client_id}-{raw}"
            if ctx.api_version >= 4 and req.group_instance_id is None:
                fut.set_result(JoinGroupResponse(error_code=errors.MemberIdRequiredError.code,
                                                 generation_id=-1, protocol_name=None,
                                                 member_id=member_id))
                return fut
        try:
            current, replaced = self._joining_member(group, req, member_id)
        except errors.KafkaError as exc:
            fut.set_result(join_error(exc.code, member_id))
            return fut
        if current is None and len(group.members) >= self.cfg.max_size:
            fut.set_result(join_error(errors.GroupMaxSizeReachedError.code, member_id))
            return fut
        rebalance = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 \
            else req.session_timeout_ms
        base = current or ConsumerMember(member_id, member_epoch=0, previous_member_epoch=0)
        updated = replace(base, instance_id=req.group_instance_id, client_id=ctx.client_id,
                          client_host=ctx.client_host,
                          subscribed_topic_names=tuple(sorted(set(topics))),
                          rebalance_timeout_ms=rebalance,
                          classic=ClassicInfo(req.session_timeout_ms, protocols))
        out: list[Record] = []
        if replaced is not None:
            # the new instance takes the old one's place: its partitions, its target
            self.consumer.cancel_timers(gid, replaced.member_id)
            self.consumer.apply([
                *member_tombstones(gid, replaced.member_id), member_metadata(gid, updated),
                target_member(gid, member_id, group.target.get(replaced.member_id, {})),
                current_assignment(gid, updated)], out)
            group = self.consumer.groups[gid]
            log.info("group %s: static member %s rejoins as %s (classic protocol)", gid,
                     updated.instance_id, member_id)
        if current is None or not current.same_metadata(updated):
            self.consumer.apply([member_metadata(gid, updated)], out)
        bump = current is None or current.subscribed_topic_names != updated.subscribed_topic_names
        group = self.consumer.groups[gid]
        self.consumer._maybe_bump(group, bump, out)
        if group.group_epoch > group.assignment_epoch:
            self.consumer._update_target(group, out)
        member = group.members[member_id]
        self.consumer._reconcile(group, member, group.target.get(member_id, {}),
                                 self._ids(owned), out)
        member = group.members[member_id]
        self.touch(gid, member_id, req.session_timeout_ms)
        join_key, sync_key = classic_keys(gid, member_id)
        self.consumer.timer.cancel(join_key)
        self.consumer.timer.schedule(sync_key, rebalance, self._fence_later(
            gid, member_id, "the member failed to sync within timeout"))
        protocol = protocols[0][0]
        resp = JoinGroupResponse(error_code=NONE, generation_id=member.member_epoch,
                                 protocol_type=PROTOCOL_TYPE, protocol_name=protocol,
                                 leader="", member_id=member_id, members=[])

        def done(f: asyncio.Future[int]) -> None:
            if not fut.done():
                fut.set_result(resp if f.result() == NONE else join_error(f.result(), member_id))
        self._write(out).add_done_callback(done)
        return fut

    def _joining_member(self, group: ConsumerGroup, req: JoinGroupRequest, member_id: str
                        ) -> tuple[ConsumerMember | None, ConsumerMember | None]:
        """The member a JoinGroup is from (None: a new one), and the static member it
        replaces, if any (Kafka's ``getOrMaybeSubscribeStaticConsumerGroupMember``)."""
        instance_id = req.group_instance_id
        if instance_id is not None:
            existing = group.static_member(instance_id)
            if not req.member_id:
                if existing is None:
                    return None, None
                return replace(existing, member_id=member_id, member_epoch=0,
                               previous_member_epoch=0), existing
            current: ConsumerMember | None = known_static_member(group, member_id, instance_id)
        else:
            current = group.members.get(member_id)
        if current is not None and current.classic is None:
            raise errors.UnknownMemberIdError(
                f"Member {member_id} does not use the classic protocol.")
        return current, None

    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None = None) -> ConsumerMember:
        """Kafka's ``validateConsumerGroupMember`` for a classic request."""
        member = group.members.get(member_id) if instance_id is None \
            else known_static_member(group, member_id, instance_id)
        if member is None or member.classic is None:
            raise errors.UnknownMemberIdError(
                f"Member {member_id} does not use the classic protocol.")
        return member

    def _fence_later(self, gid: str, mid: str, reason: str) -> Callable[[], None]:
        def fire() -> None:
            self.consumer.fence(gid, mid, reason)
        return fire

    def _rebalance_in_progress(self, group: ConsumerGroup, member: ConsumerMember) -> int:
        """REBALANCE_IN_PROGRESS, and the member must join again within its rebalance
        timeout (Kafka's ``scheduleConsumerGroupJoinTimeoutIfAbsent``)."""
        join_key, _ = classic_keys(group.group_id, member.member_id)
        if not self.consumer.timer.is_scheduled(join_key):
            self.consumer.timer.schedule(join_key, member.rebalance_timeout_ms, self._fence_later(
                group.group_id, member.member_id,
                "the classic member failed to join within the rebalance timeout"))
        return errors.RebalanceInProgressError.code

    def _rejoin_needed(self, group: ConsumerGroup, member: ConsumerMember) -> bool:
        """Kafka's ``throwIfRebalanceInProgress``, and partitions it waits for now free."""
        if group.group_epoch > member.member_epoch and \
                member.state is not MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            return any(group.current_partition_epoch(t, p) == -1
                       for t, ps in target.items() for p in ps
                       if p not in member.assigned.get(t, frozenset()))
        return False

    def sync(self, req: SyncGroupRequest, group: ConsumerGroup) -> SyncGroupResponse:
        try:
            member = self._classic_member(group, req.member_id, req.group_instance_id)
        except errors.KafkaError as exc:
            return SyncGroupResponse(error_code=exc.code)
        if req.generation_id != member.member_epoch:
            return SyncGroupResponse(error_code=errors.IllegalGenerationError.code)
        assert member.classic is not None
        names = {n for n, _ in member.classic.protocols}
        if (req.protocol_type is not None and req.protocol_type != PROTOCOL_TYPE) or \
                (req.protocol_name is not None and req.protocol_name not in names):
            return SyncGroupResponse(error_code=errors.InconsistentGroupProtocolError.code)
        if self._rejoin_needed(group, member):
            return SyncGroupResponse(error_code=self._rebalance_in_progress(group, member))
        self.consumer.timer.cancel(classic_keys(group.group_id, member.member_id)[1])
        self.touch(group.group_id, member.member_id, member.classic.session_timeout_ms)
        return SyncGroupResponse(
            error_code=NONE, protocol_type=PROTOCOL_TYPE,
            protocol_name=req.protocol_name or member.classic.protocols[0][0],
            assignment=encode_assignment(self._names(group, member.assigned)))

    def heartbeat(self, group: ConsumerGroup, member_id: str, generation_id: int,
                  instance_id: str | None = None) -> int:
        try:
            member = self._classic_member(group, member_id, instance_id)
        except errors.KafkaError as exc:
            return exc.code
        if generation_id != member.member_epoch:
            return errors.IllegalGenerationError.code
        assert member.classic is not None
        self.touch(group.group_id, member_id, member.classic.session_timeout_ms)
        if self._rejoin_needed(group, member):
            return self._rebalance_in_progress(group, member)
        return NONE

    def leave(self, group: ConsumerGroup, members: list[lgq.MemberIdentity]
              ) -> tuple[list[lgr.MemberResponse], asyncio.Future[int]]:
        out: list[Record] = []
        results = []
        for ident in members:
            res = lgr.MemberResponse(member_id=ident.member_id,
                                     group_instance_id=ident.group_instance_id, error_code=NONE)
            member = group.members.get(ident.member_id) if ident.group_instance_id is None \
                else group.static_member(ident.group_instance_id)
            if member is None:
                res.error_code = errors.UnknownMemberIdError.code
            elif ident.member_id and member.member_id != ident.member_id:
                res.error_code = errors.FencedInstanceIdError.code
            else:
                log.info("group %s: classic member %s left", group.group_id, member.member_id)
                self.consumer.fence_records(group, member, out)
            results.append(res)
            group = self.consumer.groups.get(group.group_id, group)
        return results, self._write(out)
