"""Exclusive ownership of a group's partitions, judged from the members' own callbacks.

Theory of operation
-------------------
Every consumer records each assignment change its library reports (``Assign``:
``assign``, ``revoke``, ``lost``, and ``close`` for all it held), and every poll and
commit. A member *holds* a partition from its ``assign`` to its next ``revoke``,
``lost`` or ``close``. When a second member is assigned a partition the first one
still holds, the two overlap, until either lets it go.

Whether an overlap is an anomaly depends on how the first holder let go:

* ``lost``: the coordinator had fenced it (session expired, a stall past
  ``max.poll.interval.ms``, a FENCED_MEMBER_EPOCH), and it learned so afterwards.
  A member cut off from its coordinator cannot know sooner, under any protocol;
  such overlaps are counted (``fenced overlaps``) and their longest window kept,
  but they are not anomalies.
* ``revoke``, ``close``, or never: it believed it still owned the partition, and
  nothing told it otherwise, while the coordinator had given it away. That is a
  partition with two live owners, which no protocol allows: classic eager and
  cooperative groups hand a partition over only after its owner revoked it (in its
  JoinGroup), and KIP-848 only once the owner's heartbeat no longer reports it. It
  is **two-owners** if the first holder acted on the partition inside the overlap
  (polled records of it, or committed it); an overlap nobody acted on is harmless
  (a crashed process, say, whose ``close`` comes from the runner).

A member expired without being told shows up here too: it keeps polling what the
coordinator gave away, and lets go with ``revoke`` or ``close``, not ``lost``.

The converse is a partition nobody holds while the group has live members (from
their first assignment to their ``close``, less their own cuts and stalls, in which
they cannot hold anything, and less the nemesis's whole-cluster crashes, in which no
coordinator exists to give the partition to anyone): normal during a rebalance, a
stuck group when it lasts.
Each such interval is measured by the time some member was there to take the
partition; ``longest unowned (ms)`` and the count of intervals longer than
``UNOWNED_LIMIT_S`` (a rebalance that waits out a crashed member's session, twice
over) are statistics, as a fault can legitimately hold a rebalance that long.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kaflite.verify._expiry import Removals
from kaflite.verify.history import Assign, Commit, Fault, Op, Poll, Removed, Subscribe

__all__ = ["Finding", "Overlap", "check_ownership"]

GroupKey = tuple[str, str, int]         # (group, topic, partition)
UNOWNED_LIMIT_S = 15.0                  # 2.5 times the checker's session timeouts (6 s)
# a member inside one of these (_churn.MEMBER_FAULTS) is not there to hold anything
ABSENT = ("member-cut", "member-stall")
# nobody can be given anything inside one of these: the whole cluster is down
OUTAGE = "crash"


@dataclass
class Overlap:
    key: GroupKey
    first: str                          # the member that held the partition already
    second: str                         # the member it was assigned to meanwhile
    start: float
    end: float | None = None            # when either let go
    released: str | None = None         # how ``first`` let go: revoke | lost | close
    acted: list[str] = field(default_factory=list)   # what ``first`` did inside it


@dataclass(frozen=True)
class Finding:
    kind: str
    key: Any
    example: dict[str, Any]


def _ordered(ops: Sequence[Op]) -> list[Op]:
    # A commit is placed when it was asked for: that is when the member acted.
    def when(op: Op) -> float:
        return op.invoked if isinstance(op, Commit) else op.time
    return sorted((op for op in ops
                   if isinstance(op, Assign | Poll | Commit | Removed | Subscribe)), key=when)


def _clip(span: tuple[float, float], holes: Sequence[tuple[float, float]]
          ) -> list[tuple[float, float]]:
    """``span`` without the parts that ``holes`` cover."""
    out = [span]
    for h0, h1 in holes:
        nxt: list[tuple[float, float]] = []
        for a, b in out:
            if h1 <= a or h0 >= b:
                nxt.append((a, b))
                continue
            if a < h0:
                nxt.append((a, h0))
            if h1 < b:
                nxt.append((h1, b))
        out = nxt
    return out


def _union(segments: list[tuple[float, float]]) -> float:
    total, reach = 0.0, float("-inf")
    for a, b in sorted(segments):
        a = max(a, reach)
        if b > a:
            total += b - a
            reach = b
    return total


class _Unowned:
    """Time in which a partition had no holder while its group had a member there to
    hold it: from its first assignment to its ``close``, less the member's own cuts and
    stalls (``ABSENT``: it could not hold anything then) and the cluster's outages
    (``OUTAGE``: no coordinator could hand anything out then)."""

    def __init__(self, absent: dict[str, list[tuple[float, float]]],
                 outages: list[tuple[float, float]]) -> None:
        self.absent = absent                                  # process -> windows
        self.outages = outages
        # (group, topic) -> process -> [start, end or None] membership spans
        self.spans: dict[tuple[str, str], dict[str, list[list[float | None]]]] = {}
        self.since: dict[GroupKey, float] = {}                # unowned from
        self.stretches: list[tuple[tuple[str, str], float, float]] = []

    def joined(self, process: str, group: str, topic: str, t: float) -> None:
        spans = self.spans.setdefault((group, topic), {}).setdefault(process, [])
        if not spans or spans[-1][1] is not None:
            spans.append([t, None])

    def assigned(self, key: GroupKey, t: float) -> None:
        start = self.since.pop(key, None)
        if start is not None:
            self.stretches.append((key[:2], start, t))

    def released(self, key: GroupKey, holders: dict[str, float], t: float) -> None:
        if not holders:
            self.since.setdefault(key, t)

    def left(self, process: str, group: str, topic: str, t: float) -> None:
        spans = self.spans.get((group, topic), {}).get(process)
        if spans and spans[-1][1] is None:
            spans[-1][1] = t

    def _available(self, gt: tuple[str, str], start: float, end: float) -> float:
        segments: list[tuple[float, float]] = []
        for process, spans in self.spans.get(gt, {}).items():
            for s0, s1 in spans:
                a, b = max(start, s0 or 0.0), min(end, end if s1 is None else s1)
                if a < b:
                    segments += _clip((a, b), [*self.absent.get(process, ()),
                                                *self.outages])
        return _union(segments)

    def stats(self, end: float) -> dict[str, int]:
        stretches = self.stretches + [(k[:2], t, end) for k, t in self.since.items()]
        spans = [self._available(gt, a, b) for gt, a, b in stretches]
        if not spans:
            return {}
        return {"longest unowned (ms)": round(max(spans) * 1000),
                "unowned beyond a rebalance": sum(1 for d in spans if d > UNOWNED_LIMIT_S)}


def check_ownership(ops: Sequence[Op]) -> tuple[list[Finding], dict[str, int]]:
    """The two-owners findings of a history, and its overlap and unowned statistics."""
    holders: dict[GroupKey, dict[str, float]] = {}
    open_: dict[GroupKey, list[Overlap]] = {}
    done: list[Overlap] = []
    absent: dict[str, list[tuple[float, float]]] = {}
    outages: list[tuple[float, float]] = []
    for op in ops:
        if isinstance(op, Fault) and op.fault in ABSENT:
            absent.setdefault(op.process, []).append((op.start, op.end))
        elif isinstance(op, Fault) and op.fault == OUTAGE:
            outages.append((op.start, op.end))
    unowned = _Unowned(absent, outages)
    removals = Removals(absent)
    client_of: dict[str, str | None] = {}       # process -> its consumer's client.id now
    # (process, group) -> its consumer's client.id and subscription
    subscribed: dict[tuple[str, str], tuple[str | None, tuple[str, ...]]] = {}
    changes = 0
    end = 0.0

    def release(process: str, key: GroupKey, how: str, t: float) -> None:
        holders.get(key, {}).pop(process, None)
        removals.released(process, key, t)
        unowned.released(key, holders.get(key, {}), t)
        still: list[Overlap] = []
        for ov in open_.get(key, []):
            if ov.first == process:
                ov.released = how
                ov.end = t if ov.end is None else ov.end
                done.append(ov)
            else:
                if ov.second == process and ov.end is None:
                    ov.end = t       # the window closes; how ``first`` lets go still counts
                still.append(ov)
        open_[key] = still

    for op in _ordered(ops):
        end = max(end, op.time)
        if isinstance(op, Removed):
            removals.removal(op, [(p, key) for key, hs in holders.items() for p in hs],
                             client_of)
        elif isinstance(op, Subscribe):
            # a topic it dropped is no longer one it is there to hold (its library revokes
            # what it held of it; the revocation is judged like any other)
            known = subscribed.get((op.process, op.group))
            client, before = known or (None, ())
            for topic in set(before) - set(op.topics):
                unowned.left(op.process, op.group, topic, op.time)
            if known is not None and client == op.client and set(before) != set(op.topics):
                changes += 1        # the same consumer, subscribed to other topics
            subscribed[(op.process, op.group)] = (op.client, op.topics)
        elif isinstance(op, Assign):
            if op.group is None or op.type == "seek":
                continue
            client_of[op.process] = op.client
            if op.type == "close":
                for key in [k for k, hs in holders.items()
                            if op.process in hs and k[:2] == (op.group, op.topic)]:
                    release(op.process, key, "close", op.time)
                unowned.left(op.process, op.group, op.topic, op.time)
                continue
            if op.type == "assign":
                unowned.joined(op.process, op.group, op.topic, op.time)
            for part in op.partitions:
                key = (op.group, op.topic, part)
                if op.type == "assign":
                    unowned.assigned(key, op.time)
                    hs = holders.setdefault(key, {})
                    for other in hs:
                        if other != op.process:
                            open_.setdefault(key, []).append(
                                Overlap(key, other, op.process, op.time))
                    hs.setdefault(op.process, op.time)
                else:
                    release(op.process, key, op.type, op.time)
        elif isinstance(op, Poll | Commit):
            group = op.group
            if group is None or (isinstance(op, Poll) and not op.records):
                continue
            key = (group, op.topic, op.partition)
            what = f"polled {len(op.records)}" if isinstance(op, Poll) \
                else f"committed {op.offset}"
            if isinstance(op, Poll) or op.type == "ok":
                removals.acted(op.process, key,
                               op.time if isinstance(op, Poll) else op.invoked, what)
            for ov in open_.get(key, []):
                if ov.first == op.process and ov.end is None:
                    ov.acted.append(what)
    for overlaps in open_.values():
        done.extend(overlaps)

    findings: list[Finding] = []
    stats: dict[str, int] = unowned.stats(end)
    longest_ms = 0
    for ov in done:
        if ov.released == "lost":
            stats["fenced overlaps"] = stats.get("fenced overlaps", 0) + 1
            if ov.end is not None:
                longest_ms = max(longest_ms, round((ov.end - ov.start) * 1000))
            continue
        if not ov.acted:
            continue
        group, topic, part = ov.key
        findings.append(Finding("two-owners", (ov.key, ov.first, ov.second, ov.start), {
            "group": group, "topic": topic, "partition": part, "first": ov.first,
            "second": ov.second, "from": round(ov.start, 3),
            "to": None if ov.end is None else round(ov.end, 3),
            "first_let_go": ov.released or "never", "first_did": ov.acted[:3]}))
    if longest_ms:
        stats["longest fenced overlap (ms)"] = longest_ms
    stats.update(removals.stats())
    if changes:
        stats["subscription changes"] = changes
    findings += [Finding("silent-expiry", key, example) for key, example in removals.findings()]
    return findings, stats
