"""The nemesis: random, combined faults from a seed, applied to the cluster process.

Theory of operation
-------------------
``plan(rng, kinds, seconds, targets)`` is pure: from the seed it draws the whole
schedule up front (each kind once, in a seeded order, then kinds at random), as a list of ``Step`` (when, which fault, for how long, with
which arguments), so a seed names one schedule and ``--seed N`` replays it. Only
what depends on the cluster's state at that moment is resolved when the step
runs: which broker leads a partition now, which was its previous leader.

The schedule keeps acks=all data safe by construction (topics have RF=3 and
min.insync.replicas=2): at most one broker is down or isolated at a time, with a
pause after each comes back so that it can rejoin the ISR, and a crash of the
whole cluster overlaps no other fault. Otherwise up to ``MAX_ACTIVE`` faults
overlap, so leader moves land during a kill, errors during a throttle, and so on.

``Nemesis`` runs a schedule on its own thread: each lasting fault heals after
its duration; ``stop()`` heals whatever is still active, then everything
(rules cleared, brokers un-isolated and restarted, the cluster process back),
and records each fault in the history as a ``Fault`` (kind, arguments, start,
end; ``error`` if the cluster refused it).

=================  ==================================================================
``leader``         move a partition's leadership: to another ISR member, to the same
                   broker (an epoch bump in place) or back to its previous leader
``coordinator``    move a group's or transactional id's coordinator
``kill``           SIGKILL-like crash of one broker, restarted after a while
``stop``           graceful shutdown of one broker, restarted after a while
``isolate``        cut one broker off replication (both ways), then heal
``crash``          SIGKILL of the whole cluster process, restarted from its data dir
``errors``         errors of the recovery table injected at a rate, where Kafka
                   returns them (``ERROR_MENU``)
``delay``          hold the responses of one API (or all) of one broker
``throttle``       quota throttling (KIP-219) of one broker's responses
``drop``           close one broker's client connections, or drop requests unanswered
=================  ==================================================================

Errors left out of ``ERROR_MENU`` on purpose: OFFSET_OUT_OF_RANGE (a consumer must
then apply auto.offset.reset and re-read: the lie would show as a non-monotonic
poll), the authorization errors and FENCED_INSTANCE_ID (raised to the application
by design), and the producer-state errors (UNKNOWN_PRODUCER_ID,
OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED), which are
fatal to librdkafka's idempotent producer and would end the workload, not test it.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kaflite.protocol.errors import KafkaError
from kaflite.protocol.hashing import coordinator_partition
from kaflite.verify.control import ControlError
from kaflite.verify.history import Fault, History, Note

if TYPE_CHECKING:
    from kaflite.verify.targets import FaultTarget

__all__ = ["ERROR_MENU", "KINDS", "MAX_ACTIVE", "Nemesis", "Step", "Targets", "plan"]

KINDS = ("leader", "coordinator", "kill", "stop", "isolate", "crash", "errors", "delay",
         "throttle", "drop")
BROKER_DOWN = frozenset({"kill", "stop", "isolate"})
INSTANT = frozenset({"leader", "coordinator", "drop"})
MAX_ACTIVE = 3
REJOIN_PAUSE = 1.5       # seconds between a broker's return and the next broker fault

# (api, error, scope): scope "topic" rules hit the workload's topics, "group" its
# groups, "txn" only runs in the transactional workload.
ERROR_MENU: tuple[tuple[str, str, str], ...] = tuple(
    [("Produce", e, "topic") for e in (
        "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT", "KAFKA_STORAGE_ERROR",
        "UNKNOWN_TOPIC_OR_PARTITION")]
    + [("Fetch", e, "topic") for e in (
        "NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH",
        "KAFKA_STORAGE_ERROR", "UNKNOWN_TOPIC_OR_PARTITION")]
    + [("Metadata", "LEADER_NOT_AVAILABLE", "topic"),
       ("ListOffsets", "NOT_LEADER_OR_FOLLOWER", "topic"),
       ("ListOffsets", "LEADER_NOT_AVAILABLE", "topic"),
       ("FindCoordinator", "COORDINATOR_NOT_AVAILABLE", "group")]
    + [("Heartbeat", e, "group") for e in (
        "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "REBALANCE_IN_PROGRESS",
        "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID")]
    + [("JoinGroup", e, "group") for e in (
        "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE")]
    + [("SyncGroup", e, "group") for e in ("NOT_COORDINATOR", "REBALANCE_IN_PROGRESS")]
    + [("OffsetCommit", e, "group") for e in (
        "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "ILLEGAL_GENERATION",
        "REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER_ID", "REQUEST_TIMED_OUT")]
    + [("OffsetFetch", e, "group") for e in ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")]
    + [(api, e, "txn") for api in ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn",
                                   "EndTxn", "TxnOffsetCommit")
       for e in ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")]
    + [(api, "CONCURRENT_TRANSACTIONS", "txn") for api in ("AddPartitionsToTxn", "EndTxn")]
)
DELAY_APIS = (None, "Produce", "Fetch", "Metadata", "FindCoordinator", "JoinGroup",
              "SyncGroup", "Heartbeat", "OffsetCommit", "OffsetFetch", "ListOffsets")
DROP_APIS = ("Produce", "Fetch", "Metadata", "OffsetCommit", "Heartbeat", "JoinGroup",
             "FindCoordinator")


@dataclass(frozen=True)
class Targets:
    """What the faults aim at: the workload's topics, groups and transactional ids."""

    topics: dict[str, int]                 # topic -> partitions
    groups: tuple[str, ...] = ()
    txn_ids: tuple[str, ...] = ()
    brokers: int = 3
    excluded_errors: frozenset[tuple[str, str]] = frozenset()   # (api, error) never injected


