"""Share groups (KIP-932): who held each record, and what became of it, judged from the
members' own histories.

Theory of operation
-------------------
In a share group the partition leader hands each record to one member at a time:
it *acquires* the record for that member, under an acquisition lock of
``share.record.lock.duration.ms`` (``L``), and counts the delivery. The record
stays the member's until the member acknowledges it (ACCEPT: done; REJECT:
archived; RELEASE: available again), its lock expires, or the member's share
session ends (the member closed, or its connection dropped). A record released
once it was delivered ``share.delivery.count.limit`` times is archived; an
accepted or archived record is never delivered again. A leader that moves (or
restarts) reloads the state the share coordinator persisted, where acquired
records are available again: their locks do not survive it, and their delivery
counts may be low (KIP-932: the count is a guard against poison records, not an
exact figure).

The members record each delivery (``Poll``: the record, its delivery count, and
``lock_until``: the earliest its lock can end, the ShareFetch's send time plus
``L``, so that the leader acquired it no sooner than ``lock_until - L``), each
acknowledgement they sent with its outcome (``Ack``), their closes and crashes
(``Assign`` close) and their cuts (``Fault`` member-cut). From these:

* A member *holds* a delivery from its poll until the earliest of: its lock's
  end (``lock_until``), an acknowledgement of it that may have taken effect (sent,
  and not refused by the leader), its close or crash, the start of its cut, or the
  record's next delivery to the same member.
* **share-two-holders**: a record delivered to a member while another held it.
  Fault-free, that is the leader handing out a record it had locked for another
  member. A fault of the cluster (a leader moved, a broker killed, connections
  dropped, responses held...) between the first delivery's acquisition and the
  second delivery may have ended the first lock early, by design: such overlaps
  are counted (``share overlaps in faults``), not reported.
* **share-stale-ack**: the leader took (``ok``) a member's acknowledgement of a
  record that had been delivered to another member since the acknowledging
  member's own delivery, or that it was never delivered: an acknowledgement from
  a member that no longer held the record. No fault excuses it, except where the
  other delivery may have been acquired before the member's own (a stale copy,
  handed out after a leader moved).
* **share-redelivered**: a record delivered again after an ACCEPT or REJECT of it
  succeeded: acquired after the leader answered (``lock_until - L`` after the
  answer), or handed out after it with no fault to explain a stale copy.
* **share-delivery-limit**: a delivery count above ``share.delivery.count.limit``.
* **share-lost**: a record of the final log that was never accepted nor rejected,
  and never delivered up to the limit (then it is archived, and counted as
  ``share archived at the limit``). Deliveries no application saw count toward the
  limit too: a member's library gives back what it fetched of a partition taken
  away from it, or holds at close, and drops what expired in its buffer (``Unseen``,
  from the library's own events). An ACCEPT or REJECT whose outcome is unknown,
  or that was refused although it was sent while the delivery's lock may have held,
  and after which the record never came back, is counted as indeterminate (``share
  finished, outcome unknown``): a refusal is no proof that the leader did not take
  it, as a client sends again what it sent on a connection that dropped before the
  answer (kaflite's does: the leader took an ACCEPT on a ShareFetch, stopped before
  answering, and the ACCEPT sent again was refused; verify seed 8384).

``L`` and the limit are the group's own configs, as the run set and read them back
(``Meta.config["share_group_configs"]``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kaflite.verify._ownership import Finding
from kaflite.verify.history import Ack, Assign, Drain, Fault, Meta, Op, Poll, Unseen

__all__ = ["FAULT_GRACE_S", "LOCK_SLACK_S", "check_share"]

Rec = tuple[str, str, int, int]          # (group, topic, partition, offset)
MEMBER = ("churn", "member-cut", "member-crash", "member-stall")
# how long after a cluster fault heals its effects may still end a lock (a broker back
# from a kill takes a while to lead again; a response held by a delay comes late)
FAULT_GRACE_S = 5.0
# how late a leader's lock timer may fire (its event loop lags): an acknowledgement sent
# that long after the lock's latest end may still have been taken
LOCK_SLACK_S = 1.0


@dataclass(frozen=True)
class _Delivery:
    process: str
    client: str
    time: float
    count: int
    lock_until: float | None
    value: int


class _History:
    """A share group history, indexed: deliveries and acknowledgements per record,
    closes per member, cut windows, and the cluster's faults."""

    def __init__(self, ops: Sequence[Op], lock_s: float) -> None:
        self.lock_s = lock_s
        self.deliveries: dict[Rec, list[_Delivery]] = defaultdict(list)
        self.acks: dict[Rec, list[tuple[Ack, int]]] = defaultdict(list)
        # when, and by which member, a delivery was given back unseen
        self.unseen: dict[Rec, list[tuple[float, str]]] = defaultdict(list)
        self.closes: dict[str, list[float]] = defaultdict(list)     # client -> times
        self.cuts: dict[str, list[float]] = defaultdict(list)       # process -> starts
        self.faults: list[tuple[float, float]] = []
        self.groups: set[tuple[str, str]] = set()                   # (group, topic)
        for op in ops:
            if isinstance(op, Poll) and op.deliveries and op.group is not None:
                self.groups.add((op.group, op.topic))
                for (offset, value), count in zip(op.records, op.deliveries, strict=True):
                    self.deliveries[(op.group, op.topic, op.partition, offset)].append(
                        _Delivery(op.process, op.client or op.process, op.time, count,
                                  op.lock_until, value))
            elif isinstance(op, Ack):
                for offset in op.offsets:
                    self.acks[(op.group, op.topic, op.partition, offset)].append((op, offset))
            elif isinstance(op, Unseen):
                for offset in op.offsets:
                    self.unseen[(op.group, op.topic, op.partition, offset)].append(
                        (op.time, op.client or op.process))
            elif isinstance(op, Assign) and op.type == "close":
                self.closes[op.client or op.process].append(op.time)
            elif isinstance(op, Fault) and op.error is None:
                if op.fault in ("member-cut", "member-crash"):
                    self.cuts[op.process].append(op.start)
                elif op.fault not in MEMBER:
                    self.faults.append((op.start, op.end))
        for ds in self.deliveries.values():
            ds.sort(key=lambda d: d.time)
        for times in (*self.closes.values(), *self.cuts.values()):
            times.sort()

    def acquired_from(self, d: _Delivery) -> float:
        """The earliest the leader can have acquired ``d``."""
        return (d.time if d.lock_until is None else d.lock_until) - self.lock_s

    def faulted(self, start: float, end: float, processes: tuple[str, ...] = ()) -> bool:
        """Whether a cluster fault (or a cut of one of ``processes``) came between."""
        if any(s <= end and start <= e + FAULT_GRACE_S for s, e in self.faults):
            return True
        return any(start <= t <= end for p in processes for t in self.cuts.get(p, ()))

    def hold_end(self, key: Rec, d: _Delivery, later: Sequence[_Delivery]) -> float:
        """The earliest moment ``d`` may have stopped being its member's."""
        ends = [d.time if d.lock_until is None else d.lock_until]
        # any acknowledgement: a refused one may have been applied all the same (sent,
        # its answer lost with the connection, sent again and refused: the
        # leader had taken it the first time)
        ends += [ack.invoked for ack, _ in self.acks.get(key, ())
                 if ack.client == d.client and ack.invoked >= d.time]
        ends += [_after(self.closes.get(d.client, []), d.time)]
        ends += [_after(self.cuts.get(d.process, []), d.time)]
        ends += [o.time for o in later if o.client == d.client]
        return min(ends)


