"""Partition assignors, wire-compatible with Java's and librdkafka's.

Each assignor has Java's protocol name (``range``, ``roundrobin``, ``sticky``,
``cooperative-sticky``), so a group may mix kaflite, Java and librdkafka
members: the coordinator picks a protocol every member lists, and the leader
(whichever client it is) runs that assignor. Subscriptions and assignments
travel as ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``,
each prefixed by its int16 version, exactly as ``ConsumerProtocol`` writes
them.

* range: per topic, members sorted by id; each gets ``n // m`` consecutive
  partitions and the first ``n % m`` members one more (Java's RangeAssignor).
* roundrobin: all partitions of all subscribed topics in order, dealt to the
  sorted members that subscribe to each topic.
* sticky: a balanced assignment that keeps as many of each member's owned
  partitions (from the subscriptions' ``owned_partitions``) as balance allows.
* cooperative-sticky (KIP-429): the sticky assignment, except that a partition
  moving to a new owner is left out this round; its old owner revokes it and
  rejoins, and the follow-up rebalance hands it over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kaflite.protocol.messages import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kaflite.protocol.messages import consumer_protocol_assignment as cpa
from kaflite.protocol.messages import consumer_protocol_subscription as cps
from kaflite.protocol.primitives import Reader

__all__ = ["ASSIGNORS", "Assignor", "MemberSubscription", "decode_assignment",
           "decode_subscription", "encode_assignment", "encode_subscription"]

SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
TP = tuple[str, int]


@dataclass
class MemberSubscription:
    member_id: str
    topics: list[str]
    owned: list[TP] = field(default_factory=list)
    generation: int = -1
    rack: str | None = None
    group_instance_id: str | None = None


def encode_subscription(topics: list[str], owned: list[TP], generation: int,
                        rack: str | None) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(owned):
        by_topic.setdefault(t, []).append(p)
    body = ConsumerProtocolSubscription(
        topics=sorted(topics), user_data=None,
        owned_partitions=[cps.TopicPartition(topic=t, partitions=ps) for t, ps in by_topic.items()],
        generation_id=generation, rack_id=rack or None)
    return SUBSCRIPTION_VERSION.to_bytes(2, "big") + body.encode(SUBSCRIPTION_VERSION)


def _versioned(data: bytes | bytearray | memoryview, top: int) -> tuple[Reader, int]:
    r = Reader(data)
    version = r.int16()
    return r, min(version, top)


def decode_subscription(member_id: str, data: bytes | bytearray | memoryview,
                        instance_id: str | None = None) -> MemberSubscription:
    r, version = _versioned(data, SUBSCRIPTION_VERSION)
    # A newer version than ours starts with our fields; read those (as Java does).
    sub = ConsumerProtocolSubscription.read(r, version)
    owned = [(tp.topic, p) for tp in sub.owned_partitions for p in tp.partitions]
    return MemberSubscription(member_id, list(sub.topics), owned, sub.generation_id,
                              sub.rack_id, instance_id)


def encode_assignment(partitions: list[TP]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    body = ConsumerProtocolAssignment(
        assigned_partitions=[cpa.TopicPartition(topic=t, partitions=ps)
                             for t, ps in by_topic.items()], user_data=None)
    return ASSIGNMENT_VERSION.to_bytes(2, "big") + body.encode(ASSIGNMENT_VERSION)


def decode_assignment(data: bytes | bytearray | memoryview) -> list[TP]:
    if len(data) < 2:
        return []
    r, version = _versioned(data, ASSIGNMENT_VERSION)
    body = ConsumerProtocolAssignment.read(r, version)
    return [(tp.topic, p) for tp in body.assigned_partitions for p in tp.partitions]


class Assignor:
    name = ""
    cooperative = False

    def assign(self, partitions: Mapping[str, int], members: list[MemberSubscription]
               ) -> dict[str, list[TP]]:
        raise NotImplementedError


class RangeAssignor(Assignor):
    name = "range"

    def assign(self, partitions: Mapping[str, int], members: list[MemberSubscription]
               ) -> dict[str, list[TP]]:
        out: dict[str, list[TP]] = {m.member_id: [] for m in members}
        for topic in sorted(partitions):
            subs = sorted(m.member_id for m in members if topic in m.topics)
            if not subs:
                continue
            n = partitions[topic]
            each, extra = divmod(n, len(subs))
            start = 0
            for i, member in enumerate(subs):
                count = each + (1 if i < extra else 0)
                out[member].extend((topic, p) for p in range(start, start + count))
                start += count
        return out


class RoundRobinAssignor(Assignor):
    name = "roundrobin"

    def assign(self, partitions: Mapping[str, int], members: list[MemberSubscription]
               ) -> dict[str, list[TP]]:
        out: dict[str, list[TP]] = {m.member_id: [] for m in members}
        ordered = sorted(members, key=lambda m: m.member_id)
        if not ordered:
            return out
        i = 0
        for topic in sorted(partitions):
            for p in range(partitions[topic]):
                for _ in range(len(ordered)):
                    m = ordered[i % len(ordered)]
                    i += 1
                    if topic in m.topics:
                        out[m.member_id].append((topic, p))
                        break
        return out


class StickyAssignor(Assignor):
    name = "sticky"

    def assign(self, partitions: Mapping[str, int], members: list[MemberSubscription]
               ) -> dict[str, list[TP]]:
        return self._sticky(partitions, members)[0]

    @staticmethod
    def _sticky(partitions: Mapping[str, int], members: list[MemberSubscription]
                ) -> tuple[dict[str, list[TP]], dict[TP, str]]:
        """(assignment, previous owner of every partition that was owned)."""
        ordered = sorted(members, key=lambda m: m.member_id)
        out: dict[str, list[TP]] = {m.member_id: [] for m in ordered}
        all_tps = [(t, p) for t in sorted(partitions) for p in range(partitions[t])
                   if any(t in m.topics for m in ordered)]
        if not ordered:
            return out, {}
        total = len(all_tps)
        quota_lo, extra = divmod(total, len(ordered))
        # Claims from owned partitions; the highest generation wins a conflict.
        owner: dict[TP, tuple[int, str]] = {}
        valid = set(all_tps)
        for m in ordered:
            for tp in m.owned:
                if tp in valid and tp[0] in m.topics:
                    prev = owner.get(tp)
                    if prev is None or m.generation > prev[0]:
                        owner[tp] = (m.generation, m.member_id)
        previous = {tp: mid for tp, (_, mid) in owner.items()}
        by_member: dict[str, list[TP]] = {m.member_id: [] for m in ordered}
        for tp, (_, mid) in sorted(owner.items()):
            by_member[mid].append(tp)
        # Keep owned partitions up to the quota (ceil for the first `extra` members to fill).
        ceil_slots = extra
        for m in ordered:
            mine = by_member[m.member_id]
            limit = quota_lo
            if len(mine) > quota_lo and ceil_slots > 0:
                limit = quota_lo + 1
                ceil_slots -= 1
            out[m.member_id] = mine[:limit]
        taken = {tp for lst in out.values() for tp in lst}
        for tp in all_tps:
            if tp in taken:
                continue
            candidates = [m for m in ordered if tp[0] in m.topics]
            best = min(candidates, key=lambda m: (len(out[m.member_id]), m.member_id))
            out[best.member_id].append(tp)
        return out, previous


class CooperativeStickyAssignor(StickyAssignor):
    name = "cooperative-sticky"
    cooperative = True

    def assign(self, partitions: Mapping[str, int], members: list[MemberSubscription]
               ) -> dict[str, list[TP]]:
        out, previous = self._sticky(partitions, members)
        # KIP-429: a partition changing owner is withheld until its owner has revoked it.
        for mid, tps in out.items():
            out[mid] = [tp for tp in tps if previous.get(tp, mid) == mid]
        return out


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, StickyAssignor,
                        CooperativeStickyAssignor)
}
