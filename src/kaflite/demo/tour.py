"""The scripted tour of failures: each step says what to expect, acts, then reports.

What "actually happened" is read from the clients' own event logs (the
control-plane transitions they went through) and from the controller's view of
leaders and ISRs, never assumed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kaflite.cluster import Cluster
    from kaflite.demo.workload import Workload

__all__ = ["Step", "Tour", "tour_steps"]


@dataclass
class Step:
    at: float  # fraction of the run's duration
    title: str
    expect: str
    status: str = "pending"  # pending, running, done
    outcome: str = ""
    started: float = 0.0
    observed: list[str] = field(default_factory=list)


def tour_steps(victim: int) -> list[Step]:
    """The tour's steps, in order, each at a fraction of the run's duration."""
    return [
        Step(0.12, "move the leader of partition 0",
             "NOT_LEADER_OR_FOLLOWER, a metadata refresh, a reconnect to the new leader"),
        Step(0.27, f"kill broker {victim}",
             "elections for its partitions, ISR shrink, clients rerouting"),
        Step(0.45, "move the group coordinator",
             "NOT_COORDINATOR, then FindCoordinator finds the new one"),
        Step(0.60, "add a third consumer",
             "a rebalance with a new generation and new assignments"),
        Step(0.75, f"restart broker {victim}",
             "it catches up and rejoins the ISR of every partition"),
    ]


def _events_since(workload: Workload, since: float, words: tuple[str, ...]) -> list[str]:
    out = []
    clients = [("producer", workload.producer)] + [(c.name, c.client) for c in workload.consumers]
    for name, client in clients:
        for ev in client.events():
            text = f"{ev.kind}: {ev.message} {ev.cause or ''}"
            if ev.timestamp >= since and any(w.lower() in text.lower() for w in words):
                out.append(f"{name}: {ev.message}" + (f" ({ev.cause})" if ev.cause else ""))
    return out


class Tour:
    def __init__(self, cluster: Cluster, workload: Workload, topic: str, group: str,
                 victim: int = 2, listener: Callable[[Step], None] | None = None) -> None:
        self.cluster = cluster
        self.workload = workload
        self.topic = topic
        self.group = group
        self.victim = victim
        self.steps = tour_steps(victim)
        self.listener = listener  # told when a step starts and when it is done
        self._actions: list[Callable[[Step], None]] = [
            self._move_leader, self._kill, self._move_coordinator, self._add_consumer_marker,
            self._restart,
        ]

    async def run(self, duration: float, start: float) -> None:
        for step, action in zip(self.steps, self._actions, strict=True):
            await asyncio.sleep(max(0.0, start + step.at * duration - time.monotonic()))
            step.status, step.started = "running", time.time()
            self._tell(step)
            if action == self._add_consumer_marker:  # bound methods: compare, not identity
                state = await self.workload.add_consumer()
                step.outcome = f"{state.name} joined group {self.group}"
            else:
                await asyncio.to_thread(action, step)
            await asyncio.sleep(min(6.0, duration * 0.08))
            self._observe(step)
            step.status = "done"
            self._tell(step)

    def _tell(self, step: Step) -> None:
        if self.listener is not None:
            self.listener(step)

    # -- actions (run in a worker thread: they wait on the cluster's loop) ------------
    def _move_leader(self, step: Step) -> None:
        before = self.cluster.controller.topics[self.topic].partitions[0].leader
        after = self.cluster.faults.move_leader(self.topic, 0)
        step.outcome = f"leader of {self.topic}-0 moved {before}→{after}"

    def _kill(self, step: Step) -> None:
        led = [p.partition for t in self.cluster.controller.topics.values()
               for p in t.partitions if p.leader == self.victim and t.name == self.topic]
        self.cluster.faults.kill_broker(self.victim)
        step.outcome = f"broker {self.victim} led {self.topic} partitions {led}"

    def _move_coordinator(self, step: Step) -> None:
        topic, partition, before = self.cluster.faults.coordinator_of(self.group)
        after = self.cluster.faults.move_coordinator(self.group)
        step.outcome = f"coordinator ({topic}-{partition}) moved {before}→{after}"

    def _add_consumer_marker(self, step: Step) -> None:
        """A placeholder: adding a consumer happens on the demo's own loop (see run)."""

    def _restart(self, step: Step) -> None:
        self.cluster.faults.restart_broker(self.victim)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            parts = self.cluster.controller.topics[self.topic].partitions
            if all(self.victim in p.isr for p in parts if self.victim in p.replicas):
                step.outcome = (f"broker {self.victim} back in the ISR after "
                                f"{time.time() - step.started:.1f}s")
                return
            time.sleep(0.2)
        step.outcome = f"broker {self.victim} restarted; ISR not complete after 30s"

    # -- observation ----------------------------------------------------------------------
    def _observe(self, step: Step) -> None:
        words = {
            0: ("NOT_LEADER", "metadata", "leader"),
            1: ("NOT_LEADER", "metadata", "leader", "disconnect", "connect"),
            2: ("NOT_COORDINATOR", "coordinator"),
            3: ("rebalance", "generation", "assigned"),
            4: ("connect", "metadata"),
        }[self.steps.index(step)]
        step.observed = _events_since(self.workload, step.started, words)[-6:]
        if self.steps.index(step) == 1:
            parts = self.cluster.controller.topics[self.topic].partitions
            step.outcome += "; now " + ", ".join(
                f"p{p.partition}: leader {p.leader} isr {p.isr}" for p in parts)
