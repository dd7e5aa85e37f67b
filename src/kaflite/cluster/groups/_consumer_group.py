"""A KIP-848 consumer group: members, epochs, target and current assignments.

Theory of operation
-------------------
A consumer group has three epochs (Kafka's ``ConsumerGroup``):

* the **group epoch**, bumped whenever something the assignment depends on
  changes: a member joins, leaves or changes its subscription, or a subscribed
  topic changes (created, deleted, more partitions);
* the **assignment epoch**, the group epoch the current *target assignment*
  was computed for (by the server-side assignor, ``_assignors``); the group
  is ASSIGNING while it lags behind the group epoch;
* each member's **member epoch**: the epoch of the assignment it has been
  given. A member whose epoch is not the assignment epoch is still
  reconciling (``_reconcile``), and the group is RECONCILING meanwhile.

``partition_epochs`` records, for each partition owned by some member
(assigned or still pending revocation), the member epoch it is owned at. A
partition is given to a new owner only once it is free there: that is what
guarantees that no partition ever has two owners.

This module is pure state. Every change goes through ``replay`` in
``_consumer_records``, for live requests and for the loader alike, so what a
restart loads back is exactly what was served.
"""

from __future__ import annotations

import enum
import uuid
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

__all__ = [
    "Assignment",
    "ClassicInfo",
    "ConsumerGroup",
    "ConsumerGroupState",
    "ConsumerMember",
    "MemberState",
    "TopicMeta",
    "merge",
    "subtract",
]

# topic id -> partitions
Assignment = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Assignment = {}


class MemberState(enum.IntEnum):
    """Kafka's ``MemberState``; the values are those of the CurrentMemberAssignment record."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    def __str__(self) -> str:
        return self.name


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class TopicMeta:
    """A subscribed topic as the group last saw it (ConsumerGroupPartitionMetadata)."""

    topic_id: uuid.UUID
    name: str
    partitions: int


@dataclass(frozen=True)
class ClassicInfo:
    """A member that speaks the classic protocol inside a consumer group (migration)."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicInfo | None = None
    # The current assignment (CurrentMemberAssignment).
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    # The member epoch at which each partition of ``assigned`` and ``pending_revocation``
    # was given to the member (Kafka 4.4's AssignmentEpochs); one missing counts as given
    # at the current member epoch, the strictest choice.
    epochs: Mapping[tuple[uuid.UUID, int], int] = field(default_factory=dict)

    def given_at(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch at which a partition the member holds was given to it."""
        return self.epochs.get((topic_id, partition), self.member_epoch)

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int | None:
        """When the member was given the partition, or None if it does not hold it."""
        if partition in self.assigned.get(topic_id, ()) or \
                partition in self.pending_revocation.get(topic_id, ()):
            return self.given_at(topic_id, partition)
        return None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def same_metadata(self, other: ConsumerMember) -> bool:
        """Everything the MemberMetadata record holds is equal."""
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                self.subscribed_topic_names, self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor, self.classic) == \
            (other.instance_id, other.rack_id, other.client_id, other.client_host,
             other.subscribed_topic_names, other.subscribed_topic_regex,
             other.rebalance_timeout_ms, other.server_assignor, other.classic)

    def same_assignment(self, other: ConsumerMember) -> bool:
        return (self.member_epoch, self.previous_member_epoch, self.state,
                _norm(self.assigned), _norm(self.pending_revocation), self._held_epochs()) == \
            (other.member_epoch, other.previous_member_epoch, other.state,
             _norm(other.assigned), _norm(other.pending_revocation), other._held_epochs())

    def _held_epochs(self) -> dict[tuple[uuid.UUID, int], int | None]:
        return {(t, p): self.assignment_epoch(t, p)
                for a in (self.assigned, self.pending_revocation) for t, p in partitions_of(a)}

    def with_epoch(self, epoch: int) -> ConsumerMember:
        """Kafka's ``updateMemberEpoch``: the previous epoch follows along."""
        return replace(self, previous_member_epoch=self.member_epoch, member_epoch=epoch)


def _norm(a: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    return {t: ps for t, ps in a.items() if ps}


def merge(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    out = dict(_norm(a))
    for t, ps in b.items():
        if ps:
            out[t] = out.get(t, frozenset()) | ps
    return out


def subtract(a: Assignment, b: Assignment) -> dict[uuid.UUID, frozenset[int]]:
    out = {}
    for t, ps in a.items():
        rest = ps - b.get(t, frozenset())
        if rest:
            out[t] = rest
    return out


def partitions_of(a: Assignment) -> Iterable[tuple[uuid.UUID, int]]:
    for t, ps in a.items():
        for p in ps:
            yield t, p


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    subscription_metadata: dict[str, TopicMeta] = field(default_factory=dict)
    # Set when the group is first created in memory and not yet in the log.
    created_ms: int = -1
    dead: bool = False

    # -- state --------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_empty(self) -> bool:
        return not self.members

    # -- members ------------------------------------------------------------------------
    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def put_member(self, member: ConsumerMember) -> None:
        """Add or replace a member, keeping the partition epochs and static ids in step."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._drop_partition_epochs(old)
            if old.instance_id is not None and old.instance_id != member.instance_id \
                    and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._add_partition_epochs(member)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._drop_partition_epochs(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _drop_partition_epochs(self, member: ConsumerMember) -> None:
        for tp in partitions_of(merge(member.assigned, member.pending_revocation)):
            if self.partition_epochs.get(tp) == member.member_epoch:
                del self.partition_epochs[tp]

    def _add_partition_epochs(self, member: ConsumerMember) -> None:
        for tp in partitions_of(merge(member.assigned, member.pending_revocation)):
            self.partition_epochs[tp] = member.member_epoch

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    # -- subscriptions --------------------------------------------------------------------
    def subscribed_topic_names(self) -> Counter[str]:
        """How many members subscribe to each topic by name."""
        counts: Counter[str] = Counter()
        for m in self.members.values():
            counts.update(m.subscribed_topic_names)
        return counts

    def regexes(self) -> set[str]:
        return {m.subscribed_topic_regex for m in self.members.values()
                if m.subscribed_topic_regex}

    def preferred_assignor(self, default: str) -> str:
        """The assignor most members ask for (Kafka's ``computePreferredServerAssignor``)."""
        counts = Counter(m.server_assignor for m in self.members.values() if m.server_assignor)
        if not counts:
            return default
        return max(counts, key=lambda name: counts[name])

    def is_subscribed_to(self, topic: str) -> bool:
        return topic in self.subscription_metadata or topic in self.subscribed_topic_names()

    # -- invariants (tests and fuzzing) --------------------------------------------------------
    def owners(self) -> dict[tuple[uuid.UUID, int], list[str]]:
        """Every owned partition and the members owning it (assigned or pending revocation)."""
        out: dict[tuple[uuid.UUID, int], list[str]] = {}
        for m in self.members.values():
            for tp in partitions_of(merge(m.assigned, m.pending_revocation)):
                out.setdefault(tp, []).append(m.member_id)
        return out

    def check(self) -> list[str]:
        """What is inconsistent in this group (an empty list when all is well)."""
        problems = [f"{tp} owned by {ids}" for tp, ids in self.owners().items() if len(ids) > 1]
        for instance, member_id in self.static_members.items():
            m = self.members.get(member_id)
            if m is None or m.instance_id != instance:
                problems.append(f"static member {instance} -> {member_id} is stale")
        return problems
