"""The rebalance engine of a classic group: join phases, generations, sessions.

Theory of operation
-------------------
A rebalance, step by step (Kafka's ``GroupMetadataManager``):

1. Something moves the group to PreparingRebalance: a new member, a known
   member with changed metadata, the leader rejoining, a member leaving or
   timing out. Each JoinGroup response is parked (the member's
   ``join_future``).
2. The join phase completes when every member has rejoined, or when the
   rebalance timeout (the largest member's) passes: members that did not
   rejoin are dropped, unless static (KIP-345). An Empty group's first
   rebalance waits ``group.initial.rebalance.delay.ms`` first, again each time
   a member arrives, up to the rebalance timeout.
3. Completing it bumps the generation, picks the protocol every member
   supports with the most first-choice votes, and answers all parked
   JoinGroups; the leader's answer carries every member's metadata. The group
   is CompletingRebalance (or Empty, recorded in the log, if nobody is left).
4. The leader's SyncGroup brings the assignment (``_classic``); once it is
   committed to the log every parked SyncGroup gets its share and the group
   is Stable. Members that send no SyncGroup within the rebalance timeout are
   removed, and a new rebalance starts.

Sessions: each member has one ``heartbeat-<group>-<member>`` deadline,
pushed back by Heartbeat (and by OffsetCommit). When it passes the member is
removed, unless it is parked in a JoinGroup or SyncGroup, which counts as
alive; a member added by a JoinGroup that is still parked has a 5-minute
deadline instead, so a client that vanished mid-rebalance does not linger.

Everything runs on one event loop and nothing here awaits: responses go out
through futures, and writes through ``write`` (a future of the error code).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._group import (
    ClassicGroup,
    ClassicMember,
    GroupState,
    complete_join,
    complete_sync,
)
from kaflite.cluster.groups._records import encode_group_key, encode_group_value
from kaflite.cluster.groups._timer import Timer
from kaflite.cluster.groups.removals import removed
from kaflite.protocol import errors
from kaflite.protocol.messages import JoinGroupResponse, SyncGroupResponse

__all__ = ["NONE", "Rebalancer", "Record", "WriteFn", "hb_key", "join_error"]

log = logging.getLogger("kaflite.cluster.groups")

Record = tuple[bytes, bytes | None]
WriteFn = Callable[[list[Record]], "asyncio.Future[int]"]

S = GroupState
NONE = 0


def join_error(code: int, member_id: str = "") -> JoinGroupResponse:
    return JoinGroupResponse(error_code=code, generation_id=-1, protocol_type=None,
                             protocol_name=None, leader="", member_id=member_id)


def hb_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


class Rebalancer:
    """Join phases, generations and sessions; ``ClassicGroupManager`` adds the requests."""

    def __init__(self, groups: dict[str, ClassicGroup], timer: Timer, config: GroupConfig,
                 write: WriteFn) -> None:
        self.groups = groups
        self.timer = timer
        self.config = config
        self.write = write

    # -- rebalance ---------------------------------------------------------------------------
    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)
        else:
            self._maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str) -> None:
        if group.is_in(S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, errors.RebalanceInProgressError.code)
        group.pending_sync.clear()
        self.timer.cancel(f"sync-{group.group_id}")
        initial = group.is_in(S.EMPTY)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timer.schedule(f"join-{group.group_id}", delay,
                                self._initial_join_callback(group.group_id, delay, remaining))
        group.transition_to(S.PREPARING_REBALANCE, self.timer.now_ms())
        log.info("preparing to rebalance group %s (generation %s): %s", group.group_id,
                 group.generation_id, reason)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(group)
            else:
                self.timer.schedule(f"join-{group.group_id}", group.rebalance_timeout_ms(),
                                    self._complete_join_callback(group.group_id))

    def _initial_join_callback(self, group_id: str, delay: int,
                               remaining: int) -> Callable[[], None]:
        def fire() -> None:
            group = self.groups.get(group_id)
            if group is None or not group.is_in(S.PREPARING_REBALANCE):
                return
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                self.timer.schedule(f"join-{group_id}", new_delay, self._initial_join_callback(
                    group_id, new_delay, max(remaining - delay, 0)))
            else:
                self._complete_join(group)
        return fire

    def _complete_join_callback(self, group_id: str) -> Callable[[], None]:
        def fire() -> None:
            group = self.groups.get(group_id)
            if group is not None and group.is_in(S.PREPARING_REBALANCE):
                self._complete_join(group)
        return fire

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(S.PREPARING_REBALANCE):
            return
        if group.previous_state is S.EMPTY:
            return  # the initial rebalance always waits out its delay
        if group.has_all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> None:
        gid = group.group_id
        self.timer.cancel(f"join-{gid}")
        for m in group.not_yet_rejoined():
            if not m.is_static:
                removed(gid, m.member_id, m.client_id, "classic",
                        "it did not join again within the rebalance timeout")
                group.remove(m.member_id)
                self.timer.cancel(hb_key(gid, m.member_id))
        if group.is_in(S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined: wait another rebalance timeout for sessions to expire.
            self.timer.schedule(f"join-{gid}", group.rebalance_timeout_ms(),
                                self._complete_join_callback(gid))
            return
        group.init_next_generation(self.timer.now_ms())
        if group.is_in(S.EMPTY):
            log.info("group %s is empty at generation %s", gid, group.generation_id)
            self._write_group(group, {})
            return
        log.info("group %s stabilising at generation %s with %s members (protocol %s)", gid,
                 group.generation_id, len(group.members), group.protocol_name)
        for member in group.members.values():
            complete_join(member, self._join_response(group, member, with_members=True))
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation_id
        self.timer.schedule(f"sync-{gid}", group.rebalance_timeout_ms(),
                            lambda: self._expire_pending_sync(gid, generation))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.generation_id != generation or not group.pending_sync:
            return
        if group.is_in(S.COMPLETING_REBALANCE, S.STABLE):
            missing = sorted(group.pending_sync)
            for member_id in missing:
                gone = group.members.get(member_id)
                removed(group_id, member_id, gone.client_id if gone else "", "classic",
                        "it sent no SyncGroup within the rebalance timeout")
                group.remove(member_id)
                self.timer.cancel(hb_key(group_id, member_id))
            self.prepare_rebalance(group, f"members {missing} sent no SyncGroup in time")

    # -- responses -------------------------------------------------------------------------
    def _join_response(self, group: ClassicGroup, member: ClassicMember,
                       with_members: bool) -> JoinGroupResponse:
        leader = with_members and group.is_leader(member.member_id)
        return JoinGroupResponse(
            error_code=NONE, generation_id=group.generation_id,
            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
            leader=group.leader_id or "", skip_assignment=False, member_id=member.member_id,
            members=group.current_member_metadata() if leader else [],
        )

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, code: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, code)

    def _propagate_assignment(self, group: ClassicGroup, code: int) -> None:
        ok = code == NONE
        for member in list(group.members.values()):
            resp = SyncGroupResponse(
                error_code=code, protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None, assignment=member.assignment)
            if complete_sync(member, resp):
                # Sessions that lapsed while parked in SyncGroup restart now.
                self.reschedule_heartbeat(group, member)

    # -- sessions --------------------------------------------------------------------------
    def reschedule_heartbeat(self, group: ClassicGroup, member: ClassicMember,
                             timeout_ms: int | None = None) -> None:
        self.timer.schedule(hb_key(group.group_id, member.member_id),
                            member.session_timeout_ms if timeout_ms is None else timeout_ms,
                            self._expire_callback(group.group_id, member.member_id))

    def _expire_callback(self, group_id: str, member_id: str) -> Callable[[], None]:
        return lambda: self.expire_heartbeat(group_id, member_id)

    def expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(S.DEAD):
            return
        if member_id in group.pending_members:
            group.remove(member_id)
            if group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("member %s of group %s timed out", member_id, group_id)
        self.remove_member(group, member, f"session of {member_id} expired")

    def remove_member(self, group: ClassicGroup, member: ClassicMember, reason: str) -> None:
        """Drop a member (session expiry, fault injection) and rebalance the rest."""
        removed(group.group_id, member.member_id, member.client_id, "classic", reason)
        self.timer.cancel(hb_key(group.group_id, member.member_id))
        complete_join(member, join_error(errors.UnknownMemberIdError.code))
        group.remove(member.member_id)
        if group.is_in(S.STABLE, S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason)
        elif group.is_in(S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    # -- the log -----------------------------------------------------------------------------
    def _write_group(self, group: ClassicGroup, assignment: dict[str, bytes]) -> asyncio.Future[int]:
        record = (encode_group_key(group.group_id), encode_group_value(group.to_record(assignment)))
        return self.write([record])

