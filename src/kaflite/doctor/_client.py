"""One client's state, built record by record: what its health and its findings read.

A client is a (source, client.id, host) triple: the same client.id from two hosts is
two clients (two instances of one application), and the records a proxy wrote are
kept apart from the brokers' records of the same traffic. Its connections are keyed
by (broker, connection id), the registry's own numbering on each broker.

Partition attribution. A record lists the partitions a request touched (``partitions``)
and counts its errors by name (``errors``), but does not say which partition got which
error. When the "find the new owner" errors are at least as many as the partitions,
each listed partition got one; when fewer, the record is ambiguous and the doctor
attributes nothing to a partition (its errors are still counted). A record with no
such error is a success on every partition it lists.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from statistics import median

from kaflite.doctor._model import (
    GROUP_OWNER_ERRORS,
    OWNER_ERRORS,
    PARTITION_OWNER_ERRORS,
    ClientHealth,
    ConnectionHealth,
    Evidence,
    GroupHealth,
    MetadataHealth,
    RecoveryHealth,
    Request,
    ThrottleHealth,
    evidence_of,
)
from kaflite.doctor._thresholds import Thresholds
from kaflite.doctor.recovery import OwnerSearch, search_key

__all__ = ["ClientKey", "ClientState", "client_key"]

METADATA = 3
JOIN_GROUP, HEARTBEAT, SYNC_GROUP, OFFSET_COMMIT, CONSUMER_GROUP_HEARTBEAT = 11, 12, 14, 8, 68
# the APIs a partition's leader answers (the consumer's, the producer's, a share
# consumer's): where NOT_LEADER_OR_FOLLOWER means the request went to the wrong broker
PARTITION_APIS = frozenset({0, 1, 2, 23, 78, 79})
NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"
MINUTE_S = 60.0
INTERVALS_KEPT = 256     # heartbeat and commit intervals kept per group, for the median
RECOVERIES_KEPT = 4096   # recovery times kept per client, for the median
GENERATIONS_SHOWN = 8

ClientKey = tuple[str, str | None, str]    # (source, client id, host)


def client_key(r: Request) -> ClientKey:
    return r.source, r.client_id, r.peer.rsplit(":", 1)[0]


def owner_errors(r: Request) -> dict[str, int]:
    return {name: n for name, n in r.errors.items() if name in OWNER_ERRORS}


def attributed_partitions(r: Request, failures: int) -> list[str]:
    """The listed partitions that surely got an owner error (see the module doc)."""
    if not r.partitions or failures < r.partition_count:
        return []
    return list(r.partitions)


@dataclass(slots=True)
class _Connection:
    broker: int
    connection_id: int
    first_seen: float
    last_seen: float
    roles: tuple[str, ...] = ()
    requests: int = 0


@dataclass(slots=True)
class _Member:
    """The client as a member of one group."""

    protocol: str = "classic"
    generations: list[int] = field(default_factory=list)
    join_started: float | None = None
    rebalance_ms: list[float] = field(default_factory=list)
    last_heartbeat: float | None = None
    heartbeat_ms: deque[float] = field(default_factory=lambda: deque(maxlen=INTERVALS_KEPT))
    last_commit: float | None = None
    commit_ms: deque[float] = field(default_factory=lambda: deque(maxlen=INTERVALS_KEPT))

    def generation(self, g: int) -> None:
        if not self.generations or self.generations[-1] != g:
            self.generations.append(g)


def _median(values: deque[float] | list[float]) -> float | None:
    return round(median(values), 1) if values else None


class ClientState:
    """Everything the doctor keeps about one client."""

    def __init__(self, key: ClientKey, limits: Thresholds) -> None:
        self.key = key
        self.limits = limits
        self.software: set[str] = set()
        self.requests = 0
        self.errors: Counter[str] = Counter()
        self.first_seen = self.last_seen = 0.0
        self.connections: dict[tuple[int, int], _Connection] = {}
        # metadata
        self.metadata = 0
        self.metadata_window: deque[float] = deque()
        self.metadata_peak = 0
        self.metadata_peak_records: tuple[Evidence, ...] = ()
        self.metadata_recent: deque[Evidence] = deque(maxlen=limits.evidence_records)
        self.metadata_reasons: Counter[str] = Counter()
        self.metadata_topics: set[str] = set()
        self.last_metadata: float | None = None
        self.last_error: tuple[float, str] | None = None
        # recovery: what waits for a new owner ("Produce partition t-0", "group g", see
        # kaflite.doctor.recovery) -> (error time, error name)
        self.pending: OwnerSearch[tuple[float, str]] = OwnerSearch()
        self.recovery_ms: deque[float] = deque(maxlen=RECOVERIES_KEPT)
        self.owner_errors: Counter[str] = Counter()
        # vip-bootstrap: NOT_LEADER_OR_FOLLOWER answers, and (broker, partition) -> the
        # time of the first one from that broker for that partition
        self.not_leader = 0
        self.refused: dict[tuple[int, str], float] = {}
        self.stale_repeats = 0
        self.stale_evidence: deque[Evidence] = deque(maxlen=limits.evidence_records)
        self.groups: dict[str, _Member] = {}
        self.throttled = 0
        self.throttle_total_ms = 0
        self.throttle_max_ms = 0

    # -- feeding -------------------------------------------------------------------------
    def feed(self, r: Request) -> None:
        ts = r.timestamp
        if not self.requests:
            self.first_seen = ts
        self.last_seen = max(self.last_seen, ts)
        if r.software_name:
            self.software.add(f"{r.software_name} {r.software_version or ''}".strip())
        conn = self.connections.get((r.broker, r.connection_id))
        if conn is None:
            conn = self.connections[(r.broker, r.connection_id)] = _Connection(
                r.broker, r.connection_id, ts, ts)
        conn.last_seen = max(conn.last_seen, ts)
        conn.requests += 1
        if r.roles:
            conn.roles = tuple(r.roles)
        if r.api_key == METADATA:
            self._metadata(r)
        self.requests += 1
        self.errors.update(r.errors)
        if r.errors:
            self.last_error = (ts, next(iter(r.errors)))
        if r.throttle_ms > 0:
            self.throttled += 1
            self.throttle_total_ms += r.throttle_ms
            self.throttle_max_ms = max(self.throttle_max_ms, r.throttle_ms)
        self._recovery(r)
        if r.api_key in PARTITION_APIS:
            self._vip(r)
        if r.group is not None:
            self._group(r)

    def _metadata(self, r: Request) -> None:
        ts = r.timestamp
        limits = self.limits
        if not self.metadata:
            reason = "startup"
        elif self.last_error is not None and ts - self.last_error[0] <= limits.metadata_cause_s:
            reason = f"after {self.last_error[1]}"
        elif set(r.topics) - self.metadata_topics:
            reason = "new topic"
        elif self.last_metadata is None or ts - self.last_metadata >= limits.metadata_periodic_s:
            reason = "periodic"
        else:
            reason = "unexplained"
        self.metadata_reasons[reason] += 1
        self.metadata += 1
        self.metadata_topics.update(r.topics)
        self.last_metadata = ts
        window = self.metadata_window
        window.append(ts)
        while ts - window[0] >= MINUTE_S:
            window.popleft()
        self.metadata_recent.append(evidence_of(r))
        if len(window) > self.metadata_peak:
            self.metadata_peak = len(window)
            self.metadata_peak_records = tuple(self.metadata_recent)

    def _recovery(self, r: Request) -> None:
        owner = owner_errors(r)
        targets: list[str] = []
        if r.api_key in PARTITION_APIS:
            failures = sum(n for name, n in owner.items() if name in PARTITION_OWNER_ERRORS)
            if failures:
                targets = [search_key(r.api, f"partition {p}")
                           for p in attributed_partitions(r, failures)]
            elif not r.errors:
                self._recovered([search_key(r.api, f"partition {p}") for p in r.partitions],
                                r.timestamp)
        if r.group is not None:
            if any(name in GROUP_OWNER_ERRORS for name in owner):
                targets.append(f"group {r.group}")
            elif not r.errors:
                self._recovered([f"group {r.group}"], r.timestamp)
        self.owner_errors.update(owner)
        if owner:
            self.pending.failed(targets, (r.timestamp, next(iter(owner))))

    def _recovered(self, targets: list[str], ts: float) -> None:
        for failed_at, _ in self.pending.succeeded(targets):
            self.recovery_ms.append(max(0.0, (ts - failed_at) * 1000))

    def _vip(self, r: Request) -> None:
        n = r.errors.get(NOT_LEADER, 0)
        if not n:
            if not r.errors:   # the broker leads these after all: start over for them
                for p in r.partitions:
                    self.refused.pop((r.broker, p), None)
            return
        self.not_leader += n
        sent = r.timestamp - r.latency_ms / 1000
        for p in attributed_partitions(r, n):
            first = self.refused.get((r.broker, p))
            if first is None:
                self.refused[(r.broker, p)] = r.timestamp
            elif self.last_metadata is not None and first < self.last_metadata < sent:
                # told the leader since the first refusal, and sent here again
                self.stale_repeats += 1
                self.stale_evidence.append(evidence_of(r))

    def _group(self, r: Request) -> None:
        assert r.group is not None
        member = self.groups.get(r.group)
        if member is None:
            member = self.groups[r.group] = _Member()
        ts, ok = r.timestamp, not r.errors
        api = r.api_key
        if api == JOIN_GROUP:
            if member.join_started is None:
                member.join_started = ts - r.latency_ms / 1000
            if ok and r.generation is not None:
                member.generation(r.generation)
        elif api == SYNC_GROUP and ok and member.join_started is not None:
            member.rebalance_ms.append((ts - member.join_started) * 1000)
            member.join_started = None
        elif api in (HEARTBEAT, CONSUMER_GROUP_HEARTBEAT):
            if api == CONSUMER_GROUP_HEARTBEAT:
                member.protocol = "consumer"
                if ok and r.generation is not None and r.generation > 0:
                    member.generation(r.generation)
            if member.last_heartbeat is not None:
                member.heartbeat_ms.append((ts - member.last_heartbeat) * 1000)
            member.last_heartbeat = ts
        elif api == OFFSET_COMMIT:
            if member.last_commit is not None:
                member.commit_ms.append((ts - member.last_commit) * 1000)
            member.last_commit = ts

    # -- reading -------------------------------------------------------------------------
    def max_open_connections(self) -> int:
        """The most connections seen open at once: each from its first request to its
        last (a lower bound: the log sees requests, not connects and closes)."""
        events = sorted([(c.first_seen, 1) for c in self.connections.values()]
                        + [(c.last_seen, -1) for c in self.connections.values()],
                        key=lambda e: (e[0], -e[1]))
        most = now = 0
        for _, step in events:
            now += step
            most = max(most, now)
        return most

    def idle_connections(self) -> list[_Connection]:
        """Connections silent for ``idle_after_s`` while the client went on, and not
        replaced by a newer one to the same broker with the same roles."""
        conns = list(self.connections.values())
        idle = []
        for c in conns:
            if self.last_seen - c.last_seen < self.limits.idle_after_s:
                continue
            replaced = any(o is not c and o.broker == c.broker and o.roles == c.roles
                           and o.first_seen > c.last_seen for o in conns)
            if not replaced:
                idle.append(c)
        return idle

    def health(self) -> ClientHealth:
        source, client_id, host = self.key
        by_role: dict[str, dict[str, int]] = {}
        for c in self.connections.values():
            for role in c.roles or ("unknown",):
                per_broker = by_role.setdefault(role, {})
                per_broker[str(c.broker)] = per_broker.get(str(c.broker), 0) + 1
        span_min = max(self.last_seen - self.first_seen, MINUTE_S) / MINUTE_S
        recovery = list(self.recovery_ms)
        return ClientHealth(
            client_id=client_id, host=host, source=source,
            software=tuple(sorted(self.software)), requests=self.requests,
            errors=dict(self.errors.most_common()), first_seen=self.first_seen,
            last_seen=self.last_seen,
            connections=tuple(ConnectionHealth(c.connection_id, c.broker, c.roles, c.requests,
                                               c.first_seen, c.last_seen)
                              for c in sorted(self.connections.values(),
                                              key=lambda c: (c.broker, c.connection_id))),
            by_role={role: dict(sorted(b.items())) for role, b in sorted(by_role.items())},
            metadata=MetadataHealth(self.metadata, round(self.metadata / span_min, 1),
                                    self.metadata_peak,
                                    dict(self.metadata_reasons.most_common())),
            recovery=RecoveryHealth(len(recovery), _median(recovery),
                                    round(max(recovery), 1) if recovery else None,
                                    len(self.pending), dict(self.owner_errors.most_common())),
            groups=tuple(GroupHealth(
                group, m.protocol, len(m.generations),
                tuple(m.generations[-GENERATIONS_SHOWN:]), _median(m.rebalance_ms),
                round(max(m.rebalance_ms), 1) if m.rebalance_ms else None,
                _median(m.heartbeat_ms), _median(m.commit_ms))
                for group, m in sorted(self.groups.items())),
            throttle=ThrottleHealth(self.throttled, self.throttle_total_ms,
                                    self.throttle_max_ms))
