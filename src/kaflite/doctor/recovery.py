"""Recovery per client: after each error, what the client did until it worked again.

A Kafka client told "this is not the owner" (or cut off by a broker going down) looks
for the new owner (a Metadata request for a partition, FindCoordinator for a group or
a transaction), perhaps opens a connection to it, and sends again. This module turns a
client's events into one timeline per error episode:

    error  ->  metadata refresh  ->  new connection  ->  first success of the same API

with the milliseconds from the error and from the step before. It does no I/O: the
console builds the events from the connection registry's per-connection history
(``kaflite.cluster.observe_history``), and ``kaflite.doctor``'s analyzer uses the same
bookkeeping (``OwnerSearch``) for its recovery times from the request log.

The rules, one place for both:

* an error names targets: the partitions, the group or the transactional id that got
  it (``partition orders-0``, ``group g1``, ``transaction t1``); an error that names
  none (a top-level error of an API about no partition or group) is about its API;
* a partition's error is about that API on that partition (a Fetch on ``orders-0``
  does not end a Produce's episode there); a group's or a transaction's is about the
  group or the transaction, whatever group or transaction API succeeds next;
* an episode starts at an error on a target that has no episode open; more errors on
  it are counted in that episode; it ends at the first success on any of its targets
  (for a broker that went down, on any target the lost connection served);
* the steps are the first lookup after the error (Metadata for a partition or an API,
  FindCoordinator for a group or a transaction) and the first connection the client
  opened after it, each shown only when it came before the success. An episode whose
  success came with no lookup before it is a near miss: the client retried the same
  broker and it worked, without finding anything new;
* errors that are steps of a protocol, not failures, start nothing:
  ``MEMBER_ID_REQUIRED`` (a classic member's first JoinGroup), and the lookups' and
  ApiVersions' own errors.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

__all__ = [
    "ClientEvents",
    "ClientRecovery",
    "Episode",
    "Event",
    "OwnerSearch",
    "Step",
    "recoveries",
    "timeline",
]

T = TypeVar("T")

EPISODES_SHOWN = 16          # per client, the newest
NOT_EPISODES = frozenset({"MEMBER_ID_REQUIRED"})
QUIET_APIS = frozenset({"ApiVersions", "Metadata", "FindCoordinator", "SaslHandshake",
                        "SaslAuthenticate", "DescribeCluster"})
METADATA, FIND_COORDINATOR = "Metadata", "FindCoordinator"
NETWORK_EXCEPTION = "NETWORK_EXCEPTION"
_RANK = {"connect": 0, "error": 1, "lookup": 2, "success": 3}   # at the same instant


class OwnerSearch(Generic[T]):
    """Targets waiting for their new owner: each with what its first failure was, until
    a success on it. The doctor keeps (time, error) here, the timelines an episode."""

    def __init__(self) -> None:
        self.open: dict[str, T] = {}

    def failed(self, targets: Iterable[str], what: T) -> list[str]:
        """Open a search for each target that has none; the ones opened."""
        new = [t for t in dict.fromkeys(targets) if t not in self.open]
        for t in new:
            self.open[t] = what
        return new

    def succeeded(self, targets: Iterable[str]) -> list[T]:
        """Close the searches of ``targets``: what each one's failure was."""
        return [found for t in targets if (found := self.open.pop(t, None)) is not None]

    def get(self, target: str) -> T | None:
        return self.open.get(target)

    def __len__(self) -> int:
        return len(self.open)


def search_key(api: str, target: str) -> str:
    """What an error or a success is about (see the module's rules)."""
    return f"{api} {target}" if target.startswith("partition ") else target


def _keys(api: str, targets: tuple[str, ...]) -> list[str]:
    return [search_key(api, t) for t in targets] if targets else [f"api {api}"]


# -- what goes in ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Event:
    """One thing a client did, as a broker saw it."""

    kind: str                    # "error", "lookup", "connect" or "success"
    at: float                    # wall-clock seconds
    broker: int
    connection_id: int
    api: str = ""
    error: str | None = None
    targets: tuple[str, ...] = ()
    count: int = 1               # an error: how many times in a row
    cause: str | None = None     # an error: why, when the answer alone does not say


@dataclass(frozen=True, slots=True)
class ClientEvents:
    client_id: str | None
    host: str
    software: str | None
    events: tuple[Event, ...]


# -- what comes out --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Step:
    kind: str                    # "error", "metadata", "find-coordinator", "connection",
    at: float                    # "success"
    broker: int
    connection_id: int
    api: str
    detail: str
    after_error_ms: float
    after_previous_ms: float


@dataclass(frozen=True, slots=True)
class Episode:
    api: str
    error: str
    broker: int
    at: float
    targets: tuple[str, ...]
    errors: int                  # errors counted in it (the first and the repeats)
    cause: str | None
    steps: tuple[Step, ...]      # the error first, then what followed, in time order
    recovered: bool
    recovery_ms: float | None    # error -> first success
    waiting_ms: float | None     # error -> now, while still recovering
    refreshed: bool              # a lookup came between the error and the success
    note: str


