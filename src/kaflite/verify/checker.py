"""The history checker: a pure function from a history to the anomalies it holds.

Theory of operation
-------------------
The final drain (``Drain`` operations) is the ground truth: it read every
partition from offset 0 to its end once the nemesis had healed, with
read_uncommitted (the *physical* log) and, for transactional topics, with
read_committed too (the *committed* view). Everything else a process saw or was
told is compared with it, in the terms of Jepsen's Kafka workload
(``jepsen.tests.kafka``):

=======================  =============================================================
lost-write               acknowledged (or once read) but not in the final log; for
                         transactions: in a committed transaction, not visible
duplicate                one value at two offsets (in the committed view where there
                         is one, since an aborted value may be sent again)
inconsistent-offsets     two different values at one offset: an ack, a poll or the
                         two drains disagree with the final log
unexpected               read, but never sent
nonmonotonic-send        one producer's acks in one partition out of its send order
poll-skip                a consumer's consecutive polls of a partition, within one
                         continuous assignment, jumped over offsets of the log
int-poll-skip            the same within one poll
nonmonotonic-poll        a consumer's polls went back (or repeated), within one
                         continuous assignment
int-nonmonotonic-poll    the same within one poll
nonmonotonic-commit      a group's committed offset for a partition went back: a
                         commit invoked after another succeeded, with a lower offset
G1a                      aborted read: a read_committed reader saw a value of an
                         aborted transaction
torn-txn                 a transaction partly visible in the committed view, or a
                         read_committed reader saw part of one within the offsets
                         it consumed
unseen                   in the log, but never read by a group that read the topic
unprocessed              committed in a consume-transform-produce input, never in
                         the committed output
stuck                    a consumer group did not reach a partition's last record within the
                         progress bound after its writers stopped (alive but stuck)
two-owners               a member polled or committed a partition the coordinator had
                         given to another member, and let it go by revoking it or
                         closing, not as lost: it was never told (``_ownership``)
silent-expiry            a member the coordinator removed (session expired, fenced)
                         went on polling or committing a partition it held, long
                         after: it was never told (``_expiry``)
share-two-holders        share groups (``_share``): a record delivered to a member
                         while another still held it (its lock unexpired, not
                         acknowledged, no fault to end the lock early)
share-stale-ack          the leader took an acknowledgement from a member that no
                         longer held the record (delivered to another since)
share-redelivered        a record delivered again after its ACCEPT or REJECT succeeded
share-delivery-limit     a delivery count above share.delivery.count.limit
share-lost               in the log, never accepted, rejected, nor delivered up to the
                         limit (and archived)
incomplete               the history cannot be checked (no drain of a written topic)
=======================  =============================================================

A *continuous assignment* is the time between a consumer's ``assign`` of a
partition and the next ``revoke``/``lost``/``seek``/``close``: a rebalance or a
seek may legitimately move a position anywhere, so skips and regressions count
only inside one.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from kaflite.verify._ownership import check_ownership
from kaflite.verify._share import check_share
from kaflite.verify.history import (
    Assign,
    Commit,
    Drain,
    Fault,
    Meta,
    Op,
    Phase,
    Poll,
    Probe,
    Send,
    Txn,
)

__all__ = ["DESCRIPTIONS", "KINDS", "CheckResult", "check"]

DESCRIPTIONS: dict[str, str] = {
    "lost-write": "acknowledged or read, missing from the final log",
    "duplicate": "one value at two offsets",
    "inconsistent-offsets": "two values at one offset",
    "unexpected": "read but never sent",
    "nonmonotonic-send": "a producer's acks out of send order in a partition",
    "poll-skip": "polls jumped over offsets (one continuous assignment)",
    "int-poll-skip": "one poll jumped over offsets",
    "nonmonotonic-poll": "polls went back (one continuous assignment)",
    "int-nonmonotonic-poll": "one poll went back",
    "nonmonotonic-commit": "a group's committed offset went back",
    "G1a": "aborted read (read_committed saw an aborted value)",
    "torn-txn": "a transaction partly visible",
    "unseen": "in the log, never read by a group that read the topic",
    "unprocessed": "consume-transform-produce input never in the output",
    "stuck": "a group never reached the log end after the faults (alive but stuck)",
    "two-owners": "a member acted on a partition given to another, never told it lost it",
    "silent-expiry": "a member the coordinator removed went on using its partitions",
    "share-two-holders": "a record delivered to a share member while another held it",
    "share-stale-ack": "an acknowledgement taken from a member that no longer held the record",
    "share-redelivered": "a record delivered again after it was accepted or rejected",
    "share-delivery-limit": "a record delivered more times than the group's limit",
    "share-lost": "in the log, never accepted, rejected or archived by a share group",
    "incomplete": "the history cannot be checked",
}
KINDS = tuple(DESCRIPTIONS)
MAX_EXAMPLES = 8

Key = tuple[str, int]          # (topic, partition)
View = dict[Key, list[tuple[int, int]]]   # sorted (offset, value) per partition


@dataclass
class CheckResult:
    valid: bool
    counts: dict[str, int]
    examples: dict[str, list[dict[str, Any]]]
    stats: dict[str, int]
    faults: dict[str, int]
    config: dict[str, Any] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.valid

    def summary(self) -> str:
        bad = ", ".join(f"{k} {n}" for k, n in self.counts.items() if n)
        return "valid" if self.valid else f"INVALID: {bad}"


class _Found:
    def __init__(self) -> None:
        self.counts: dict[str, int] = defaultdict(int)
        self.examples: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._seen: set[tuple[str, Any]] = set()

    def add(self, kind: str, key: Any = None, **example: Any) -> None:
        """Count one anomaly (once per ``key``), keeping the first few examples."""
        if key is not None:
            if (kind, key) in self._seen:
                return
            self._seen.add((kind, key))
        self.counts[kind] += 1
        if len(self.examples[kind]) < MAX_EXAMPLES:
            self.examples[kind].append(example)


class _Log:
    """The drains of one isolation level: values by offset and offsets by value."""

    def __init__(self, drains: Iterable[Drain]) -> None:
        self.parts: View = {}
        self.at: dict[tuple[str, int, int], int] = {}
        self.where: dict[tuple[str, int], list[tuple[int, int]]] = defaultdict(list)
        self.topics: set[str] = set()
        for d in drains:
            recs = sorted(d.records)
            self.parts[(d.topic, d.partition)] = recs
            self.topics.add(d.topic)
            for offset, value in recs:
                self.at[(d.topic, d.partition, offset)] = value
                self.where[(d.topic, value)].append((d.partition, offset))
        self.offsets = {k: [o for o, _ in v] for k, v in self.parts.items()}

    def has(self, topic: str) -> bool:
        return topic in self.topics

    def between(self, key: Key, lo: int, hi: int) -> list[int]:
        """Offsets of the log strictly between ``lo`` and ``hi``."""
        offs = self.offsets.get(key, [])
        return offs[bisect_right(offs, lo):bisect_left(offs, hi)]


def check(ops: Sequence[Op], progress_bound: float | None = None) -> CheckResult:
    """Check a history (see the module docstring); ``progress_bound`` in seconds
    overrides the run's own (``Meta.config["progress_bound"]``, default 30)."""
    meta = next((op.config for op in ops if isinstance(op, Meta)), {})
    bound = float(progress_bound if progress_bound is not None
                  else meta.get("progress_bound", 30.0))
    found = _Found()
    physical = _Log(op for op in ops if isinstance(op, Drain)
                    and op.isolation != "read_committed")
    committed = _Log(op for op in ops if isinstance(op, Drain)
                     and op.isolation == "read_committed")
    sends = [op for op in ops if isinstance(op, Send)]
    polls = [op for op in ops if isinstance(op, Poll)]

    _check_complete(found, sends, physical, committed)
    _check_writes(found, sends, polls, physical, committed)
    _check_send_order(found, sends)
    _check_polls(found, ops, physical, committed)
    _check_commits(found, [op for op in ops if isinstance(op, Commit)])
    _check_txns(found, ops, physical, committed)
    _check_groups(found, ops, physical, committed, bound)
    _check_transforms(found, meta, committed)
    owned, ownership_stats = check_ownership(ops)
    shared, share_stats = check_share(ops)
    for finding in owned + shared:
        found.add(finding.kind, finding.key, **finding.example)

    faults: dict[str, int] = defaultdict(int)
    for op in ops:
        if isinstance(op, Fault) and op.error is None:
            faults[op.fault] += 1
    stats = _stats(ops) | ownership_stats | share_stats
    counts = {k: found.counts.get(k, 0) for k in KINDS}
    return CheckResult(valid=not any(counts.values()), counts=counts,
                       examples={k: v for k, v in found.examples.items() if v},
                       stats=stats, faults=dict(sorted(faults.items())), config=dict(meta))


