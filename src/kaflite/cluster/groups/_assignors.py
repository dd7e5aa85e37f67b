"""The server-side assignors of KIP-848 groups: ``uniform`` and ``range``.

The coordinator computes a group's *target assignment* itself, with the
assignor named by ``group.consumer.assignors`` (the first one is the default)
or asked for by the members (``ServerAssignor``, the client's
``group.remote.assignor``; the name most members ask for wins).

``uniform`` (Kafka's ``UniformAssignor``) spreads every subscribed partition
so that member loads differ by at most one wherever the subscriptions allow
it, and is sticky: a partition stays with its previous target owner unless
moving it is needed for balance. It works for identical and for differing
subscriptions alike: members first keep what they had, free partitions go to
the least loaded eligible member, and then partitions move from the most to
the least loaded eligible member until no move lowers the spread.

``range`` (Kafka's ``RangeAssignor``) gives each member, topic by topic, a
contiguous range of partitions: the subscribers of a topic, ordered by member
id (instance id for static members), get ``partitions // members`` each and
the first ``partitions % members`` one more. Topics with the same partition
count are thus co-partitioned.

Assignors are pure functions of the members' subscriptions (by topic id), the
topics' partition counts and the previous target assignment.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kaflite.cluster.groups._consumer_group import Assignment

__all__ = ["ASSIGNORS", "MemberSpec", "range_assign", "uniform_assign"]

TopicPartition = tuple[uuid.UUID, int]


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    instance_id: str | None
    topics: frozenset[uuid.UUID]


AssignFn = Callable[[Sequence[MemberSpec], Mapping[uuid.UUID, int], Mapping[str, Assignment]],
                    dict[str, Assignment]]


def _pack(owned: Mapping[str, set[TopicPartition]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member_id, tps in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, set()).add(p)
        out[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


def uniform_assign(members: Sequence[MemberSpec], topics: Mapping[uuid.UUID, int],
                   previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    order = sorted(members, key=lambda m: m.member_id)
    owned: dict[str, set[TopicPartition]] = {m.member_id: set() for m in order}
    eligible: dict[uuid.UUID, list[str]] = {}
    for m in order:
        for t in m.topics:
            if t in topics:
                eligible.setdefault(t, []).append(m.member_id)
    all_tps = sorted(((t, p) for t in eligible for p in range(topics[t])),
                     key=lambda tp: (str(tp[0]), tp[1]))
    if not all_tps:
        return _pack(owned)
    # 1. Stickiness: keep what each member had, if it still subscribes to it.
    taken: set[TopicPartition] = set()
    for m in order:
        for t, ps in previous.get(m.member_id, {}).items():
            if m.member_id not in eligible.get(t, ()):
                continue
            for p in ps:
                if p < topics[t] and (t, p) not in taken:
                    owned[m.member_id].add((t, p))
                    taken.add((t, p))
    # 2. Free partitions go to the least loaded eligible member.
    for tp in all_tps:
        if tp not in taken:
            best = min(eligible[tp[0]], key=lambda mid: (len(owned[mid]), mid))
            owned[best].add(tp)
            taken.add(tp)
    # 3. Balance: move from the most to the least loaded eligible member. Every move
    #    lowers the sum of squared loads, so the loop ends; the bound is a safety net.
    for _ in range(len(all_tps) ** 2 + 1):
        if not _move_one(order, owned, eligible):
            break
    return _pack(owned)


def _move_one(order: Sequence[MemberSpec], owned: dict[str, set[TopicPartition]],
              eligible: Mapping[uuid.UUID, list[str]]) -> bool:
    for donor in sorted(owned, key=lambda mid: (-len(owned[mid]), mid)):
        load = len(owned[donor])
        for tp in sorted(owned[donor], key=lambda tp: (str(tp[0]), -tp[1])):
            takers = [mid for mid in eligible[tp[0]] if len(owned[mid]) < load - 1]
            if takers:
                taker = min(takers, key=lambda mid: (len(owned[mid]), mid))
                owned[donor].discard(tp)
                owned[taker].add(tp)
                return True
    return False


def range_assign(members: Sequence[MemberSpec], topics: Mapping[uuid.UUID, int],
                 previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    owned: dict[str, set[TopicPartition]] = {m.member_id: set() for m in members}
    for t, count in topics.items():
        subscribers = sorted((m for m in members if t in m.topics),
                             key=lambda m: (m.instance_id or m.member_id, m.member_id))
        if not subscribers:
            continue
        per, extra = divmod(count, len(subscribers))
        start = 0
        for i, m in enumerate(subscribers):
            n = per + (1 if i < extra else 0)
            owned[m.member_id].update((t, p) for p in range(start, start + n))
            start += n
    return _pack(owned)


ASSIGNORS: dict[str, AssignFn] = {"uniform": uniform_assign, "range": range_assign}
