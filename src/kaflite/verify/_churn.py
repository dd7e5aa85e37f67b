"""Group churn: the seeded member faults (leave, crash, cut, stall) and subscription
changes of ``RunConfig.churn`` (issue 36), which ``workload.consumer_process`` steps
through between its polls."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

from kaflite.verify._threads import start_daemon
from kaflite.verify.clients import ConsumerClient, Context, ShareConsumerClient
from kaflite.verify.history import Fault

if TYPE_CHECKING:
    from kaflite.verify._shared import Shared
    from kaflite.verify.workload import _Recorder

__all__ = ["CUT_S", "IDLE_PARTITIONS", "IDLE_TOPIC", "MAX_POLL_INTERVAL_MS", "MEMBER_FAULTS",
           "STALL_S", "Episodes", "Subscriptions", "crash", "subscribe"]

# What a churning member does at its seeded moment: leave cleanly (and join again), crash
# (stop dead, cut off from every broker, and a new consumer joins later), lose the network
# for a while and carry on (the coordinator expires it; it must learn so), or stall: stop
# polling past max.poll.interval.ms (its library leaves the group; at its next poll it
# must let its partitions go before it hands out their records).
MEMBER_FAULTS = ("leave", "leave", "crash", "cut", "stall")
# The topic churning members add to their subscription and drop again (Subscriptions):
# nothing is written to it, its partitions only move.
IDLE_TOPIC, IDLE_PARTITIONS = "queue-idle", 4
CUT_S = 8.0     # a cut outlasts the session timeouts the clients are given (6 s)
# The churning consumers' max.poll.interval.ms (``ClientFactory.max_poll_interval_ms``),
# and how long a stall lasts: past it, with the margin a library's poll check needs.
MAX_POLL_INTERVAL_MS = 6_000
STALL_S = 9.0


def _member_fault(shared: Shared, process: str, client: str, kind: str
                  ) -> tuple[int | None, float]:
    """Cut ``process``'s consumer (``client``) off the cluster for ``kind`` crash|cut; the
    rule and its start."""
    nemesis = shared.nemesis
    if nemesis is None or shared.writers_stop.is_set():
        return None, 0.0
    try:
        return nemesis.cut_client(client), shared.history.now()
    except Exception as exc:
        shared.note(process, f"{kind}: {exc!r}")
        return None, 0.0


def _member_healed(shared: Shared, process: str, kind: str, rule: int | None, start: float,
                   group: str) -> None:
    h, nemesis = shared.history, shared.nemesis
    try:
        if nemesis is not None and rule is not None:
            nemesis.reconnect_client(rule)
    except Exception as exc:
        shared.note(process, f"{kind} heal: {exc!r}")
    h.add(Fault(time=h.now(), process=process, fault=f"member-{kind}",
                args={"member": process, "group": group}, start=start, end=h.now()))


class Episodes:
    """One consumer's seeded member faults: when the next is due and which it is, and
    the cut or stall under way (the member lives through those two)."""

    def __init__(self, shared: Shared, process: str, client: str, group: str,
                 rng: random.Random) -> None:
        self.shared, self.process, self.group, self.rng = shared, process, group, rng
        self.client = client
        self.due: float | None = None
        self.kind = "leave"
        self.ongoing = False
        self.rule: int | None = None
        self.start, self.until = 0.0, 0.0
        self.stop_seen: float | None = None    # when this member first saw the writers stop
        if shared.churn:
            self._next(time.monotonic())

    def _next(self, now: float) -> None:
        self.due = now + self.rng.uniform(1.0, 4.0)
        self.kind = self.rng.choice(MEMBER_FAULTS)
        if self.kind == "stall" and not self.shared.factory.stalls:
            self.kind = "leave"

    def step(self) -> str | None:
        """``leave`` or ``crash`` when that is due (the member ends), else None.

        A fault that fell due while the writers ran still begins if the member was busy
        then, even after they stopped: a synchronous commit can sit for seconds behind
        the member's own JoinGroup on the coordinator's connection (a broker answers a
        connection's requests in order), and seeded faults must not depend on that."""
        now = time.monotonic()
        if self.stop_seen is None and self.shared.writers_stop.is_set():
            self.stop_seen = now
        if self.ongoing:
            if now >= self.until:
                self.end()
                self._next(now)
            return None
        if self.due is None or now < self.due or \
                (self.stop_seen is not None and self.due >= self.stop_seen):
            return None
        if self.kind in ("leave", "crash"):
            return self.kind
        if self.kind == "cut":
            self.rule, self.start = _member_fault(self.shared, self.process, self.client,
                                                  self.kind)
            if self.rule is None:
                self.due = None
                return None
        else:
            self.start = self.shared.history.now()
        self.ongoing, self.until = True, now + (CUT_S if self.kind == "cut" else STALL_S)
        return None

    @property
    def stalled(self) -> bool:
        return self.ongoing and self.kind == "stall"

    def end(self) -> None:
        if self.ongoing:
            _member_healed(self.shared, self.process, self.kind, self.rule, self.start,
                           self.group)
            self.ongoing, self.rule = False, None


def subscribe(consumer: ConsumerClient, recorder: _Recorder, topics: list[str]) -> None:
    consumer.subscribe(topics)
    recorder.subscribed(topics)


class Subscriptions:
    """Under churn, a member adds the idle topic to its subscription and drops it again,
    at seeded moments 1-4 s apart (drawn apart from its member faults, so that a seed's
    faults do not change; not while it stalls, as a stalled application calls nothing):
    each change is a rebalance of its own, cooperative ones included, in which the
    queue's partitions must not get stuck or doubly owned."""

    def __init__(self, shared: Shared, process: str, topic: str) -> None:
        self.shared, self.process, self.base = shared, process, [topic]
        self.rng = random.Random(f"{shared.seed}-{process}-subscriptions")
        self.idle = shared.idle_topic     # set by the runner under churn, where it applies
        self.due: float | None = None

    def start(self) -> list[str]:
        """A new consumer's subscription: the queue only."""
        if self.idle is not None:
            self.due = time.monotonic() + self.rng.uniform(1.0, 4.0)
        return list(self.base)

    def step(self, consumer: ConsumerClient, recorder: _Recorder) -> None:
        now = time.monotonic()
        if self.idle is None or self.due is None or now < self.due \
                or self.shared.writers_stop.is_set():
            return
        topics = self.base if self.idle in recorder.topics else [*self.base, self.idle]
        self.due = now + self.rng.uniform(1.0, 4.0)
        try:
            subscribe(consumer, recorder, topics)
        except Exception as exc:
            self.shared.note(self.process, f"subscribe {topics}: {exc!r}")


def crash(shared: Shared, ctx: Context, consumer: ConsumerClient | ShareConsumerClient,
          process: str, client: str, group: str, recorder: _Recorder) -> None:
    """The member dies: it stops polling, reaches no broker, and holds nothing from now
    on (its library's later callbacks are not recorded). After the cut its client is
    abandoned as a killed process's is: no goodbyes, where its library allows that."""
    rule, start = _member_fault(shared, process, client, "crash")
    recorder.closed()
    recorder.muted = True
    if rule is not None:    # else the nemesis is done: no cut, the member just dies
        shared.readers_stop.wait(CUT_S)
    else:
        start = shared.history.now()
    _member_healed(shared, process, "crash", rule, start, group)
    # A killed process does not wait for its library to tear down: the member is gone now.
    # A client whose teardown may block (confluent-kafka's destroy; it spun for ever in
    # wait-assign-call, _confluent.abandon) is abandoned on a thread of its own; the
    # others here, on the member's thread: an asyncio client's loop is that thread's
    # alone, and a teardown thread running it killed both members of a kaflite soak
    # round at their rejoin ("this event loop is already running", seed 1340261601).
    if not consumer.abandon_on_a_thread:
        _abandon(shared, consumer, process)
        return
    shared.abandoned.append(start_daemon(f"{process}-abandon", _abandon, shared, consumer,
                                         process))


ABANDON_SLOW_S = 5.0


def _abandon(shared: Shared, consumer: ConsumerClient | ShareConsumerClient,
             process: str) -> None:
    began = time.monotonic()
    try:
        consumer.abandon()
    except Exception as exc:
        shared.note(process, f"crashed close: {exc!r}")
    took = time.monotonic() - began
    if took > ABANDON_SLOW_S:
        shared.note(process, f"the abandoned client took {took:.0f} s to tear down")