# -- writes: lost, duplicate, inconsistent, unexpected -----------------------------------

def _check_complete(found: _Found, sends: list[Send], physical: _Log, committed: _Log) -> None:
    if not sends:   # a client that never started must not pass as a clean round
        found.add("incomplete", "", why="nothing was sent: no writer ever started "
                  "(the history's notes say why)")
    acked = {s.topic for s in sends if s.type == "ok"}
    for topic in sorted({s.topic for s in sends}):
        if not physical.has(topic) and not committed.has(topic):
            found.add("incomplete", topic, topic=topic, why="no drain of a written topic")
        elif topic not in acked:
            found.add("incomplete", topic, topic=topic, why="no write was acknowledged")


def _check_writes(found: _Found, sends: list[Send], polls: list[Poll], physical: _Log,
                  committed: _Log) -> None:
    invoked = {(s.topic, s.value) for s in sends if s.type == "invoke"}
    written_topics = {s.topic for s in sends}
    for s in sends:
        if s.type != "ok" or not physical.has(s.topic):
            continue
        places = physical.where.get((s.topic, s.value))
        if not places:
            found.add("lost-write", (s.topic, s.value), topic=s.topic, value=s.value,
                      partition=s.partition, offset=s.offset, how=f"acked to {s.process}")
            continue
        if s.partition is not None and s.offset is not None \
                and (s.partition, s.offset) not in places:
            there = physical.at.get((s.topic, s.partition, s.offset))
            found.add("inconsistent-offsets", ("ack", s.topic, s.value), topic=s.topic,
                      partition=s.partition, offset=s.offset, acked=s.value, log=there,
                      value_in_log_at=places[:3])
    for p in polls:
        log = physical if physical.has(p.topic) else committed
        for offset, value in p.records:
            if p.topic in written_topics and (p.topic, value) not in invoked:
                found.add("unexpected", (p.topic, value), topic=p.topic, value=value,
                          partition=p.partition, offset=offset, process=p.process)
            if not log.has(p.topic):
                continue
            there = log.at.get((p.topic, p.partition, offset))
            if there is None and not log.where.get((p.topic, value)):
                found.add("lost-write", (p.topic, value), topic=p.topic, value=value,
                          partition=p.partition, offset=offset, how=f"read by {p.process}")
            elif there is not None and there != value:
                found.add("inconsistent-offsets", ("poll", p.topic, p.partition, offset),
                          topic=p.topic, partition=p.partition, offset=offset, read=value,
                          log=there, process=p.process)
    for (topic, part, offset), value in committed.at.items():
        there = physical.at.get((topic, part, offset))
        if physical.has(topic) and there != value:
            found.add("inconsistent-offsets", ("drain", topic, part, offset), topic=topic,
                      partition=part, offset=offset, read_committed=value,
                      read_uncommitted=there)
        if topic in written_topics and (topic, value) not in invoked:
            found.add("unexpected", (topic, value), topic=topic, value=value,
                      partition=part, offset=offset, process="drain")
    for (topic, part, offset), value in physical.at.items():
        if topic in written_topics and (topic, value) not in invoked:
            found.add("unexpected", (topic, value), topic=topic, value=value,
                      partition=part, offset=offset, process="drain")
    # An aborted value may be sent again: where there is a committed view, it decides.
    for log, view in ((committed, "read_committed"), (physical, "read_uncommitted")):
        for (topic, value), places in log.where.items():
            if len(places) > 1 and (log is committed or not committed.has(topic)):
                found.add("duplicate", (topic, value), topic=topic, value=value,
                          at=sorted(places)[:4], view=view)


