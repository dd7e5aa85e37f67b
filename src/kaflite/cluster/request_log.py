"""The request log's record: one served request, as the broker or the proxy saw it.

``__kaflite_requests`` (opt-in: ``kaflite.request.log.enable``, or a proxy's
``request_log``) holds one record per request served. This module is the one
definition of that record, used by whoever writes it (the brokers,
``kaflite.cluster.request_log_writer``; the proxy, ``kaflite.proxy.request_log``)
and whoever reads it (``kaflite requests``):

* ``RequestRecord``: the typed record, with ``encode`` (key, value) and
  ``decode`` (JSON values; unknown fields are ignored, so a newer writer's
  records still read);
* ``pending``: what the request path keeps of a request (a ``Pending`` tuple: the
  connection registry's row, ``observe.ConnectionRecord``, with the client id and
  the roles the registry inferred at that moment, and what
  ``observe.record_request`` collected while it walked the response: topics,
  partitions, error codes); ``build`` makes the record of it later, in the writer,
  where the encoding is done too: the request path pays a tuple and an append;
* ``group_mark``: the group a request is about and the generation (classic
  groups) or member epoch (KIP-848) it carries or was given, so that a reader
  (``kaflite.doctor``) can tell a group's rebalances apart;
* ``RequestBuffer``: the bounded in-memory buffer between the request path and the
  writer. Adding never blocks and never grows it past its capacity: a record that
  does not fit is dropped and counted (``dropped``).

The key is the client id (the connection id when the client sent none), so one
client's records stay in order on one partition of the writer's choice.

A request that touches only ``__kaflite_requests`` (a reader fetching it) and a
follower's replica fetch are not logged: each would add a record that causes the
next one, a log that feeds itself.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple

from kaflite.cluster.observe import ConnectionRecord, api_name, error_name

if TYPE_CHECKING:
    from kaflite.protocol.messages import Struct

__all__ = [
    "MAX_PARTITIONS",
    "NO_MARK",
    "REQUEST_LOG_TOPIC",
    "GroupMark",
    "Pending",
    "RequestBuffer",
    "RequestRecord",
    "Touched",
    "build",
    "group_mark",
    "pending",
    "skipped",
]

REQUEST_LOG_TOPIC = "__kaflite_requests"
# A Metadata request for every topic touches every topic: a record lists this many
# partitions (and topics) at most, and says how many there were.
MAX_PARTITIONS = 64
FETCH = 1
JOIN_GROUP, HEARTBEAT, SYNC_GROUP, OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 11, 12, 14, 8, 68

# what ``observe.record_request`` collects from a response: (topic, partition, error code)
Touched = list[tuple[str | None, int | None, int]]


@dataclass(slots=True)
class RequestRecord:
    """One served request."""

    timestamp: float                 # time.time() when it was answered
    source: str                      # "broker" or "proxy"
    broker: int                      # the broker (a proxy: the upstream node, -1 bootstrap)
    listener: str
    connection_id: int
    peer: str
    client_id: str | None
    software_name: str | None
    software_version: str | None
    principal: str
    api_key: int
    api: str
    version: int
    roles: list[str] = field(default_factory=list)   # as the registry inferred them
    topics: list[str] = field(default_factory=list)
    partitions: list[str] = field(default_factory=list)   # "topic-N"
    partition_count: int = 0         # all partitions touched (``partitions`` is capped)
    error_code: int = 0              # the outermost error, else the first one found
    errors: dict[str, int] = field(default_factory=dict)  # error name -> occurrences
    latency_ms: float = 0.0
    throttle_ms: int = 0
    group: str | None = None         # the group a group API names (``group_mark``)
    generation: int | None = None    # its generation or member epoch, where it has one

    @property
    def key(self) -> bytes:
        return (self.client_id or f"connection-{self.connection_id}").encode()

    @property
    def error(self) -> str | None:
        return error_name(self.error_code) if self.error_code else None

    def encode(self) -> tuple[bytes, bytes]:
        """The record's key and value."""
        return self.key, _ENCODER.encode(self.to_dict()).encode()

    @classmethod
    def decode(cls, value: bytes | str) -> RequestRecord:
        raw = json.loads(value)
        if not isinstance(raw, dict):
            raise ValueError("a request log record is a JSON object")
        return cls(**{k: v for k, v in raw.items() if k in _FIELDS})

    def to_dict(self) -> dict[str, Any]:
        # (dataclasses.asdict copies deeply: three times the cost of the JSON encoding)
        return {name: getattr(self, name) for name in _FIELDS}


_FIELDS = tuple(f.name for f in fields(RequestRecord))
_ENCODER = json.JSONEncoder(separators=(",", ":"))


def skipped(info: ConnectionRecord, api_key: int, touched: Touched) -> bool:
    """Requests that are not logged: replica fetches, and those about the log alone."""
    if info.replica:      # from its first request, its client id says so
        return True
    topics = {t for t, _, _ in touched if t is not None}
    if topics:
        return topics == {REQUEST_LOG_TOPIC}
    # An incremental Fetch (KIP-227) with nothing new names no partition: it is about
    # the log alone when the log is all this connection fetches.
    return api_key == FETCH and bool(info.partitions) and \
        all(t == REQUEST_LOG_TOPIC for t, _ in info.partitions)


