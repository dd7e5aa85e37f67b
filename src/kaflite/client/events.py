"""The client's event log: every control-plane transition, with its cause.

A Kafka client spends its life reacting to the cluster: a leader moves, a
coordinator moves, a group rebalances. kaflite records each such transition
as an ``Event`` in a bounded log, logs it to the ``kaflite.client.events``
logger and hands it to any registered callbacks. ``client.events()`` returns
the log.

An event is a typed record: its ``kind`` (``EventKind``, a string enum, so
``event.kind == "rebalance"`` still holds), its ``phase`` in the chain a client
goes through (``Phase``: an error, then the action it takes, then the outcome),
the human ``message`` and ``cause``, and typed fields where the event has them:
``broker``, ``topic``/``partition``, ``group``, ``error_code``, ``reason`` and
``duration_ms``. ``encode``/``decode`` make it a topic record (key: the client
id; JSON value), which is how a client publishes its own events
(``events.topic``, ``kaflite.client.publisher``).

Example messages::

    metadata refresh (NOT_LEADER_OR_FOLLOWER on t-3)
    coordinator moved 2→5
    rebalance: generation 4, assigned [t-0, t-1]
"""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any, Protocol

__all__ = ["CLIENT_EVENTS_TOPIC", "Emit", "Event", "EventKind", "EventLog", "Phase",
           "observe_all"]

log = logging.getLogger("kaflite.client.events")

CLIENT_EVENTS_TOPIC = "__kaflite_client_events"


class EventKind(StrEnum):
    BOOTSTRAP = "bootstrap"
    CONNECT = "connect"
    DISCONNECT = "disconnect"
    METADATA = "metadata"
    LEADER = "leader"
    COORDINATOR = "coordinator"
    REBALANCE = "rebalance"
    PRODUCER = "producer"
    FETCH = "fetch"
    OFFSETS = "offsets"
    SHARE = "share"
    AUTH = "auth"
    REAUTH = "reauth"
    TLS = "tls"
    THROTTLE = "throttle"
    TELEMETRY = "telemetry"
    ERROR = "error"
    OTHER = "other"


class Phase(StrEnum):
    """Where an event sits in the chain: an error, then an action, then an outcome."""

    ERROR = "error"
    ACTION = "action"
    OUTCOME = "outcome"


def _kind(kind: str) -> EventKind:
    try:
        return EventKind(kind)
    except ValueError:
        return EventKind.OTHER


@dataclass(frozen=True, slots=True)
class Event:
    timestamp: float       # time.time()
    kind: EventKind
    message: str
    cause: str | None = None
    phase: Phase = Phase.OUTCOME
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    group: str | None = None
    error_code: int | None = None
    reason: str | None = None
    duration_ms: float | None = None
    client_id: str | None = None   # set by the client's log

    def __str__(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.timestamp))
        millis = int(self.timestamp * 1000) % 1000
        cause = f" ({self.cause})" if self.cause else ""
        return f"{stamp}.{millis:03d} [{self.kind}] {self.message}{cause}"

    def to_dict(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, StrEnum) else v for k, v in asdict(self).items()}

    def encode(self) -> tuple[bytes, bytes]:
        """The event as a topic record: (client id, JSON)."""
        return (self.client_id or "").encode(), json.dumps(
            self.to_dict(), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, value: bytes | str) -> Event:
        raw = json.loads(value)
        if not isinstance(raw, dict):
            raise ValueError("an event record is a JSON object")
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in known}
        values["kind"] = _kind(str(values.get("kind", "other")))
        values["phase"] = Phase(values.get("phase", "outcome"))
        return cls(**values)


# Process-wide observers of every client's events (the console's client log).
_OBSERVERS: list[Callable[[str, Event], None]] = []


def observe_all(callback: Callable[[str, Event], None]) -> Callable[[], None]:
    """Call ``callback(client_id, event)`` for every event of every kaflite client in
    this process; returns a function that stops it."""
    _OBSERVERS.append(callback)
    return lambda: _OBSERVERS.remove(callback) if callback in _OBSERVERS else None


class Emit(Protocol):
    """Adds an event to a client's log (``EventLog.emit``), for its helpers."""

    def __call__(self, kind: str, message: str, cause: str | None = None, *,
                 phase: Phase | None = None, broker: int | None = None,
                 topic: str | None = None, partition: int | None = None,
                 group: str | None = None, error_code: int | None = None,
                 reason: str | None = None, duration_ms: float | None = None) -> object: ...


class EventLog:
    """A bounded, in-order log of control-plane events."""

    def __init__(self, client_id: str, maxlen: int = 10_000) -> None:
        self.client_id = client_id
        self._events: deque[Event] = deque(maxlen=maxlen or None)
        self._callbacks: list[Callable[[Event], object]] = []

    def emit(self, kind: str, message: str, cause: str | None = None, *,
             phase: Phase | None = None, broker: int | None = None, topic: str | None = None,
             partition: int | None = None, group: str | None = None,
             error_code: int | None = None, reason: str | None = None,
             duration_ms: float | None = None) -> Event:
        """Record one event. Without a ``phase`` it is an error if it has an error code,
        else an outcome. ``reason`` defaults to ``cause``."""
        if phase is None:
            phase = Phase.ERROR if error_code else Phase.OUTCOME
        event = Event(time.time(), _kind(kind), message, cause, phase, broker, topic,
                      partition, group, error_code, reason if reason is not None else cause,
                      duration_ms, self.client_id)
        self._events.append(event)
        if log.isEnabledFor(logging.INFO):
            log.info("%s: %s", self.client_id, event)
        for cb in list(self._callbacks):
            try:
                cb(event)
            except Exception:  # a callback must never break the client
                log.exception("event callback failed")
        for observer in list(_OBSERVERS):
            try:
                observer(self.client_id, event)
            except Exception:
                log.exception("event observer failed")
        return event

    def subscribe(self, callback: Callable[[Event], object]) -> Callable[[], None]:
        """Call ``callback`` for every new event; returns an unsubscribe function."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def list(self, kind: str | None = None, phase: str | None = None) -> list[Event]:
        return [e for e in self._events if (kind is None or e.kind == kind)
                and (phase is None or e.phase == phase)]

    def __len__(self) -> int:
        return len(self._events)
