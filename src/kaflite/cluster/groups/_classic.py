"""The classic group protocol's requests: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

Theory of operation
-------------------
The coordinator only runs the rebalance (``_rebalance``); the assignment is
computed by the group's leader, a client, so the same code serves eager and
cooperative (KIP-429) consumers alike: a cooperative rebalance is just two
ordinary rebalances in a row.

A member joins without a member id. With JoinGroup v4+ (KIP-394) it gets a
fresh id and MEMBER_ID_REQUIRED, and is "pending" until it joins again with
that id (or its session timeout passes). A static member (KIP-345) gets its id
at once; if its ``group.instance.id`` already had a member, the old id is
fenced (FENCED_INSTANCE_ID) and the new one takes its place, without a
rebalance when nothing else changed. Error codes follow Kafka 4.0's
``GroupMetadataManager`` check for check, in the same order.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from dataclasses import dataclass

from kaflite.cluster.groups._group import (
    ClassicGroup,
    ClassicMember,
    GroupState,
    complete_join,
    complete_sync,
)
from kaflite.cluster.groups._rebalance import (
    NONE,
    Rebalancer,
    Record,
    WriteFn,
    hb_key,
    join_error,
)
from kaflite.cluster.groups._records import encode_group_key, encode_group_value
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    GroupMetadataValue,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kaflite.protocol.messages import leave_group_request as lgq
from kaflite.protocol.messages import leave_group_response as lgr

__all__ = ["ClassicGroupManager", "Record", "RequestContext", "WriteFn", "join_error"]

log = logging.getLogger("kaflite.cluster.groups")

S = GroupState


@dataclass(frozen=True)
class RequestContext:
    client_id: str
    client_host: str
    api_version: int


def new_member_id(prefix: str) -> str:
    """``<client.id or group.instance.id>-<uuid>``, the uuid in Kafka's base64 form."""
    raw = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    return f"{prefix}-{raw}"