def _check_send_order(found: _Found, sends: list[Send]) -> None:
    # A transformer sends a value again in a later transaction when an earlier one
    # aborted: each acknowledgement belongs to the send of its own transaction.
    order: dict[tuple[str, str, int, str | None], int] = {}
    for i, s in enumerate(sends):
        if s.type == "invoke":
            order.setdefault((s.process, s.topic, s.value, s.txn), i)
    acked: dict[tuple[str, str, int], list[tuple[int, int, int]]] = defaultdict(list)
    for s in sends:
        if s.type == "ok" and s.partition is not None and s.offset is not None:
            seq = order.get((s.process, s.topic, s.value, s.txn))
            if seq is not None:
                acked[(s.process, s.topic, s.partition)].append((seq, s.offset, s.value))
    for (process, topic, part), items in acked.items():
        items.sort()
        for (_, o1, v1), (_, o2, v2) in pairwise(items):
            if o2 <= o1:
                found.add("nonmonotonic-send", process=process, topic=topic, partition=part,
                          sent_first=f"{v1}@{o1}", sent_then=f"{v2}@{o2}")


# -- polls: skips and regressions within a continuous assignment --------------------------

def _segments(ops: Sequence[Op]) -> list[tuple[str, str, Key, list[Poll]]]:
    """(process, isolation, partition, polls) for each continuous assignment."""
    open_: dict[tuple[str, Key], list[Poll]] = {}
    out: list[tuple[str, str, Key, list[Poll]]] = []

    def close(process: str, key: Key) -> None:
        seg = open_.pop((process, key), None)
        if seg:
            out.append((process, seg[0].isolation, key, seg))

    for op in ops:
        if isinstance(op, Assign):
            if op.type == "close":
                for process, key in [k for k in open_ if k[0] == op.process]:
                    close(process, key)
                continue
            for part in op.partitions:
                close(op.process, (op.topic, part))
                if op.type in ("assign", "seek"):
                    open_[(op.process, (op.topic, part))] = []
        elif isinstance(op, Poll) and not op.deliveries:   # a share group's: _share
            open_.setdefault((op.process, (op.topic, op.partition)), []).append(op)
    for process, key in list(open_):
        close(process, key)
    return out


