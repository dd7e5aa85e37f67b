"""A classic consumer group: its members, generation, protocol and state.

Theory of operation
-------------------
A classic group moves through five states (Kafka's ``ClassicGroupState``)::

    Empty ──join──▶ PreparingRebalance ──all joined──▶ CompletingRebalance
      ▲                   ▲      │                         │
      │                   │      └──no members left──▶ Empty
      │                   └──join/leave/expiry──┐          │ leader's SyncGroup
      │                                          │          ▼ written to the log
      └── (DeleteGroups, offsets expired) Dead ◀─┴──── Stable

``ALLOWED_PREVIOUS`` below is the transition table: a state may only be
entered from the states listed for it. Everything else in this module is
bookkeeping the state machine (``_classic``) reads: which members are waiting
on a JoinGroup or SyncGroup response (their response futures), how many
members support each protocol (for KIP-429-agnostic protocol selection), the
static members by ``group.instance.id`` (KIP-345) and the members that got a
member id but have not joined with it yet (KIP-394 "pending" members).

This module does no I/O and knows nothing of timers or the log.
"""

from __future__ import annotations

import asyncio
import enum
import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kaflite.protocol import errors
from kaflite.protocol.messages import GroupMetadataValue, JoinGroupResponse, SyncGroupResponse
from kaflite.protocol.messages import group_metadata_value as gmv
from kaflite.protocol.messages import join_group_response as jgr
from kaflite.protocol.messages._generated.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kaflite.protocol.primitives import Reader

__all__ = [
    "ALLOWED_PREVIOUS",
    "CONSUMER_PROTOCOL_TYPE",
    "ClassicGroup",
    "ClassicMember",
    "GroupState",
]

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


S = GroupState
ALLOWED_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}

Protocols = list[tuple[str, bytes]]