def _after(times: list[float], t: float) -> float:
    i = bisect_left(times, t)
    return times[i] if i < len(times) else float("inf")


def _example(key: Rec, **more: Any) -> dict[str, Any]:
    group, topic, part, offset = key
    return {"group": group, "topic": topic, "partition": part, "offset": offset, **more}


def _holders(h: _History, key: Rec, ds: list[_Delivery], stats: dict[str, int]
             ) -> list[Finding]:
    out: list[Finding] = []
    for i, a in enumerate(ds):
        later = ds[i + 1:]
        end = h.hold_end(key, a, later)
        for b in later:
            if b.client == a.client or b.time >= end:
                continue
            if h.faulted(h.acquired_from(a), b.time, (a.process, b.process)):
                stats["share overlaps in faults"] += 1
                continue
            out.append(Finding("share-two-holders", (key, a.client, b.client), _example(
                key, first=a.client, delivered=round(a.time, 3), count=a.count,
                lock_until=None if a.lock_until is None else round(a.lock_until, 3),
                second=b.client, then=round(b.time, 3), second_count=b.count)))
        nxt = next((b for b in later if b.client != a.client), None)
        if nxt is not None and a.lock_until is not None and nxt.time >= a.lock_until \
                and end == a.lock_until:
            stats["share taken over after a lock expired"] += 1
    return out