def _check_polls(found: _Found, ops: Sequence[Op], physical: _Log, committed: _Log) -> None:
    for process, isolation, key, polls in _segments(ops):
        log = committed if isolation == "read_committed" and committed.has(key[0]) \
            else physical
        if not log.has(key[0]):
            log = committed
        last: int | None = None
        for poll in polls:
            prev_in_poll: int | None = None
            for offset, _ in poll.records:
                if prev_in_poll is not None:
                    _pair(found, log, key, process, prev_in_poll, offset, "int-")
                elif last is not None:
                    _pair(found, log, key, process, last, offset, "")
                prev_in_poll = offset
            if prev_in_poll is not None:
                last = prev_in_poll


def _pair(found: _Found, log: _Log, key: Key, process: str, a: int, b: int,
          prefix: str) -> None:
    topic, part = key
    if b <= a:
        found.add(f"{prefix}nonmonotonic-poll", process=process, topic=topic, partition=part,
                  offsets=(a, b))
        return
    skipped = log.between(key, a, b)
    if skipped:
        found.add(f"{prefix}poll-skip", process=process, topic=topic, partition=part,
                  offsets=(a, b), skipped=skipped[:5], skipped_count=len(skipped))


# -- commits -----------------------------------------------------------------------------

def _check_commits(found: _Found, commits: list[Commit]) -> None:
    by_part: dict[tuple[str, str, int], list[Commit]] = defaultdict(list)
    for c in commits:
        if c.type == "ok":
            by_part[(c.group, c.topic, c.partition)].append(c)
    for (group, topic, part), items in by_part.items():
        done = sorted(items, key=lambda c: c.time)
        ends = [c.time for c in done]
        best: list[Commit] = []          # prefix maximum of the offsets by completion
        for c in done:
            best.append(c if not best or c.offset > best[-1].offset else best[-1])
        for c in items:
            i = bisect_left(ends, c.invoked)   # commits that completed before c began
            if i and best[i - 1].offset > c.offset:
                earlier = best[i - 1]
                found.add("nonmonotonic-commit", group=group, topic=topic, partition=part,
                          committed=f"{earlier.offset} by {earlier.process}",
                          then=f"{c.offset} by {c.process}")


