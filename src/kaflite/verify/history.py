"""The history of a verify run: every operation, as typed records, in the order seen.

Theory of operation
-------------------
As in Jepsen, a run is judged only by what its processes observed. Each process
(a producer, a consumer, the nemesis, the final drain) appends operations to one
``History``; the checker (``kaflite.verify.checker``) reads nothing else. Times are
``time.monotonic()`` seconds since the run started, so operations of different
threads can be ordered in real time.

================  ==================================================================
``Meta``          the run's configuration (client, workload, seed...), first line
``Send``          a producer's send: ``invoke``, then ``ok`` (partition, offset),
                  ``fail`` (definitely not written) or ``info`` (outcome unknown)
``Poll``          what one poll of one consumer returned for one partition:
                  ``(offset, value)`` pairs in the order handed out
``Commit``        a consumer's offset commit for one partition (``ok``/``fail``)
``Ack``           a share consumer's acknowledgement of records of one partition:
                  ``accept``/``release``/``reject``, then ``ok``/``fail``/``info``
``Unseen``        records a share consumer's library was delivered and never handed
                  to the application (given back, or expired in its buffer)
``Assign``        a consumer's assignment changed: ``assign``, ``revoke``, ``lost``,
                  ``seek`` (the application moved the position) or ``close``
``Subscribe``     a consumer changed its subscription (group churn)
``Removed``       a coordinator removed a member without its asking (its session
                  expired...): the coordinator's side of the membership
``Txn``           a transaction ended: what was asked (``commit``/``abort``), what
                  came back (``ok``/``fail``/``info``), the values it carried
``Fault``         one nemesis fault: kind, arguments, start and end
``Phase``         a point in the run: ``healed``, ``writers-done`` (per topic)...
``Drain``         the final read of one partition from offset 0 to its end: the
                  ground truth of the log, per isolation level
``Note``          anything worth keeping that the checker ignores (client errors)
================  ==================================================================

A history is written as JSON lines (``dump``/``load``) so that a run can be
checked again, or checked by a newer checker, without running it again.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

__all__ = ["OPS", "Ack", "Assign", "Commit", "Drain", "Fault", "History", "Meta", "Note", "Op",
           "Phase", "Poll", "Probe", "Removed", "Send", "Subscribe", "Txn", "Unseen", "from_dict",
           "to_dict"]

Records = tuple[tuple[int, int], ...]  # (offset, value) pairs


@dataclass(frozen=True, kw_only=True)
class Op:
    """One operation: when (seconds since the run started) and by which process."""

    kind: ClassVar[str] = "op"
    time: float
    process: str


@dataclass(frozen=True, kw_only=True)
class Meta(Op):
    kind: ClassVar[str] = "meta"
    config: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Send(Op):
    kind: ClassVar[str] = "send"
    type: str                    # invoke | ok | fail | info
    topic: str
    value: int
    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    txn: str | None = None       # the transaction it was sent in


@dataclass(frozen=True, kw_only=True)
class Poll(Op):
    kind: ClassVar[str] = "poll"
    group: str | None
    topic: str
    partition: int
    records: Records
    isolation: str = "read_uncommitted"
    # share groups (KIP-932) only: each record's delivery count, and when the
    # acquisition locks of these records end at the earliest (run clock)
    deliveries: tuple[int, ...] = ()
    lock_until: float | None = None
    client: str | None = None


@dataclass(frozen=True, kw_only=True)
class Ack(Op):
    """A share consumer's acknowledgement of records it was delivered (KIP-932), for one
    partition: ``accept``, ``release`` or ``reject``. ``invoked``: when the member sent
    it; ``time``: when the partition's leader answered (``ok``, or ``fail`` with its
    error), or when the member gave up waiting (``info``: the outcome is unknown)."""
    kind: ClassVar[str] = "ack"
    type: str
    outcome: str
    group: str
    topic: str
    partition: int
    offsets: tuple[int, ...]
    invoked: float
    client: str | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Unseen(Op):
    """Records a share consumer's library was delivered and gave back, or let expire,
    without handing them to the application (a partition taken away, the consumer
    closed, a lock that ended in its buffer): deliveries the group counts, that no
    ``Poll`` shows. ``time``: when the library said so."""
    kind: ClassVar[str] = "unseen"
    group: str
    topic: str
    partition: int
    offsets: tuple[int, ...]
    client: str | None = None
    why: str = ""


@dataclass(frozen=True, kw_only=True)
class Commit(Op):
    kind: ClassVar[str] = "commit"
    type: str                    # ok | fail
    group: str
    topic: str
    partition: int
    offset: int                  # the next offset to read, as Kafka commits it
    invoked: float               # when the commit was asked for (``time``: when it ended)
    error: str | None = None
    asynchronous: bool = False   # reported to a callback, not returned by the call


@dataclass(frozen=True, kw_only=True)
class Assign(Op):
    kind: ClassVar[str] = "assign"
    type: str                    # assign | revoke | lost | seek | close
    group: str | None
    topic: str
    partitions: tuple[int, ...]
    client: str | None = None    # the client.id of the consumer that reported it


@dataclass(frozen=True, kw_only=True)
class Subscribe(Op):
    """A consumer changed its subscription to ``topics`` (group churn)."""
    kind: ClassVar[str] = "subscribe"
    group: str
    topics: tuple[str, ...]
    client: str | None = None


@dataclass(frozen=True, kw_only=True)
class Removed(Op):
    """A group coordinator removed a member without its asking (session expiry, a
    rebalance it did not finish, a fence); ``process`` is the consumer whose client it
    was, as its ``client.id`` says (``kaflite.cluster.groups.removals``)."""
    kind: ClassVar[str] = "removed"
    group: str
    client: str
    member_id: str
    protocol: str
    cause: str


@dataclass(frozen=True, kw_only=True)
class Txn(Op):
    kind: ClassVar[str] = "txn"
    txn: str                     # unique id of the transaction
    type: str                    # commit | abort: what the producer asked for
    outcome: str                 # ok | fail | info
    values: tuple[tuple[str, int], ...]   # (topic, value) sent in it
    offsets: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, offset) committed in it
    group: str | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Fault(Op):
    kind: ClassVar[str] = "fault"
    fault: str
    args: dict[str, Any] = field(default_factory=dict)
    start: float = 0.0
    end: float = 0.0
    error: str | None = None     # set when the fault could not be applied


@dataclass(frozen=True, kw_only=True)
class Phase(Op):
    kind: ClassVar[str] = "phase"
    name: str                    # nemesis-start | healed | writers-done | done
    topic: str | None = None


@dataclass(frozen=True, kw_only=True)
class Drain(Op):
    kind: ClassVar[str] = "drain"
    topic: str
    partition: int
    isolation: str
    records: Records
    end_offset: int              # the high watermark (or LSO) the drain read up to


@dataclass(frozen=True, kw_only=True)
class Note(Op):
    kind: ClassVar[str] = "note"
    text: str


@dataclass(frozen=True, kw_only=True)
class Probe(Op):
    """What a side measurement saw over the run (``_probe``: ApiVersions round trips)."""
    kind: ClassVar[str] = "probe"
    stats: dict[str, int]


OPS: dict[str, type[Op]] = {cls.kind: cls for cls in (
    Meta, Send, Poll, Ack, Unseen, Commit, Assign, Subscribe, Removed, Txn, Fault, Phase, Drain, Note,
    Probe)}


def to_dict(op: Op) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": op.kind}
    out.update(dataclasses.asdict(op))
    return out


def _tuples(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def from_dict(data: dict[str, Any]) -> Op:
    """The operation a ``to_dict`` (or a JSON line) describes; lists become tuples."""
    data = dict(data)
    cls = OPS[data.pop("kind")]
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        hint = hints.get(f.name)
        is_tuple = typing.get_origin(hint) is tuple or (
            isinstance(hint, types.UnionType)
            and any(typing.get_origin(a) is tuple for a in typing.get_args(hint)))
        kwargs[f.name] = _tuples(value) if is_tuple else value
    return cls(**kwargs)


class History:
    """Operations appended by many threads; read in the order they were appended."""

    def __init__(self, ops: Iterable[Op] = (), t0: float | None = None) -> None:
        self.t0 = time.monotonic() if t0 is None else t0
        self._ops: list[Op] = list(ops)
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def add(self, op: Op) -> Op:
        with self._lock:
            self._ops.append(op)
        return op

    @property
    def ops(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self._ops)

    def of(self, cls: type[Op]) -> list[Any]:
        return [op for op in self.ops if isinstance(op, cls)]

    # -- JSON lines -------------------------------------------------------------------
    def dump(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for op in self.ops:
                f.write(json.dumps(to_dict(op), separators=(",", ":")) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> History:
        ops = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    ops.append(from_dict(json.loads(line)))
        return cls(ops, t0=0.0)
