"""The client's event log: every control-plane transition, with its cause.

A Kafka client spends its life reacting to the cluster: a leader moves, a
coordinator moves, a group rebalances. kaflite records each such transition
as an ``Event`` (timestamp, kind, message, cause) in a bounded log, logs it
to the ``kaflite.client.events`` logger and hands it to any registered
callbacks. ``client.events()`` returns the log.

Example messages::

    metadata refresh (NOT_LEADER_OR_FOLLOWER on t-3)
    coordinator moved 2→5
    rebalance: generation 4, assigned [t-0, t-1]
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = ["Emit", "Event", "EventLog", "observe_all"]

log = logging.getLogger("kaflite.client.events")


@dataclass(frozen=True, slots=True)
class Event:
    timestamp: float       # time.time()
    kind: str              # bootstrap, connect, disconnect, metadata, leader, coordinator,
    #                        rebalance, producer, offsets, error, ...
    message: str
    cause: str | None = None

    def __str__(self) -> str:
        stamp = time.strftime("%H:%M:%S", time.localtime(self.timestamp))
        millis = int(self.timestamp * 1000) % 1000
        cause = f" ({self.cause})" if self.cause else ""
        return f"{stamp}.{millis:03d} [{self.kind}] {self.message}{cause}"


# Process-wide observers of every client's events (the console's client log).
_OBSERVERS: list[Callable[[str, Event], None]] = []


def observe_all(callback: Callable[[str, Event], None]) -> Callable[[], None]:
    """Call ``callback(client_id, event)`` for every event of every kaflite client in
    this process; returns a function that stops it."""
    _OBSERVERS.append(callback)
    return lambda: _OBSERVERS.remove(callback) if callback in _OBSERVERS else None


class Emit(Protocol):
    """Adds an event to a client's log (``EventLog.emit``), for its helpers."""

    def __call__(self, kind: str, message: str, cause: str | None = None) -> object: ...


class EventLog:
    """A bounded, in-order log of control-plane events."""

    def __init__(self, client_id: str, maxlen: int = 10_000) -> None:
        self.client_id = client_id
        self._events: deque[Event] = deque(maxlen=maxlen or None)
        self._callbacks: list[Callable[[Event], None]] = []

    def emit(self, kind: str, message: str, cause: str | None = None) -> Event:
        event = Event(time.time(), kind, message, cause)
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

    def subscribe(self, callback: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``callback`` for every new event; returns an unsubscribe function."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def list(self, kind: str | None = None) -> list[Event]:
        return [e for e in self._events if kind is None or e.kind == kind]

    def __len__(self) -> int:
        return len(self._events)