# -- transactions --------------------------------------------------------------------------

def _check_txns(found: _Found, ops: Sequence[Op], physical: _Log, committed: _Log) -> None:
    values: dict[str, set[tuple[str, int]]] = defaultdict(set)
    for op in ops:
        if isinstance(op, Send) and op.txn is not None and op.type == "invoke":
            values[op.txn].add((op.topic, op.value))
    ends: dict[str, Txn] = {}
    for op in ops:
        if isinstance(op, Txn):
            values[op.txn].update(op.values)
            ends[op.txn] = op
    aborted: set[str] = set()
    for txn, tvs in values.items():
        end = ends.get(txn)
        if not tvs or not all(committed.has(t) for t, _ in tvs):
            continue
        visible = {tv for tv in tvs if committed.where.get(tv)}
        ok_commit = end is not None and end.type == "commit" and end.outcome == "ok"
        abort_ok = end is not None and end.type == "abort" and end.outcome == "ok"
        if abort_ok or (not visible and not ok_commit):
            aborted.add(txn)
        if ok_commit:
            for topic, value in sorted(tvs - visible):
                found.add("lost-write", (topic, value), topic=topic, value=value,
                          how=f"in committed transaction {txn}")
        if visible and visible != tvs and txn not in aborted:
            found.add("torn-txn", ("log", txn), txn=txn, where="committed view",
                      visible=len(visible), of=len(tvs), missing=sorted(tvs - visible)[:5])
    # A value sent again after its transaction aborted (consume-transform-produce
    # retries its input) is also in a later one: the offset its send was acknowledged
    # at tells them apart, and a value no committed transaction holds is aborted.
    txns_of: dict[tuple[str, int], set[str]] = defaultdict(set)
    for txn, tvs in values.items():
        for tv in tvs:
            txns_of[tv].add(txn)
    txn_of = {tv: min(txns - aborted) if txns - aborted else min(txns)
              for tv, txns in txns_of.items()}
    aborted_at = {(op.topic, op.partition, op.offset): op.txn for op in ops
                  if isinstance(op, Send) and op.type == "ok" and op.txn in aborted}

    def aborted_read(topic: str, part: int, offset: int, value: int) -> str | None:
        txn = aborted_at.get((topic, part, offset))
        if txn is not None:
            return txn
        txns = txns_of.get((topic, value), set())
        return min(txns) if txns and txns <= aborted else None

    for txn in sorted(aborted):
        for topic, value in sorted(values[txn]):
            for part, offset in committed.where.get((topic, value), []):
                if aborted_read(topic, part, offset, value) is not None:
                    found.add("G1a", ("drain", txn), txn=txn, topic=topic, value=value,
                              partition=part, offset=offset,
                              process="drain (read_committed)")
    # Readers: aborted reads, and parts of a transaction within a consumed range.
    for process, isolation, key, polls in _segments(ops):
        if isolation != "read_committed":
            continue
        read = [(o, v) for p in polls for o, v in p.records]
        if not read:
            continue
        for offset, value in read:
            txn_id = aborted_read(key[0], key[1], offset, value)
            if txn_id is not None:
                found.add("G1a", (process, key[0], value), process=process, topic=key[0],
                          partition=key[1], offset=offset, value=value, txn=txn_id)
        lo, hi = min(o for o, _ in read), max(o for o, _ in read)
        seen = {v for _, v in read}
        txns = {txn_of[(key[0], v)] for v in seen if (key[0], v) in txn_of}
        for txn in sorted(txns - aborted):
            inside = [(o, v) for t, v in values[txn] if t == key[0]
                      for part, o in committed.where.get((t, v), []) if part == key[1]
                      and lo <= o <= hi]
            missed = [(o, v) for o, v in inside if v not in seen]
            if missed:
                found.add("torn-txn", ("read", process, txn, key), txn=txn, process=process,
                          topic=key[0], partition=key[1], where="read",
                          missed=sorted(missed)[:5])