class GroupMark(NamedTuple):
    """The group a request names, and its generation or member epoch if it has one."""

    group: str | None = None
    generation: int | None = None


NO_MARK = GroupMark()
# where each group API keeps the generation (classic) or member epoch (KIP-848): the
# response's for JoinGroup (the generation it starts) and ConsumerGroupHeartbeat (the
# epoch the member is given), the request's for the rest (the one the member is in)
_GENERATION_IN_RESPONSE = {JOIN_GROUP: "generation_id", CONSUMER_GROUP_HEARTBEAT: "member_epoch"}
_GENERATION_IN_REQUEST = {SYNC_GROUP: "generation_id", HEARTBEAT: "generation_id",
                          OFFSET_COMMIT: "generation_id_or_member_epoch"}


def group_mark(api_key: int, request: Struct, response: Struct | None) -> GroupMark:
    """The group ``request`` is about (its ``group_id``) and the generation or member epoch
    it carries or was given; ``NO_MARK`` for a request that names no group."""
    group = getattr(request, "group_id", None)
    if not isinstance(group, str) or not group:
        return NO_MARK
    generation: object = None
    name = _GENERATION_IN_RESPONSE.get(api_key)
    if name is not None:
        if response is not None and not getattr(response, "error_code", 0):
            generation = getattr(response, name, None)
    else:
        name = _GENERATION_IN_REQUEST.get(api_key)
        if name is not None:
            generation = getattr(request, name, None)
    return GroupMark(group, generation if isinstance(generation, int) and generation >= 0
                     else None)


class Pending(NamedTuple):
    """What the request path keeps of a request: taken in a microsecond or two; the
    record is built and encoded later, by the writer (``build``, ``encode``)."""

    timestamp: float
    info: ConnectionRecord
    client_id: str | None
    roles: list[str]
    api_key: int
    version: int
    latency_ms: float
    throttle_ms: int
    touched: Touched
    source: str = "broker"
    mark: GroupMark = NO_MARK

    def record(self) -> RequestRecord:
        return build(self)

    def encode(self) -> tuple[bytes, bytes]:
        return build(self).encode()


def pending(info: ConnectionRecord, api_key: int, version: int, latency_ms: float,
            throttle_ms: int, touched: Touched, source: str = "broker",
            mark: GroupMark = NO_MARK) -> Pending:
    """A request just recorded in ``info`` (``observe.record_request``), as it is now."""
    return Pending(time.time(), info, info.client_id, info.roles, api_key, version,
                   latency_ms, throttle_ms, touched, source, mark)


def build(p: Pending) -> RequestRecord:
    """The record of a pending request."""
    topics: dict[str, None] = {}
    parts: dict[tuple[str, int], None] = {}
    counts: dict[int, int] = {}
    first = 0
    for topic, partition, code in p.touched:
        if topic is not None:
            topics[topic] = None
            if partition is not None:
                parts[(topic, partition)] = None
        if code:
            counts[code] = counts.get(code, 0) + 1
            first = first or code
    info = p.info
    return RequestRecord(
        timestamp=p.timestamp, source=p.source, broker=info.broker_id,
        listener=info.listener, connection_id=info.connection_id, peer=info.peer,
        client_id=p.client_id, software_name=info.software_name,
        software_version=info.software_version, principal=info.principal,
        api_key=p.api_key, api=api_name(p.api_key), version=p.version, roles=p.roles,
        topics=list(topics)[:MAX_PARTITIONS],
        partitions=[f"{t}-{i}" for t, i in list(parts)[:MAX_PARTITIONS]],
        partition_count=len(parts), error_code=first,
        errors={error_name(c): n for c, n in sorted(counts.items())},
        latency_ms=round(p.latency_ms, 3), throttle_ms=p.throttle_ms,
        group=p.mark.group, generation=p.mark.generation)


class RequestBuffer:
    """Requests waiting for the writer: bounded, never blocking, drops counted."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._records: deque[Pending] = deque()
        self.added = 0
        self.dropped = 0
        self.written = 0

    def add(self, record: Pending) -> bool:
        if len(self._records) >= self.capacity:
            self.dropped += 1
            return False
        self._records.append(record)
        self.added += 1
        return True

    def drain(self, limit: int | None = None) -> list[Pending]:
        """Take up to ``limit`` records (all of them without), oldest first."""
        n = len(self._records) if limit is None else min(limit, len(self._records))
        return [self._records.popleft() for _ in range(n)]

    def put_back(self, records: Iterable[Pending]) -> None:
        """Return records the writer could not write, in front, as far as they fit."""
        room = self.capacity - len(self._records)
        back = list(records)
        keep, lost = back[:max(0, room)], back[max(0, room):]
        self._records.extendleft(reversed(keep))
        self.dropped += len(lost)

    def __len__(self) -> int:
        return len(self._records)

    def stats(self) -> dict[str, int]:
        return {"buffered": len(self._records), "capacity": self.capacity,
                "added": self.added, "dropped": self.dropped, "written": self.written}
