"""What the doctor reads and what it reports.

``Request`` is the shape of a request log record the analyzer reads: the fields of
``kaflite.cluster.request_log.RequestRecord`` it needs, as a protocol, so that the
doctor depends on no broker code (a ``RequestRecord`` is one; so is any object with
these attributes). The rest are the doctor's answers, plain frozen dataclasses that
``to_dict`` turns into JSON-ready dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

__all__ = [
    "ClientHealth",
    "ConnectionHealth",
    "Evidence",
    "Finding",
    "GroupHealth",
    "MetadataHealth",
    "RecoveryHealth",
    "Report",
    "Request",
    "ThrottleHealth",
    "evidence_of",
]

# Errors that mean "this is not the owner any more: go and find the new one". The
# partition ones send a client to Metadata, the group ones to FindCoordinator.
PARTITION_OWNER_ERRORS = frozenset({
    "NOT_LEADER_OR_FOLLOWER", "LEADER_NOT_AVAILABLE", "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH", "UNKNOWN_TOPIC_OR_PARTITION"})
GROUP_OWNER_ERRORS = frozenset({
    "NOT_COORDINATOR", "COORDINATOR_NOT_AVAILABLE", "COORDINATOR_LOAD_IN_PROGRESS"})
OWNER_ERRORS = PARTITION_OWNER_ERRORS | GROUP_OWNER_ERRORS


class Request(Protocol):
    """A request log record, as far as the doctor reads it."""

    @property
    def timestamp(self) -> float: ...
    @property
    def source(self) -> str: ...
    @property
    def broker(self) -> int: ...
    @property
    def connection_id(self) -> int: ...
    @property
    def peer(self) -> str: ...
    @property
    def client_id(self) -> str | None: ...
    @property
    def software_name(self) -> str | None: ...
    @property
    def software_version(self) -> str | None: ...
    @property
    def principal(self) -> str: ...
    @property
    def api_key(self) -> int: ...
    @property
    def api(self) -> str: ...
    @property
    def roles(self) -> Sequence[str]: ...
    @property
    def topics(self) -> Sequence[str]: ...
    @property
    def partitions(self) -> Sequence[str]: ...
    @property
    def partition_count(self) -> int: ...
    @property
    def error_code(self) -> int: ...
    @property
    def errors(self) -> Mapping[str, int]: ...
    @property
    def latency_ms(self) -> float: ...
    @property
    def throttle_ms(self) -> int: ...
    @property
    def group(self) -> str | None: ...
    @property
    def generation(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Evidence:
    """One record, as much of it as a finding shows."""

    timestamp: float
    broker: int
    connection_id: int
    client_id: str | None
    api: str
    partitions: tuple[str, ...]
    group: str | None
    errors: tuple[tuple[str, int], ...]


def evidence_of(r: Request) -> Evidence:
    return Evidence(r.timestamp, r.broker, r.connection_id, r.client_id, r.api,
                    tuple(r.partitions), r.group, tuple(sorted(r.errors.items())))


@dataclass(frozen=True, slots=True)
class Finding:
    """A named anti-pattern, about a client or a group, with what triggered it."""

    name: str                       # "vip-bootstrap", "metadata-storm", ...
    subject: str                    # "client app-1 @ 10.0.0.7" or "group orders"
    explanation: str                # one line for a user: what it means, what to do
    counts: dict[str, float]        # the numbers compared with the thresholds
    records: tuple[Evidence, ...] = ()   # a few of the records behind it
    client_id: str | None = None
    group: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ConnectionHealth:
    connection_id: int
    broker: int
    roles: tuple[str, ...]          # the latest roles the registry inferred
    requests: int
    first_seen: float
    last_seen: float


@dataclass(frozen=True, slots=True)
class MetadataHealth:
    requests: int
    per_minute: float               # over the client's span (a minute at least)
    peak_per_minute: int            # the most in any 60-second window
    reasons: dict[str, int]         # "startup", "after NOT_LEADER_OR_FOLLOWER", ...


@dataclass(frozen=True, slots=True)
class RecoveryHealth:
    """From a "find the new owner" error to the next success on the same partition or
    group."""

    recovered: int
    median_ms: float | None
    max_ms: float | None
    unrecovered: int                # errors not (yet) followed by a success
    by_error: dict[str, int]        # owner errors seen, by name


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """One client's view of one group it is a member of."""

    group: str
    protocol: str                   # "classic" or "consumer" (KIP-848)
    rebalances: int                 # generations joined (classic), epochs given (KIP-848)
    generations: tuple[int, ...]    # the last few
    rebalance_median_ms: float | None   # classic: first JoinGroup sent -> SyncGroup answered
    rebalance_max_ms: float | None
    heartbeat_interval_ms: float | None  # median time between heartbeats
    commit_interval_ms: float | None     # median time between OffsetCommits


@dataclass(frozen=True, slots=True)
class ThrottleHealth:
    throttled_requests: int
    total_ms: int
    max_ms: int


@dataclass(frozen=True, slots=True)
class ClientHealth:
    client_id: str | None
    host: str
    source: str                     # "broker" (the brokers' log) or "proxy"
    software: tuple[str, ...]
    requests: int
    errors: dict[str, int]
    first_seen: float
    last_seen: float
    connections: tuple[ConnectionHealth, ...]
    by_role: dict[str, dict[str, int]]   # role -> broker (as text, for JSON) -> connections
    metadata: MetadataHealth
    recovery: RecoveryHealth
    groups: tuple[GroupHealth, ...]
    throttle: ThrottleHealth

    @property
    def subject(self) -> str:
        return f"client {self.client_id or '(none)'} @ {self.host}" + (
            " via proxy" if self.source == "proxy" else "")


@dataclass(frozen=True, slots=True)
class Report:
    records: int
    first: float | None
    last: float | None
    brokers: tuple[int, ...]
    clients: tuple[ClientHealth, ...]
    findings: tuple[Finding, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for c, client in zip(out["clients"], self.clients, strict=True):
            c["subject"] = client.subject
        return out
