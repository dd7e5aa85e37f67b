"""What one connection did around its errors: the registry's short, bounded history.

The connection registry (``observe``) counts requests; it does not keep them. To tell
how a client recovered after an error (``kaflite.doctor.recovery``: error, metadata
refresh, new connection, first success), each ``ConnectionRecord`` also keeps a
``History`` of the few requests that matter to that story, each list bounded:

* ``failures``: requests answered with an error code (at any level: top, group, topic
  or partition), with the partitions, group or transactional id that got it; the same
  error on the same API and targets again, with nothing else recorded in between,
  adds to the last failure's ``count`` instead of a new line (a producer retrying);
  and a request the broker dropped (a fault rule) as ``NETWORK_EXCEPTION``, the error
  a Kafka client gives a request whose connection went away;
* ``lookups``: the Metadata and FindCoordinator requests, which is how a client looks
  for the new owner of a partition or a group;
* ``successes``: the successes a timeline can end an episode with, each once: the
  first success of an API on this connection, the first success of an API after it
  failed here, and each partition, group or transactional id this connection answers
  without error for the first time, or again after it was told it does not own it
  (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR...), with what it gained.

Plus ``closed_by``, who closed the connection: ``client``, ``broker`` (a fault rule,
an idle timeout, a bad frame) or ``broker down`` (the broker was stopped or killed).

A request answered without an error, on a connection that serves nothing new, costs
one lookup in a set. Times are ``time.time()``. The history crosses processes as JSON
with the rest of the record (``observe_wire``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

__all__ = ["KEPT", "Failure", "History", "Success", "group_target", "partition_target",
           "transaction_target"]

KEPT = 32            # failures, lookups and successes kept per connection, each
TARGETS_KEPT = 16    # targets named per failure or success
NETWORK_EXCEPTION = 13


def partition_target(topic: str, partition: int) -> str:
    return f"partition {topic}-{partition}"


def group_target(group: str) -> str:
    return f"group {group}"


def transaction_target(transactional_id: str) -> str:
    return f"transaction {transactional_id}"


@dataclass(slots=True)
class Failure:
    at: float
    api_key: int
    error: int
    targets: tuple[str, ...] = ()
    count: int = 1
    last: float = 0.0


@dataclass(slots=True)
class Success:
    at: float
    api_key: int
    targets: tuple[str, ...] = ()


def _targets(names: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))[:TARGETS_KEPT]


@dataclass(slots=True)
class History:
    failures: deque[Failure] = field(default_factory=lambda: deque(maxlen=KEPT))
    lookups: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=KEPT))
    successes: deque[Success] = field(default_factory=lambda: deque(maxlen=KEPT))
    failing: set[int] = field(default_factory=set)     # APIs whose last answer failed
    served: set[int] = field(default_factory=set)      # APIs answered once without error
    # what this connection answered without error and was not told since it does not own:
    # (topic, partition), ("group", id), ("transaction", id); the handlers add to the
    # record's roles before they answer, so the gains are told apart here
    owned: set[tuple[str, int | str]] = field(default_factory=set)
    closed_by: str | None = None

    def failed(self, at: float, api_key: int, error: int, targets: list[str]) -> None:
        self.failing.add(api_key)
        named = _targets(targets)
        last = self.failures[-1] if self.failures else None
        if last is not None and (last.api_key, last.error, last.targets) == (api_key, error,
                                                                             named) \
                and not self._since(last.at):
            last.count += 1
            last.last = at
            return
        self.failures.append(Failure(at, api_key, error, named, 1, at))

    def _since(self, at: float) -> bool:
        """Whether a lookup or a success was recorded after ``at``."""
        return bool(self.lookups and self.lookups[-1][0] > at) or bool(
            self.successes and self.successes[-1].at > at)

    def dropped(self, at: float, api_key: int) -> None:
        self.failed(at, api_key, NETWORK_EXCEPTION, [])

    def looked_up(self, at: float, api_key: int) -> None:
        self.lookups.append((at, api_key))

    def answered(self, at: float, api_key: int, gained: list[str], ok: list[str],
                 failed: bool = False) -> None:
        """A request answered: ``gained`` the targets this connection serves from now on,
        ``ok`` the targets answered without error (read only after a failure). With
        ``failed`` (some of it got an error), only what it gained is a success."""
        if failed:
            if gained:
                self.successes.append(Success(at, api_key, _targets(gained)))
            return
        first = api_key not in self.served
        again = api_key in self.failing
        if not (first or again or gained):
            return
        self.served.add(api_key)
        self.failing.discard(api_key)
        self.successes.append(Success(at, api_key, _targets(gained + ok if again else gained)))

    # -- JSON (observe_wire) -------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"failures": [[f.at, f.api_key, f.error, list(f.targets), f.count, f.last]
                             for f in self.failures],
                "lookups": [list(x) for x in self.lookups],
                "successes": [[s.at, s.api_key, list(s.targets)] for s in self.successes],
                "failing": sorted(self.failing), "served": sorted(self.served),
                "owned": [list(x) for x in self.owned],
                "closed_by": self.closed_by}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> History:
        h = cls()
        if not d:
            return h
        h.failures.extend(Failure(float(at), int(api), int(err), tuple(map(str, ts)), int(n),
                                  float(last))
                          for at, api, err, ts, n, last in d.get("failures", []))
        h.lookups.extend((float(at), int(api)) for at, api in d.get("lookups", []))
        h.successes.extend(Success(float(at), int(api), tuple(map(str, ts)))
                           for at, api, ts in d.get("successes", []))
        h.failing = {int(k) for k in d.get("failing", [])}
        h.served = {int(k) for k in d.get("served", [])}
        h.owned = {(str(a), b if isinstance(b, int) else str(b))
                   for a, b in d.get("owned", [])}
        closed_by = d.get("closed_by")
        h.closed_by = None if closed_by is None else str(closed_by)
        return h