# -- groups: unseen values and progress ----------------------------------------------------

def _check_groups(found: _Found, ops: Sequence[Op], physical: _Log, committed: _Log,
                  bound: float) -> None:
    healed = next((op.time for op in ops if isinstance(op, Phase) and op.name == "healed"),
                  None)
    writers_done = {op.topic: op.time for op in ops
                    if isinstance(op, Phase) and op.name == "writers-done"}
    read: dict[tuple[str, str], set[int]] = defaultdict(set)
    reach: dict[tuple[str, str, int], list[tuple[float, int, str]]] = defaultdict(list)
    isolation: dict[tuple[str, str], str] = {}
    owner: dict[tuple[str, str, int], str] = {}
    for op in ops:
        if isinstance(op, Poll) and op.group is not None and not op.deliveries:
            read[(op.group, op.topic)].update(v for _, v in op.records)
            isolation[(op.group, op.topic)] = op.isolation
            if op.records:
                reach[(op.group, op.topic, op.partition)].append(
                    (op.time, max(o for o, _ in op.records), op.process))
        elif isinstance(op, Assign) and op.group is not None and op.type == "assign":
            for part in op.partitions:
                owner[(op.group, op.topic, part)] = op.process
    for (group, topic), seen in sorted(read.items()):
        log = committed if isolation[(group, topic)] == "read_committed" \
            and committed.has(topic) else physical
        if not log.has(topic):
            continue
        for (t, part), recs in sorted(log.parts.items()):
            if t != topic or not recs:
                continue
            for offset, value in recs:
                if value not in seen:
                    found.add("unseen", (group, topic, value), group=group, topic=topic,
                              partition=part, offset=offset, value=value)
            start = writers_done.get(topic, healed)
            if start is None:
                continue
            last = recs[-1][0]
            got = reach.get((group, topic, part), [])
            when = min((tm for tm, o, _ in got if o >= last), default=None)
            if when is None or when > start + bound:
                best = max((o for _, o, _ in got), default=-1)
                found.add("stuck", (group, topic, part), group=group, topic=topic,
                          partition=part, last_offset=last, max_read=best,
                          consumer=owner.get((group, topic, part)),
                          reached_after=None if when is None else round(when - start, 1),
                          bound=bound)


def _check_transforms(found: _Found, meta: dict[str, Any], committed: _Log) -> None:
    for source, sink in meta.get("transforms", []):
        if not committed.has(source) or not committed.has(sink):
            continue
        for (topic, value), places in sorted(committed.where.items()):
            if topic == source and places and not committed.where.get((sink, value)):
                part, offset = places[0]
                found.add("unprocessed", (source, value), topic=source, value=value,
                          partition=part, offset=offset, sink=sink)


# -- statistics -----------------------------------------------------------------------------

def _stats(ops: Sequence[Op]) -> dict[str, int]:
    stats: dict[str, int] = defaultdict(int)
    for op in ops:
        if isinstance(op, Send):
            stats[f"send {op.type}"] += 1
        elif isinstance(op, Poll):
            stats["polls"] += 1
            stats["records polled"] += len(op.records)
        elif isinstance(op, Commit):
            stats[f"commit {op.type}"] += 1
            if op.asynchronous:
                stats[f"async commit {op.type}"] += 1
        elif isinstance(op, Txn):
            stats[f"txn {op.type} {op.outcome}"] += 1
        elif isinstance(op, Assign) and op.type in ("assign", "revoke", "lost"):
            stats[f"{op.type}s"] += 1
        elif isinstance(op, Drain):
            stats[f"log records ({op.isolation})"] += len(op.records)
        elif isinstance(op, Probe):
            stats.update(op.stats)
    return dict(sorted(stats.items()))