@dataclass(frozen=True, slots=True)
class ClientRecovery:
    client_id: str | None
    host: str
    software: str | None
    status: str                  # "recovering" or "recovered"
    episodes: tuple[Episode, ...]    # newest first, EPISODES_SHOWN at most
    episodes_total: int
    recovering: int
    last_recovery_ms: float | None   # the newest recovered episode's
    worst_recovery_ms: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class _Open:
    error: Event
    keys: list[str]
    errors: int
    lookup: Event | None = None
    connection: Event | None = None
    success: Event | None = None


def _lookup_api(error: Event) -> str:
    about_owner = [t for t in error.targets if not t.startswith("partition ")]
    return FIND_COORDINATOR if about_owner else METADATA


def _starts(e: Event) -> bool:
    return e.error is not None and e.error not in NOT_EPISODES and e.api not in QUIET_APIS


def _ms(a: float, b: float) -> float:
    return round(max(0.0, b - a) * 1000, 1)


def _step(kind: str, e: Event, detail: str, start: float, previous: float) -> Step:
    return Step(kind, e.at, e.broker, e.connection_id, e.api, detail, _ms(start, e.at),
                _ms(previous, e.at))


def _episode(o: _Open, now: float) -> Episode:
    err = o.error
    end = o.success.at if o.success is not None else now
    followed = [(kind, e) for kind, e in (
        ("metadata" if o.lookup is not None and o.lookup.api == METADATA
         else "find-coordinator", o.lookup),
        ("connection", o.connection)) if e is not None and e.at <= end]
    if o.success is not None:
        followed.append(("success", o.success))
    followed.sort(key=lambda ke: (ke[1].at, _RANK[ke[1].kind]))
    why = err.cause or ", ".join(err.targets) or err.api
    steps = [Step("error", err.at, err.broker, err.connection_id, err.api,
                  f"{err.error}: {why}", 0.0, 0.0)]
    previous = err.at
    for kind, e in followed:
        detail = {"connection": f"to broker {e.broker}",
                  "success": ", ".join(e.targets) or e.api}.get(kind, e.api)
        steps.append(_step(kind, e, detail, err.at, previous))
        previous = e.at
    refreshed = any(kind in ("metadata", "find-coordinator") for kind, _ in followed)
    recovered = o.success is not None
    if recovered:
        note = "" if refreshed else \
            "recovered without a lookup: it retried and the same owner answered"
    elif o.lookup is None:
        note = f"no {_lookup_api(err)} request since the error"
    else:
        note = f"looked up the owner; no successful {err.api} since"
    return Episode(
        api=err.api, error=str(err.error), broker=err.broker, at=err.at, targets=err.targets,
        errors=o.errors, cause=err.cause, steps=tuple(steps), recovered=recovered,
        recovery_ms=_ms(err.at, o.success.at) if o.success is not None else None,
        waiting_ms=None if recovered else _ms(err.at, now), refreshed=refreshed, note=note)


def timeline(client: ClientEvents, now: float) -> ClientRecovery | None:
    """The client's episodes, or None when it had no error that starts one."""
    search: OwnerSearch[_Open] = OwnerSearch()
    opened: list[_Open] = []
    for e in sorted(client.events, key=lambda e: (e.at, _RANK.get(e.kind, 9))):
        if e.kind == "error":
            if not _starts(e):
                continue
            keys = _keys(e.api, e.targets)
            ongoing = search.get(keys[0])
            if ongoing is not None and all(search.get(k) is not None for k in keys):
                ongoing.errors += e.count
                continue
            episode = _Open(e, [], e.count)
            episode.keys = search.failed(keys, episode)
            opened.append(episode)
        elif e.kind == "lookup":
            for o in opened:
                if o.success is None and o.lookup is None and e.api == _lookup_api(o.error):
                    o.lookup = e
        elif e.kind == "connect":
            for o in opened:
                if o.success is None and o.connection is None:
                    o.connection = e
        elif e.kind == "success":
            for o in search.succeeded(_keys(e.api, e.targets)):
                if o.success is None:
                    o.success = e
                    search.succeeded(o.keys)      # its other targets: found too
    if not opened:
        return None
    episodes = [_episode(o, now) for o in opened]
    times = [ep.recovery_ms for ep in episodes if ep.recovery_ms is not None]
    waiting = sum(1 for ep in episodes if not ep.recovered)
    shown = sorted(episodes, key=lambda ep: -ep.at)[:EPISODES_SHOWN]
    return ClientRecovery(
        client_id=client.client_id, host=client.host, software=client.software,
        status="recovering" if waiting else "recovered", episodes=tuple(shown),
        episodes_total=len(episodes), recovering=waiting,
        last_recovery_ms=next((ep.recovery_ms for ep in shown if ep.recovery_ms is not None),
                              None),
        worst_recovery_ms=max(times) if times else None)


def recoveries(clients: Iterable[ClientEvents], now: float) -> list[ClientRecovery]:
    """Every client that had an episode: the recovering first, then the newest error."""
    out = [r for c in clients if (r := timeline(c, now)) is not None]
    out.sort(key=lambda r: (r.status != "recovering", -r.episodes[0].at))
    return out