class ClassicGroupManager(Rebalancer):
    """One shard's classic groups, driven by requests (and timers, via ``Rebalancer``)."""

    def _future(self) -> asyncio.Future[JoinGroupResponse]:
        return asyncio.get_running_loop().create_future()

    # -- JoinGroup --------------------------------------------------------------------------
    def join(self, ctx: RequestContext, req: JoinGroupRequest) -> asyncio.Future[JoinGroupResponse]:
        fut = self._future()
        cfg = self.config
        if not req.group_id:
            fut.set_result(join_error(errors.InvalidGroupIdError.code, req.member_id))
            return fut
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            fut.set_result(join_error(errors.InvalidSessionTimeoutError.code, req.member_id))
            return fut
        unknown = req.member_id == ""
        group = self.groups.get(req.group_id)
        new_group = group is None
        if group is None:
            if not unknown:
                fut.set_result(join_error(errors.UnknownMemberIdError.code, req.member_id))
                return fut
            group = self.groups[req.group_id] = ClassicGroup(req.group_id)
            group.state_timestamp = self.timer.now_ms()
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            fut.set_result(join_error(errors.GroupMaxSizeReachedError.code))
        elif unknown:
            self._join_new_member(ctx, req, group, fut)
        else:
            self._join_existing_member(ctx, req, group, fut)
        if new_group:
            # Kafka commits a newly created group to the log at once (an empty
            # GroupMetadata record); if that fails the join fails with it.
            empty = GroupMetadataValue(protocol_type="", generation=0, protocol=None,
                                       leader=None, members=[],
                                       current_state_timestamp=group.state_timestamp or -1)
            done = self.write([(encode_group_key(group.group_id), encode_group_value(empty))])

            def on_written(f: asyncio.Future[int]) -> None:
                if f.result() != NONE and not fut.done():
                    fut.set_result(join_error(f.result()))

            done.add_done_callback(on_written)
        return fut

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.is_in(S.EMPTY, S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_in(S.PREPARING_REBALANCE):
            return (member is not None and member.awaiting_join) \
                or group.num_awaiting_join < self.config.max_size
        return member is not None or len(group.members) < self.config.max_size

    def _join_new_member(self, ctx: RequestContext, req: JoinGroupRequest, group: ClassicGroup,
                         fut: asyncio.Future[JoinGroupResponse]) -> None:
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if group.is_in(S.DEAD):
            fut.set_result(join_error(errors.CoordinatorNotAvailableError.code))
            return
        if not group.supports_protocols(req.protocol_type, protocols):
            fut.set_result(join_error(errors.InconsistentGroupProtocolError.code))
            return
        instance_id = req.group_instance_id
        member_id = new_member_id(instance_id if instance_id is not None else ctx.client_id)
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self._replace_static_member(ctx, req, group, existing, member_id, fut)
            else:
                self._add_member(ctx, req, group, member_id, fut)
        elif ctx.api_version >= 4:
            # KIP-394: hand out the id and wait for the member to come back with it.
            group.pending_members.add(member_id)
            self.timer.schedule(hb_key(group.group_id, member_id), req.session_timeout_ms,
                                self._expire_callback(group.group_id, member_id))
            fut.set_result(JoinGroupResponse(error_code=errors.MemberIdRequiredError.code,
                                             generation_id=-1, protocol_name=None,
                                             member_id=member_id))
        else:
            self._add_member(ctx, req, group, member_id, fut)

    def _join_existing_member(self, ctx: RequestContext, req: JoinGroupRequest,
                              group: ClassicGroup, fut: asyncio.Future[JoinGroupResponse]) -> None:
        member_id = req.member_id
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        if group.is_in(S.DEAD):
            fut.set_result(join_error(errors.CoordinatorNotAvailableError.code, member_id))
            return
        if not group.supports_protocols(req.protocol_type, protocols):
            fut.set_result(join_error(errors.InconsistentGroupProtocolError.code, member_id))
            return
        if member_id in group.pending_members:
            self._add_member(ctx, req, group, member_id, fut)
            return
        try:
            group.validate_member(member_id, req.group_instance_id)
        except errors.KafkaError as exc:
            fut.set_result(join_error(exc.code, member_id))
            return
        member = group.members[member_id]
        reason = f"member {member_id} rejoins ({req.reason or 'no reason given'})"
        if group.is_in(S.PREPARING_REBALANCE):
            self._update_member(req, group, member, protocols, fut, reason)
        elif group.is_in(S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # Same metadata: the member missed our JoinGroup response; resend it.
                fut.set_result(self._join_response(group, member, with_members=True))
            else:
                self._update_member(req, group, member, protocols, fut, reason)
        elif group.is_in(S.STABLE):
            # A JoinGroup from the leader always rebalances: that is how the
            # leader asks for a new assignment when topic metadata changes.
            if group.is_leader(member_id) or not member.matches(protocols):
                self._update_member(req, group, member, protocols, fut, reason)
            else:
                fut.set_result(self._join_response(group, member, with_members=False))
        else:
            fut.set_result(join_error(errors.UnknownMemberIdError.code, member_id))

    @staticmethod
    def _timeouts(req: JoinGroupRequest) -> tuple[int, int]:
        rebalance = req.rebalance_timeout_ms if req.rebalance_timeout_ms > 0 \
            else req.session_timeout_ms
        return rebalance, req.session_timeout_ms

    def _add_member(self, ctx: RequestContext, req: JoinGroupRequest, group: ClassicGroup,
                    member_id: str, fut: asyncio.Future[JoinGroupResponse]) -> None:
        rebalance, session = self._timeouts(req)
        member = ClassicMember(member_id, req.group_instance_id, ctx.client_id, ctx.client_host,
                               rebalance, session, req.protocol_type,
                               [(p.name, bytes(p.metadata)) for p in req.protocols], is_new=True)
        if group.is_in(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True  # extends the initial rebalance delay
        group.add(member, fut)
        # A parked JoinGroup cannot heartbeat; a new member that never comes
        # back (its client gave up) is dropped after the new-member timeout.
        self.reschedule_heartbeat(group, member, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, f"adding new member {member_id}")

    def _update_member(self, req: JoinGroupRequest, group: ClassicGroup, member: ClassicMember,
                       protocols: list[tuple[str, bytes]],
                       fut: asyncio.Future[JoinGroupResponse], reason: str) -> None:
        rebalance, session = self._timeouts(req)
        group.update_member(member, protocols, rebalance, session, fut)
        self._maybe_prepare_rebalance_or_complete_join(group, reason)

    def _replace_static_member(self, ctx: RequestContext, req: JoinGroupRequest,
                               group: ClassicGroup, old_id: str, new_id: str,
                               fut: asyncio.Future[JoinGroupResponse]) -> None:
        """KIP-345: a known ``group.instance.id`` joins without its member id."""
        instance_id = req.group_instance_id
        assert instance_id is not None
        current_leader = group.leader_id
        member = group.replace_static_member(instance_id, old_id, new_id)
        self.reschedule_heartbeat(group, member)
        old_protocols = member.protocols
        old_rebalance, old_session = member.rebalance_timeout_ms, member.session_timeout_ms
        rebalance, session = self._timeouts(req)
        protocols = [(p.name, bytes(p.metadata)) for p in req.protocols]
        group.update_member(member, protocols, rebalance, session, fut)
        if group.is_in(S.STABLE):
            if group.protocol_name != group.select_protocol():
                self._maybe_prepare_rebalance_or_complete_join(
                    group, f"static member {instance_id} rejoined with another protocol")
                return
            # Nothing changes for the assignment: persist the new member id and
            # answer with the current generation (no rebalance, KIP-345's point).
            assignment = {m.member_id: m.assignment for m in group.members.values()}
            written = self._write_group(group, assignment)

            def on_written(f: asyncio.Future[int]) -> None:
                code = f.result()
                if code != NONE:
                    group.update_member(member, old_protocols, old_rebalance, old_session, None)
                    old = group.replace_static_member(instance_id, new_id, old_id)
                    self.reschedule_heartbeat(group, old)
                    if not fut.done():
                        fut.set_result(join_error(code))
                elif ctx.api_version >= 9:
                    leader = group.is_leader(new_id)
                    resp = self._join_response(group, member, with_members=leader)
                    resp.skip_assignment = leader
                    complete_join(member, resp)
                else:
                    resp = self._join_response(group, member, with_members=False)
                    resp.leader = current_leader or ""
                    complete_join(member, resp)

            written.add_done_callback(on_written)
        elif group.is_in(S.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old member id: start over.
            self.prepare_rebalance(group, f"static member {instance_id} rejoined mid-sync")
        elif group.is_in(S.PREPARING_REBALANCE):
            self._maybe_complete_join_phase(group)

    # -- SyncGroup --------------------------------------------------------------------------
    def sync(self, req: SyncGroupRequest) -> asyncio.Future[SyncGroupResponse]:
        fut: asyncio.Future[SyncGroupResponse] = asyncio.get_running_loop().create_future()
        group = self.groups.get(req.group_id)
        if not req.group_id:
            fut.set_result(SyncGroupResponse(error_code=errors.InvalidGroupIdError.code))
            return fut
        code = self._validate_sync(group, req)
        if code != NONE or group is None:
            fut.set_result(SyncGroupResponse(error_code=code or errors.UnknownMemberIdError.code))
        elif group.is_in(S.PREPARING_REBALANCE):
            fut.set_result(SyncGroupResponse(error_code=errors.RebalanceInProgressError.code))
        elif group.is_in(S.COMPLETING_REBALANCE):
            member = group.members[req.member_id]
            member.sync_future = fut
            group.pending_sync.discard(req.member_id)
            if group.is_leader(req.member_id):
                self._store_assignment(group, req)
        elif group.is_in(S.STABLE):
            group.pending_sync.discard(req.member_id)
            fut.set_result(SyncGroupResponse(
                error_code=NONE, protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                assignment=group.members[req.member_id].assignment))
        return fut

    def _validate_sync(self, group: ClassicGroup | None, req: SyncGroupRequest) -> int:
        if group is None or group.is_in(S.EMPTY):
            return errors.UnknownMemberIdError.code
        if group.is_in(S.DEAD):
            return errors.CoordinatorNotAvailableError.code
        try:
            group.validate_member(req.member_id, req.group_instance_id)
        except errors.KafkaError as exc:
            return exc.code
        if req.generation_id != group.generation_id:
            return errors.IllegalGenerationError.code
        if (req.protocol_type is not None and group.protocol_type is not None
                and req.protocol_type != group.protocol_type) or \
           (req.protocol_name is not None and group.protocol_name is not None
                and req.protocol_name != group.protocol_name):
            return errors.InconsistentGroupProtocolError.code
        return NONE

    def _store_assignment(self, group: ClassicGroup, req: SyncGroupRequest) -> None:
        assignment = {a.member_id: bytes(a.assignment) for a in req.assignments}
        for member_id in group.members:
            assignment.setdefault(member_id, b"")
        generation = req.generation_id
        written = self._write_group(group, assignment)

        def on_written(f: asyncio.Future[int]) -> None:
            # A member may have joined while the write was in flight: only a
            # group still waiting for this generation's assignment takes it.
            if not group.is_in(S.COMPLETING_REBALANCE) or group.generation_id != generation:
                return
            code = f.result()
            if code != NONE:
                self._reset_and_propagate_assignment_error(group, code)
                self._maybe_prepare_rebalance_or_complete_join(group, f"assignment write: {code}")
                return
            for member in group.members.values():
                member.assignment = assignment.get(member.member_id, b"")
            self._propagate_assignment(group, NONE)
            group.transition_to(S.STABLE, self.timer.now_ms())
            log.info("group %s is stable at generation %s", group.group_id, generation)

        written.add_done_callback(on_written)

    # -- Heartbeat ----------------------------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None,
                  generation_id: int) -> int:
        if not group_id:
            return errors.InvalidGroupIdError.code
        group = self.groups.get(group_id)
        if group is None:
            return errors.UnknownMemberIdError.code
        if group.is_in(S.DEAD):
            return errors.CoordinatorNotAvailableError.code
        try:
            group.validate_member(member_id, instance_id)
        except errors.KafkaError as exc:
            return exc.code
        if generation_id != group.generation_id:
            return errors.IllegalGenerationError.code
        if group.is_in(S.EMPTY):
            return errors.UnknownMemberIdError.code
        self.reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(S.PREPARING_REBALANCE):
            return errors.RebalanceInProgressError.code
        return NONE

    # -- LeaveGroup -------------------------------------------------------------------------
    def leave(self, group_id: str, members: list[lgq.MemberIdentity]
              ) -> tuple[int, list[lgr.MemberResponse]]:
        if not group_id:
            return errors.InvalidGroupIdError.code, []
        group = self.groups.get(group_id)
        if group is None:
            return errors.UnknownMemberIdError.code, []
        if group.is_in(S.DEAD):
            return errors.CoordinatorNotAvailableError.code, []
        out: list[lgr.MemberResponse] = []
        left: list[str] = []
        for ident in members:
            res = lgr.MemberResponse(member_id=ident.member_id,
                                     group_instance_id=ident.group_instance_id, error_code=NONE)
            member_id = ident.member_id
            if member_id == "":
                # Admin removal by group.instance.id (KIP-345) carries no member id.
                static_id = group.static_member_id(ident.group_instance_id)
                if static_id is None:
                    res.error_code = errors.UnknownMemberIdError.code
                else:
                    self._leave(group, static_id)
                    left.append(static_id)
            elif member_id in group.pending_members:
                group.remove(member_id)
                self.timer.cancel(hb_key(group_id, member_id))
                left.append(member_id)
            else:
                try:
                    group.validate_member(member_id, ident.group_instance_id)
                except errors.KafkaError as exc:
                    res.error_code = exc.code
                else:
                    self._leave(group, member_id)
                    left.append(member_id)
            out.append(res)
        if left:
            if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, f"members {left} left")
            elif group.is_in(S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return NONE, out

    def _leave(self, group: ClassicGroup, member_id: str) -> None:
        member = group.members[member_id]
        self.timer.cancel(hb_key(group.group_id, member_id))
        complete_join(member, join_error(errors.UnknownMemberIdError.code))
        group.remove(member_id)

    # -- load / unload ---------------------------------------------------------------------------
    def on_loaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                self.reschedule_heartbeat(group, member)
            if len(group.members) > self.config.max_size:
                self.prepare_rebalance(group, "over group.max.size after loading")

    def on_unloaded(self) -> None:
        """Leadership moved away: every parked response learns NOT_COORDINATOR."""
        code = errors.NotCoordinatorError.code
        for group in self.groups.values():
            for member in group.members.values():
                complete_join(member, join_error(code, member.member_id))
                complete_sync(member, SyncGroupResponse(error_code=code))
            group.previous_state, group.state = group.state, S.DEAD