def _acks(h: _History, key: Rec, ds: list[_Delivery], limit: int, stats: dict[str, int]
          ) -> tuple[list[Finding], str]:
    """The findings of one record's acknowledgements, and what became of it:
    done | archived | indeterminate | open."""
    out: list[Finding] = []
    # Deliveries no Poll shows count too: those given back after the last one seen, one
    # per member (a member gives back what it holds of a partition taken away once; the
    # same record given back by one member again and again is the fault of seeds 6002
    # and 7002, a member fetching a partition no longer its own, not a count to trust).
    last = max((d.time for d in ds), default=float("-inf"))
    seen = max((d.count for d in ds), default=0)
    more = len({who for t, who in h.unseen.get(key, ()) if t > last})
    fate = "archived" if seen + more >= limit else "open"
    for ack, _ in sorted(h.acks.get(key, ()), key=lambda a: a[0].invoked):
        stats[f"share {ack.type} {ack.outcome}"] += 1
        mine = [d for d in ds if d.client == ack.client and d.time <= ack.invoked]
        if ack.outcome == "ok" and not mine:
            out.append(Finding("share-stale-ack", (key, ack.client, ack.invoked), _example(
                key, member=ack.client, acknowledged=ack.type, at=round(ack.invoked, 3),
                why="never delivered to it")))
            continue
        a = mine[-1] if mine else None
        if ack.outcome == "ok" and a is not None:
            for b in ds:
                if b.client == ack.client or not a.time < b.time < ack.invoked:
                    continue
                if h.acquired_from(b) < a.time and \
                        h.faulted(h.acquired_from(b), b.time, (a.process, b.process)):
                    continue
                out.append(Finding("share-stale-ack", (key, ack.client, ack.invoked),
                                   _example(key, member=ack.client, delivered=round(a.time, 3),
                                            acknowledged=ack.type, at=round(ack.invoked, 3),
                                            but=f"delivered to {b.client} at {b.time:.3f}")))
                break
        if ack.type not in ("accept", "reject"):
            continue
        after = [b for b in ds if b.time > ack.time]
        if ack.outcome != "ok":
            # unknown, or refused: a refusal proves nothing if the acknowledgement may
            # have reached the leader before (sent while its lock may have held)
            if not after and fate == "open" and a is not None \
                    and ack.invoked <= a.time + h.lock_s + LOCK_SLACK_S:
                fate = "indeterminate"
            continue
        fate = "done"
        for b in after:
            if h.acquired_from(b) <= ack.time and \
                    h.faulted(h.acquired_from(b), b.time, (b.process,)):
                continue
            out.append(Finding("share-redelivered", (key, b.client, b.time), _example(
                key, member=ack.client, acknowledged=ack.type, answered=round(ack.time, 3),
                then=f"delivered to {b.client} at {b.time:.3f} (count {b.count})")))
            break
    return out, fate


def check_share(ops: Sequence[Op]) -> tuple[list[Finding], dict[str, int]]:
    """The share-group findings of a history, and its statistics (none without share
    deliveries)."""
    meta = next((op.config for op in ops if isinstance(op, Meta)), {})
    configs = meta.get("share_group_configs") or {}
    lock_s = int(configs.get("share.record.lock.duration.ms", 30_000)) / 1000
    limit = int(configs.get("share.delivery.count.limit", 5))
    h = _History(ops, lock_s)
    if not h.groups:
        return [], {}
    stats: dict[str, int] = defaultdict(int)
    findings: list[Finding] = []
    stats["share deliveries unseen"] = sum(len(ts) for ts in h.unseen.values())
    for key, ds in sorted(h.deliveries.items()):
        stats["share deliveries"] += len(ds)
        stats["share redeliveries"] += sum(1 for d in ds if d.count > 1)
        for d in ds:
            if d.count > limit:
                findings.append(Finding("share-delivery-limit", (key, d.count), _example(
                    key, member=d.client, at=round(d.time, 3), count=d.count, limit=limit)))
        findings += _holders(h, key, ds, stats)
    drained = [op for op in ops if isinstance(op, Drain) and op.isolation == "read_uncommitted"]
    for group, topic in sorted(h.groups):
        for drain in drained:
            if drain.topic != topic:
                continue
            for offset, value in drain.records:
                key = (group, topic, drain.partition, offset)
                ds = h.deliveries.get(key, [])
                more, fate = _acks(h, key, ds, limit, stats)
                findings += more
                if fate == "archived":
                    stats["share archived at the limit"] += 1
                elif fate == "indeterminate":
                    stats["share finished, outcome unknown"] += 1
                elif fate == "open":
                    last = ds[-1] if ds else None
                    findings.append(Finding("share-lost", key, _example(
                        key, value=value, deliveries=len(ds),
                        last=None if last is None else
                        f"{last.client} at {last.time:.3f} (count {last.count})",
                        acks=[f"{a.client} {a.type} {a.outcome}"
                              for a, _ in h.acks.get(key, ())][-3:])))
    return findings, dict(sorted(stats.items()))