@dataclass(frozen=True)
class Step:
    at: float                              # seconds after the nemesis starts
    kind: str
    duration: float                        # 0 for an instantaneous fault
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def end(self) -> float:
        return self.at + self.duration


def _args(rng: random.Random, kind: str, duration: float, targets: Targets) -> dict[str, Any]:
    broker = rng.randrange(targets.brokers)
    if kind == "leader":
        topic = rng.choice(sorted(targets.topics))
        return {"topic": topic, "partition": rng.randrange(targets.topics[topic]),
                "to": rng.choice(("other", "same", "previous"))}
    if kind == "coordinator":
        keys = [(g, "group") for g in targets.groups] + \
            [(t, "transaction") for t in targets.txn_ids]
        key, key_type = rng.choice(keys) if keys else ("", "group")
        return {"key": key, "type": key_type, "to": rng.choice(("other", "same"))}
    if kind in ("kill", "stop", "isolate"):
        return {"broker": broker}
    if kind == "errors":
        scopes = {"topic", "group"} | ({"txn"} if targets.txn_ids else set())
        menu = [m for m in ERROR_MENU if m[2] in scopes and (m[2] != "group" or targets.groups)
                and (m[0], m[1]) not in targets.excluded_errors]
        shots, t = [], 0.0
        while t < duration:
            api, error, scope = rng.choice(menu)
            shots.append({"after": round(t, 3), "api": api, "error": error, "scope": scope,
                          "count": rng.randint(1, 3),
                          "broker": rng.choice((None, rng.randrange(targets.brokers))),
                          "topic": rng.choice(sorted(targets.topics))})
            t += rng.uniform(0.15, 0.5)
        return {"shots": shots}
    if kind == "delay":
        return {"broker": broker, "api": rng.choice(DELAY_APIS), "ms": rng.randint(50, 1500)}
    if kind == "throttle":
        return {"broker": broker, "ms": rng.randint(50, 1000)}
    if kind == "drop":
        if rng.random() < 0.5:
            return {"broker": broker}
        return {"broker": broker, "api": rng.choice(DROP_APIS), "count": rng.randint(1, 2)}
    return {}


def plan(rng: random.Random, kinds: Sequence[str], seconds: float, targets: Targets,
         gap: tuple[float, float] = (0.2, 1.2), duration: tuple[float, float] | None = None
         ) -> list[Step]:
    """The schedule for ``seconds`` of faults of ``kinds`` (see the module docstring).

    Faults last 0.5-3 s, less in a short run (at most a tenth of it, from 0.8 s) so
    that each kind fits in.
    """
    if duration is None:
        duration = (0.5, min(3.0, max(0.8, seconds / 10)))
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown nemesis kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
    kinds = [k for k in KINDS if k in kinds and (k != "coordinator" or targets.groups
                                                 or targets.txn_ids)]
    steps: list[Step] = []
    # Every kind comes once, in a seeded order, before kinds repeat at random: a short
    # run still meets each fault (a kind that does not fit yet stays first in line).
    pending = list(kinds)
    rng.shuffle(pending)
    t = rng.uniform(*gap)
    while kinds and t < seconds:
        for kind in pending[:2] + [rng.choice(kinds) for _ in range(3)]:
            lasting = 0.0 if kind in INSTANT else rng.uniform(*duration)
            if kind == "crash":
                lasting = rng.uniform(0.5, min(2.0, duration[1]))
            end = min(t + lasting, seconds)
            if _fits(steps, kind, t, end):
                steps.append(Step(round(t, 3), kind, round(end - t, 3),
                                  _args(rng, kind, end - t, targets)))
                if kind in pending:
                    pending.remove(kind)
                break
        t += rng.uniform(*gap)
    return steps


