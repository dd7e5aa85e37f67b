"""Incremental reconciliation: move one member a step towards its target assignment.

Kafka's ``CurrentAssignmentBuilder``. A member is in one of three states:

* STABLE: it has everything its epoch promised. If a newer target exists, the
  next step is computed at once.
* UNREVOKED_PARTITIONS: it was asked to revoke partitions and still reports
  (in ``TopicPartitions``) owning some of them. It stays at its epoch until it
  stops reporting them; then it moves to the next epoch.
* UNRELEASED_PARTITIONS: it is at the target epoch but some of its target
  partitions are still owned by another member (pending revocation there).
  Each heartbeat retries: a partition is handed over once its old owner has
  released it (``current_partition_epoch`` is -1).

A step: *assigned* = what it owns ∩ its target; *pending revocation* = what it
owns and may no longer keep; *pending assignment* = target - assigned, minus
partitions some other member still owns. Revocations come first: while any
are outstanding, nothing new is given, so a partition never has two owners.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import replace

from kaflite.cluster.groups._consumer_group import (
    Assignment,
    ConsumerMember,
    MemberState,
    merge,
)
from kaflite.protocol import errors
from kaflite.protocol.messages import consumer_group_heartbeat_request as cghq

__all__ = ["next_assignment", "owned_from_request"]

Owned = dict[uuid.UUID, frozenset[int]] | None


def owned_from_request(tps: list[cghq.TopicPartitions] | None) -> Owned:
    if tps is None:
        return None
    out: dict[uuid.UUID, frozenset[int]] = {}
    for tp in tps:
        out[tp.topic_id] = out.get(tp.topic_id, frozenset()) | frozenset(tp.partitions)
    return out


def _owns_any(owned: Owned, partitions: Assignment) -> bool:
    """Does the member still report owning any of ``partitions``? (Unknown: assume it does.)"""
    if owned is None:
        return True
    return any(owned.get(t, frozenset()) & ps for t, ps in partitions.items())


def next_assignment(member: ConsumerMember, target_epoch: int, target: Assignment,
                    partition_epoch: Callable[[uuid.UUID, int], int],
                    owned: Owned) -> ConsumerMember:
    """The member after one reconciliation step (the same object if nothing changes)."""
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _compute(member, member.member_epoch, target_epoch, target, partition_epoch,
                            owned)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        return _compute(member, member.member_epoch + 1, target_epoch, target, partition_epoch,
                        owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _compute(member, member.member_epoch, target_epoch, target, partition_epoch, owned)
    if owned is None or owned:
        raise errors.FencedMemberEpochError(
            "The consumer group member is in a unknown state. The member must abandon all its "
            "partitions and rejoin.")
    return _compute(member, target_epoch, target_epoch, target, partition_epoch, owned)


def _compute(member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment,
             partition_epoch: Callable[[uuid.UUID, int], int], owned: Owned) -> ConsumerMember:
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    pending: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for t in set(target) | set(member.assigned):
        want = target.get(t, frozenset())
        have = member.assigned.get(t, frozenset())
        keep = have & want
        if keep:
            assigned[t] = keep
        if have - keep:
            revoke[t] = have - keep
        free = frozenset(p for p in want - keep if partition_epoch(t, p) == -1)
        if len(free) < len(want - keep):
            unreleased = True
        if free:
            pending[t] = free
    if revoke and _owns_any(owned, revoke):
        new = replace(member, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned,
                      pending_revocation=revoke,
                      epochs=_epochs(member, (assigned, revoke), {}, epoch))
        return _with_epoch(new, epoch)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    new = replace(member, state=state, assigned=merge(assigned, pending) if pending else assigned,
                  pending_revocation={},
                  epochs=_epochs(member, (assigned,), pending, target_epoch))
    return _with_epoch(new, target_epoch)


def _epochs(member: ConsumerMember, kept: tuple[Assignment, ...], given: Assignment,
            epoch: int) -> dict[tuple[uuid.UUID, int], int]:
    """Assignment epochs (Kafka 4.4): a partition the member keeps keeps the epoch it was
    given at; one given now is given at ``epoch``, the member's epoch from this step."""
    out: dict[tuple[uuid.UUID, int], int] = {}
    for a in kept:
        for t, ps in a.items():
            for p in ps:
                out[t, p] = member.given_at(t, p)
    for t, ps in given.items():
        for p in ps:
            out[t, p] = epoch
    return out


def _with_epoch(member: ConsumerMember, epoch: int) -> ConsumerMember:
    """Kafka's ``updateMemberEpoch``: the previous epoch is the one the member had."""
    return member.with_epoch(epoch)