@dataclass(eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_future: asyncio.Future[JoinGroupResponse] | None = None
    sync_future: asyncio.Future[SyncGroupResponse] | None = None
    # A member added by this join: its session does not run until the join
    # completes, but a 5-minute "new member" deadline removes it if it vanishes.
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None

    def has_satisfied_heartbeat(self) -> bool:
        """May this member's session deadline pass without removing it?"""
        if self.is_new:
            return False
        # A member parked in a rebalance satisfies its heartbeats implicitly.
        return self.awaiting_join or self.awaiting_sync

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: Protocols) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The first protocol of this member's preference list that all members support."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.EMPTY
    state_timestamp: int | None = None
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, ClassicMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_members: set[str] = field(default_factory=set)
    pending_sync: set[str] = field(default_factory=set)
    supported_protocols: Counter[str] = field(default_factory=Counter)
    new_member_added: bool = False
    subscribed_topics: set[str] | None = None

    # -- state -----------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in ALLOWED_PREVIOUS[target]:
            raise RuntimeError(f"group {self.group_id}: illegal transition {self.state} -> {target}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in ALLOWED_PREVIOUS[GroupState.PREPARING_REBALANCE]

    # -- membership ----------------------------------------------------------------------
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def add(self, member: ClassicMember,
            future: asyncio.Future[JoinGroupResponse] | None = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.supported_protocols.update(name for name, _ in member.protocols)
        member.join_future = future
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(name for name, _ in member.protocols)
            self.supported_protocols += Counter()  # drop zero counts
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync.discard(member_id)

    def update_member(self, member: ClassicMember, protocols: Protocols, rebalance_timeout_ms: int,
                      session_timeout_ms: int,
                      future: asyncio.Future[JoinGroupResponse] | None) -> None:
        self.supported_protocols.subtract(name for name, _ in member.protocols)
        self.supported_protocols.update(name for name, _ in protocols)
        self.supported_protocols += Counter()
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        old = member.join_future
        if future is not None and old is not None and old is not future and not old.done():
            # The client gave up on its earlier JoinGroup (a timeout and retry):
            # nothing reads that response, but its handler must not hang.
            old.set_result(JoinGroupResponse(error_code=errors.RebalanceInProgressError.code,
                                             member_id=member.member_id))
        member.join_future = future

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> ClassicMember:
        """KIP-345: a static member rejoined with a new member id; fence the old one."""
        old = self.members.pop(old_id)
        complete_join(old, JoinGroupResponse(error_code=errors.FencedInstanceIdError.code,
                                             member_id=old_id))
        complete_sync(old, SyncGroupResponse(error_code=errors.FencedInstanceIdError.code))
        new = ClassicMember(new_id, instance_id, old.client_id, old.client_host,
                            old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                            old.protocols, old.assignment)
        self.members[new_id] = new
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return new

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID, as Kafka's ``validateMember``."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                raise errors.UnknownMemberIdError(f"instance id {instance_id} is unknown")
            if existing != member_id:
                raise errors.FencedInstanceIdError(
                    f"instance id {instance_id} belongs to member {existing}")
        elif member_id not in self.members:
            raise errors.UnknownMemberIdError(f"member {member_id} is not in group {self.group_id}")

    # -- rebalance bookkeeping ---------------------------------------------------------------
    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def not_yet_rejoined(self) -> list[ClassicMember]:
        return [m for m in self.members.values() if not m.awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ---------------------------------------------------------------------------
    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: Protocols) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols.get(name, 0) == n for name, _ in protocols)

    def select_protocol(self) -> str:
        """The protocol all members support that most members prefer (first vote wins ties)."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, when the group speaks the consumer protocol."""
        if not self.uses_consumer_protocol():
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics.update(subscription_topics(m.metadata(self.protocol_name)))
        except (errors.ProtocolError, KeyError, struct.error):
            return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        # Unknown subscriptions of a consumer-protocol group count as subscribed (Kafka's rule).
        if self.subscribed_topics is None:
            return self.uses_consumer_protocol()
        return topic in self.subscribed_topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def current_member_metadata(self) -> list[jgr.JoinGroupResponseMember]:
        """What the leader's JoinGroup response carries: every member's chosen metadata."""
        assert self.protocol_name is not None
        return [jgr.JoinGroupResponseMember(m.member_id, m.group_instance_id,
                                            m.metadata(self.protocol_name))
                for m in self.members.values()]

    # -- the GroupMetadata record ----------------------------------------------------------
    def to_record(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        members = []
        if self.protocol_name is not None:
            members = [gmv.MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=assignment.get(m.member_id, b""),
            ) for m in self.members.values()]
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "", generation=self.generation_id,
            protocol=self.protocol_name if members else None,
            leader=self.leader_id if members else None,
            current_state_timestamp=-1 if self.state_timestamp is None else self.state_timestamp,
            members=members,
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupMetadataValue) -> ClassicGroup:
        group = cls(group_id)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        ts = value.current_state_timestamp
        group.state_timestamp = ts if ts >= 0 else None
        for m in value.members:
            rebalance = m.rebalance_timeout if m.rebalance_timeout >= 0 else m.session_timeout
            member = ClassicMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   rebalance, m.session_timeout, value.protocol_type,
                                   [(value.protocol or "", bytes(m.subscription))],
                                   bytes(m.assignment))
            group.add(member)
        group.leader_id = value.leader if value.members else None
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed_topics = group.compute_subscribed_topics()
        return group


def complete_join(member: ClassicMember, response: JoinGroupResponse) -> bool:
    fut, member.join_future = member.join_future, None
    if fut is None:
        return False
    if not fut.done():
        fut.set_result(response)
    return True


def complete_sync(member: ClassicMember, response: SyncGroupResponse) -> bool:
    fut, member.sync_future = member.sync_future, None
    if fut is None:
        return False
    if not fut.done():
        fut.set_result(response)
    return True


def subscription_topics(metadata: bytes | bytearray | memoryview) -> Sequence[str]:
    """The topics of a ConsumerProtocolSubscription, read with its v0 prefix (as Kafka does)."""
    r = Reader(memoryview(metadata)[2:])
    return ConsumerProtocolSubscription.read(r, 0).topics