def _fits(steps: list[Step], kind: str, start: float, end: float) -> bool:
    def overlaps(s: Step, margin: float = 0.0) -> bool:
        return s.at < end + margin and start < s.end + margin

    if any(s.kind == "crash" and overlaps(s, 0.5) for s in steps):
        return False
    if kind == "crash":
        return not any(overlaps(s, 0.5) for s in steps)
    if kind in BROKER_DOWN and any(s.kind in BROKER_DOWN and overlaps(s, REJOIN_PAUSE)
                                   for s in steps):
        return False
    active = [s for s in steps if s.duration and overlaps(s)]
    return kind in INSTANT or len(active) < MAX_ACTIVE


class _Running:
    def __init__(self, step: Step, start: float) -> None:
        self.step = step
        self.start = start
        self.args: dict[str, Any] = dict(step.args)
        self.rules: list[int] = []
        self.error: str | None = None


class Nemesis:
    """Runs a schedule against a ``FaultTarget`` (kaflite's cluster process, or Apache
    Kafka) and records every fault."""

    def __init__(self, cluster: FaultTarget, history: History, steps: Sequence[Step],
                 targets: Targets) -> None:
        self.cluster = cluster
        self.history = history
        self.steps = list(steps)
        self.targets = targets
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._active: dict[int, _Running] = {}
        self._previous: dict[tuple[str, int], int] = {}
        self.t0 = 0.0
        self.finished = 0       # steps done (applied, or failed to apply), read by the runner

    def start(self) -> Nemesis:
        self.t0 = self.history.now()
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 120) -> None:
        """Stop injecting, heal everything, and wait for that to finish."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        else:
            self._heal_all()

    # -- faults of one client, which the workload's members ask for (group churn) ------
    def cut_client(self, client_id: str) -> int:
        """From now on every request of ``client_id``, to any broker, closes its
        connection: the client is cut off from the cluster (or dead, if it stops too)."""
        return self.cluster.add_rule("drop", {"api": "*", "count": None,
                                              "client_id": client_id})

    def reconnect_client(self, rule_id: int) -> None:
        self.cluster.remove_rule(rule_id)

    # -- the schedule -------------------------------------------------------------------
    def _run(self) -> None:
        seq = itertools.count()
        queue: list[tuple[float, int, str, int, dict[str, Any]]] = []
        for i, step in enumerate(self.steps):
            heapq.heappush(queue, (step.at, next(seq), "start", i, {}))
            if step.duration:
                heapq.heappush(queue, (step.end, next(seq), "heal", i, {}))
            for shot in step.args.get("shots", ()):
                heapq.heappush(queue, (step.at + shot["after"], next(seq), "shot", i, shot))
        try:
            while queue and not self._stop.is_set():
                at, _, action, i, shot = heapq.heappop(queue)
                delay = self.t0 + at - self.history.now()
                if delay > 0 and self._stop.wait(delay):
                    break
                self._act(action, i, shot)
        finally:
            for i in list(self._active):
                self._act("heal", i, {})
            self._heal_all()

    def _act(self, action: str, i: int, shot: dict[str, Any]) -> None:
        try:
            if action == "start":
                run = _Running(self.steps[i], self.history.now())
                self._active[i] = run
                self._start(run)
                if not run.step.duration:
                    self._finish(i)
            elif action == "shot":
                run_ = self._active.get(i)
                if run_ is not None:
                    self._shot(run_, shot)
            elif i in self._active:
                self._heal(self._active[i])
                self._finish(i)
        except (ControlError, RuntimeError, KeyError, ValueError, TimeoutError, OSError,
                KafkaError) as exc:
            # A fault that could not be applied is recorded with its error and the
            # nemesis goes on: a leader move on Apache Kafka whose admin connection met a
            # broker another fault had just killed (ConnectionClosed) once ended the
            # nemesis thread, and with it every later fault of the round (CI, seed 11).
            run_ = self._active.get(i)
            if run_ is not None and action != "shot":
                run_.error = f"{action}: {exc}"
                self._finish(i)
            else:
                self.history.add(Note(time=self.history.now(), process="nemesis",
                                      text=f"{action} of step {i} failed: {exc}"))

    def _finish(self, i: int) -> None:
        run = self._active.pop(i)
        self.finished += 1
        self.history.add(Fault(time=self.history.now(), process="nemesis",
                               fault=run.step.kind, args=run.args, start=run.start,
                               end=self.history.now(), error=run.error))

    # -- faults ------------------------------------------------------------------------
    def _start(self, run: _Running) -> None:
        c, a, kind = self.cluster, run.args, run.step.kind
        actions: dict[str, Callable[[], None]] = {
            "leader": lambda: self._move_leader(run),
            "coordinator": lambda: self._move_coordinator(run),
            "kill": lambda: c.broker_down(a["broker"], "kill"),
            "stop": lambda: c.broker_down(a["broker"], "stop"),
            "isolate": lambda: c.isolate(a["broker"], True),
            "crash": c.crash,
            "errors": lambda: None,           # the shots do the work
            "delay": lambda: run.rules.append(c.add_rule("delay", {
                "api": a["api"], "ms": a["ms"], "count": None, "broker": a["broker"]})),
            "throttle": lambda: run.rules.append(c.add_rule("throttle", {
                "ms": a["ms"], "count": None, "broker": a["broker"]})),
            "drop": lambda: self._drop(run),
        }
        actions[kind]()

    def _heal(self, run: _Running) -> None:
        c, a, kind = self.cluster, run.args, run.step.kind
        for rule in run.rules:
            c.remove_rule(rule)
        if kind in ("kill", "stop"):
            c.broker_up(a["broker"])
        elif kind == "isolate":
            c.isolate(a["broker"], False)
        elif kind == "crash":
            c.restart()

    def _shot(self, run: _Running, shot: dict[str, Any]) -> None:
        body: dict[str, Any] = {"api": shot["api"], "error": shot["error"],
                                "count": shot["count"], "broker": shot["broker"]}
        if shot["scope"] == "topic":
            body["topic"] = shot["topic"]
        elif shot["scope"] == "group" and self.targets.groups:
            body["group"] = self.targets.groups[0]
        run.rules.append(self.cluster.add_rule("error", body))
        run.args.setdefault("injected", 0)
        run.args["injected"] += 1

    def _move_leader(self, run: _Running) -> None:
        a = run.args
        topic, index = a["topic"], a["partition"]
        state = self.cluster.partitions(topic)[index]
        leader, isr = state["leader"], state["isr"]
        to: int | None = None
        if a["to"] == "same":
            to = leader
        elif a["to"] == "previous":
            prev = self._previous.get((topic, index))
            to = prev if prev is not None and prev != leader and prev in isr else None
        a.update({"from": leader, "isr": isr, "epoch": state["leader_epoch"], "target": to})
        a["leader"] = self.cluster.move_leader(topic, index, to)
        if a["leader"] != leader:
            self._previous[(topic, index)] = leader

    def _move_coordinator(self, run: _Running) -> None:
        a = run.args
        to: int | None = None
        if a["to"] == "same":
            topic = "__consumer_offsets" if a["type"] == "group" else "__transaction_state"
            parts = self.cluster.partitions(topic)
            if not parts:
                raise ControlError(409, f"{topic} does not exist yet")
            to = parts[coordinator_partition(a["key"], len(parts))]["leader"]
        a["coordinator"] = self.cluster.move_coordinator(a["key"], a["type"], to)

    def _drop(self, run: _Running) -> None:
        a = run.args
        if "api" in a:
            run.rules.append(self.cluster.add_rule("drop", {
                "api": a["api"], "count": a["count"], "broker": a["broker"]}))
        else:
            a["dropped"] = self.cluster.drop_connections(a["broker"])

    def _heal_all(self) -> None:
        """Whatever state the faults left: rules gone, brokers back and connected."""
        for attempt in range(3):
            try:
                self.cluster.heal()
                return
            except (ControlError, RuntimeError, TimeoutError) as exc:
                self.history.add(Note(time=self.history.now(), process="nemesis",
                                      text=f"heal attempt {attempt + 1} failed: {exc}"))

