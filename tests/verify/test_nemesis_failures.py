"""A fault the target cannot apply is recorded with its error, and the nemesis goes on.

CI (interop, 2026-11-30): on Apache Kafka, a leader move's admin connection reached a
broker that a kill had just taken down (``ConnectionClosed``); the exception ended the
nemesis thread, and the round's later faults, a cluster crash among them, never ran."""

from __future__ import annotations

import time
from typing import Any

from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.verify.history import Fault, History
from kaflite.verify.nemesis import Nemesis, Step, Targets


class _Target:
    name = "fake"
    kinds = None

    def __init__(self) -> None:
        self.calls: list[str] = []

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        return [{"leader": 0, "isr": [0, 1, 2], "leader_epoch": 1}]

    def move_leader(self, topic: str, partition: int, to: int | None) -> int:
        self.calls.append("move")
        raise ConnectionClosed("cannot connect to 127.0.0.1:1: ConnectionRefusedError")

    def move_coordinator(self, key: str, key_type: str, to: int | None) -> int:
        self.calls.append("coordinator")
        raise errors.NotCoordinatorError("moved away")

    def broker_down(self, broker: int, how: str) -> None:
        self.calls.append(f"{how} {broker}")

    def broker_up(self, broker: int) -> None:
        self.calls.append(f"up {broker}")

    def crash(self) -> None:
        self.calls.append("crash")

    def restart(self) -> None:
        self.calls.append("restart")

    def heal(self) -> None:
        return None


def test_a_fault_that_fails_is_recorded_and_the_next_ones_run() -> None:
    target = _Target()
    history = History()
    steps = [Step(0.0, "leader", 0.0, {"topic": "t", "partition": 0, "to": "other"}),
             Step(0.05, "coordinator", 0.0, {"key": "g", "type": "group", "to": "other"}),
             Step(0.1, "kill", 0.1, {"broker": 1}),
             Step(0.3, "crash", 0.1, {})]
    nemesis = Nemesis(target, history, steps, Targets(topics={"t": 1}))  # type: ignore[arg-type]
    nemesis.start()
    deadline = time.monotonic() + 10
    while nemesis.finished < len(steps) and time.monotonic() < deadline:
        time.sleep(0.01)
    nemesis.stop(10)
    assert target.calls == ["move", "coordinator", "kill 1", "up 1", "crash", "restart"]
    faults = {op.fault: op.error for op in history.ops if isinstance(op, Fault)}
    assert faults["leader"] is not None and "cannot connect" in faults["leader"]
    assert faults["coordinator"] is not None and "moved away" in faults["coordinator"]
    assert faults["kill"] is None and faults["crash"] is None
