"""The connection registry: which client connection is which, and what it does.

Every ``ServerConnection`` keeps a ``ConnectionRecord``. After each request the
connection calls ``record_request``, which

* counts the request and its latency per API,
* counts every error code in the response, at whatever level the API reports it
  (top, group, topic or partition; found by ``_msgscope.walk``, so no API needs
  its own code),
* keeps the request's time in a bounded ring per API, from which the cadences
  of a client are measured (heartbeat interval, commit interval, fetch rate),
* and infers the connection's roles from what travels on it:

  ==================  =========================================================
  bootstrap           only discovery: ApiVersions, Metadata (also FindCoordinator,
                      DescribeCluster and SASL, which are discovery too), with
                      perhaps the client's telemetry (KIP-714)
  partition-leader    Produce, Fetch, ListOffsets or OffsetForLeaderEpoch answered
                      for a partition this broker leads (the partitions are listed)
  group-coordinator   a member's group API (join, sync, heartbeat, commit, leave)
                      answered by the group's coordinator (groups listed); reads
                      (OffsetFetch, DescribeGroups) are an admin's and add no role
  txn-coordinator     a transactional API answered by the coordinator (ids listed)
  replica-fetcher     a follower broker's Fetch (replica id >= 0), or from the first
                      request a client id of a broker's fetcher (``broker-<id>-
                      fetcher-<n>``, ``kaflite.broker_clients``)
  share-coordinator   ShareGroupHeartbeat answered by the share group's coordinator
                      (share groups listed)
  share-partition-    ShareFetch or ShareAcknowledge answered for a partition this
  leader              broker leads (share-partitions listed)
  admin               none of the above, and an admin request (topics, configs,
                      ACLs, quotas, listing or describing groups...): a console's or
                      a tool's admin client
  txn-marker-sender   a transaction coordinator's WriteTxnMarkers, or from the first
                      request its client id (``broker-<id>-txn-marker-sender``)
  inter-broker        another broker's other channels, by their client id (the
                      share-group state persister...)
  other               none of the above (an idempotent producer's InitProducerId...)
  ==================  =========================================================

A broker's own connections (the last three above, ``ConnectionRecord.broker_role``)
are not a client's: ``clients()`` leaves them out, and ``connections()`` lists them
only when asked (``include_replicas``).

A role is dropped as soon as the broker says it is no longer the owner:
NOT_LEADER_OR_FOLLOWER for a partition, NOT_COORDINATOR for a group, which is
exactly when a client goes to find the new owner.

``Registry`` is the cluster-wide view: ``connections()`` lists every connection
of every running broker and ``clients()`` groups them by (client.id, host), with
the fan-out (connections per broker) and the measured cadences.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from kaflite.broker_clients import INTER_BROKER, REPLICA_FETCHER, TXN_MARKER_SENDER, broker_client
from kaflite.cluster._msgscope import TopicResolver, shape, walk
from kaflite.cluster.observe_history import (
    History,
    group_target,
    partition_target,
    transaction_target,
)
from kaflite.cluster.quotas.manager import Usage
from kaflite.protocol import errors
from kaflite.protocol.messages import REGISTRY, ApiVersionsRequest, Struct

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster

__all__ = [
    "CLOSED_KEPT",
    "ApiStats",
    "ClientSnapshot",
    "ConnectionRecord",
    "ConnectionSnapshot",
    "Registry",
    "api_name",
    "error_name",
    "record_request",
]

RING = 128  # request timestamps kept per API and connection
CLOSED_KEPT = 256      # closed connections each broker remembers (broker.closed_connections)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT = 0, 1, 2, 3, 8
HEARTBEAT, API_VERSIONS, OFFSET_FOR_LEADER_EPOCH, CONSUMER_GROUP_HEARTBEAT = 12, 18, 23, 68
FIND_COORDINATOR, SASL_HANDSHAKE, SASL_AUTHENTICATE, DESCRIBE_CLUSTER = 10, 17, 36, 60
LOOKUP_APIS = frozenset({METADATA, FIND_COORDINATOR})   # how a client finds a new owner

DISCOVERY_APIS = frozenset({API_VERSIONS, METADATA, FIND_COORDINATOR, SASL_HANDSHAKE,
                            SASL_AUTHENTICATE, DESCRIBE_CLUSTER})
# KIP-714's requests ride on whatever connection the client picked: they add no role
TELEMETRY_APIS = frozenset({71, 72})
PARTITION_LEADER_APIS = frozenset({PRODUCE, FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH})
# What an admin client sends (Kafka's Admin API): a connection with no other role that
# sends one of these is an admin's (a console's, a tool's). OffsetFetch is here: with no
# member's request beside it, it is a tool reading a group's offsets.
ADMIN_APIS = frozenset({
    9, 15, 16, 19, 20, 21, 29, 30, 31, 32, 33, 34, 35, 37, 38, 39, 40, 41, 42, 43, 44, 45,
    46, 47, 48, 49, 50, 51, 55, 57, 61, 64, 65, 66, 69, 74, 75, 77, 90, 91, 92})
# Requests a member sends to its group's coordinator (classic, KIP-848, share groups);
# admin requests (DescribeGroups, OffsetDelete...) do not make a coordinator connection.
# OffsetFetch is a read that admin tools send too (kafka-consumer-groups --describe, a
# console's lag): it drops a group the broker no longer coordinates but never adds one. A
# member's connection gets the role from its join, heartbeats and commits.
GROUP_COORDINATOR_APIS = frozenset({8, 11, 12, 13, 14, 28, 68})
OFFSET_FETCH = 9
SHARE_GROUP_HEARTBEAT = 76   # a share consumer's coordinator connection
# Requests a transactional producer sends to its transaction coordinator.
TXN_COORDINATOR_APIS = frozenset({22, 24, 25, 26})
# What a transaction coordinator sends the leaders of a transaction's partitions.
WRITE_TXN_MARKERS = 27

NOT_LEADER_CODES = frozenset({errors.NotLeaderOrFollowerError.code,
                              errors.LeaderNotAvailableError.code,
                              errors.UnknownTopicOrPartitionError.code,
                              errors.FencedLeaderEpochError.code})
NOT_COORDINATOR_CODES = frozenset({errors.NotCoordinatorError.code,
                                   errors.CoordinatorNotAvailableError.code})


def api_name(key: int) -> str:
    info = REGISTRY.get(key)
    return info.name if info is not None else f"Api{key}"


def error_name(code: int) -> str:
    cls = errors.ERROR_CLASSES.get(code)
    return cls.name if cls is not None else f"UNKNOWN_ERROR_CODE_{code}"


@dataclass
class ApiStats:
    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    errors: dict[int, int] = field(default_factory=dict)
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RING))  # monotonic

    @property
    def mean_ms(self) -> float:
        return self.total_ms / self.count if self.count else 0.0


@dataclass
class ConnectionRecord:
    """What the broker knows about one client connection (the registry's row)."""

    connection_id: int
    broker_id: int
    peer: str
    client_id: str | None = None
    software_name: str | None = None
    software_version: str | None = None
    principal: str = "User:ANONYMOUS"
    opened_at: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.time)
    bytes_in: int = 0
    bytes_out: int = 0
    apis: dict[int, ApiStats] = field(default_factory=dict)
    replica_id: int | None = None
    partitions: set[tuple[str, int]] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    transactional_ids: set[str] = field(default_factory=set)
    # share groups (KIP-932): the groups heartbeating here, the share-partitions fetched here
    share_groups: set[str] = field(default_factory=set)
    share_partitions: set[tuple[str, int]] = field(default_factory=set)
    closed_at: float | None = None
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    authenticated_at: float | None = None     # the last (re-)authentication
    reauthentications: int = 0
    session_expires_at: float | None = None   # KIP-368: None = no session lifetime
    # -- client quotas: each quota that applies (key -> limit, rate, entity), the
    # throttle time last given, how many throttles and their total, and requests
    # that arrived while the channel was muted for a throttle (see network.py)
    quotas: dict[str, Usage] = field(default_factory=dict)
    throttle_time_ms: int = 0
    throttles: int = 0
    throttled_ms_total: int = 0
    requests_while_muted: int = 0
    # -- client telemetry (KIP-714, kaflite.cluster.telemetry): the client instance id
    # the connection asked for or pushed as, and the latest value of every metric its
    # instance pushed (shared with the instance), how many pushes and when the last
    client_instance_id: str | None = None
    telemetry: dict[str, float] = field(default_factory=dict)
    telemetry_pushes: int = 0
    telemetry_at: float | None = None
    # -- what it did around its errors, for recovery timelines (observe_history)
    history: History = field(default_factory=History)

    def throttled(self, ms: int) -> None:
        self.throttle_time_ms = ms
        self.throttles += 1
        self.throttled_ms_total += ms

    @property
    def host(self) -> str:
        return self.peer.rsplit(":", 1)[0]

    @property
    def broker_role(self) -> str | None:
        """What this connection does for the broker that opened it (``replica-fetcher``,
        ``txn-marker-sender``, ``inter-broker``); None for a client's connection. A
        follower's Fetch says so (its replica id); before it, the client id does."""
        if self.replica_id is not None:
            return REPLICA_FETCHER
        found = broker_client(self.client_id)
        return None if found is None else found.role

    @property
    def replica_of(self) -> int | None:
        """The follower whose replica fetcher this connection is, from its first request
        (the Fetch's replica id, or before it the client id); None for any other."""
        if self.replica_id is not None:
            return self.replica_id
        found = broker_client(self.client_id)
        return found.broker if found is not None and found.role == REPLICA_FETCHER else None

    @property
    def replica(self) -> bool:
        """A follower's replica fetcher (from its first request)."""
        return self.replica_of is not None

    @property
    def roles(self) -> list[str]:
        roles = []
        broker_role = self.broker_role
        if broker_role == REPLICA_FETCHER:
            roles.append(REPLICA_FETCHER)
        elif self.partitions:
            roles.append("partition-leader")
        if self.groups:
            roles.append("group-coordinator")
        if self.transactional_ids:
            roles.append("txn-coordinator")
        if self.share_groups:
            roles.append("share-coordinator")
        if self.share_partitions:
            roles.append("share-partition-leader")
        if WRITE_TXN_MARKERS in self.apis or broker_role == TXN_MARKER_SENDER:
            roles.append(TXN_MARKER_SENDER)
        if not roles and broker_role == INTER_BROKER:
            roles.append(INTER_BROKER)
        if not roles:
            used = set(self.apis) - TELEMETRY_APIS
            roles.append("bootstrap" if used <= DISCOVERY_APIS
                         else "admin" if used & ADMIN_APIS else "other")
        return roles

    def stats(self, key: int) -> ApiStats:
        stats = self.apis.get(key)
        if stats is None:
            stats = self.apis[key] = ApiStats()
        return stats


# -- recording ---------------------------------------------------------------------------
def _request_groups(api_key: int, request: Struct) -> list[str]:
    group = getattr(request, "group_id", None)
    if isinstance(group, str) and group:
        return [group]
    out = []
    for g in getattr(request, "groups", None) or []:  # OffsetFetch v8+
        gid = getattr(g, "group_id", None)
        if isinstance(gid, str) and gid:
            out.append(gid)
    return out


def request_group(request: Struct) -> str | None:
    """The group a request is about, if it names one at the top."""
    group = getattr(request, "group_id", None)
    return group if isinstance(group, str) and group else None


def record_request(info: ConnectionRecord, api_key: int, version: int, request: Struct,
                   response: Struct | None, elapsed_ms: float,
                   resolve: TopicResolver | None = None,
                   touched: list[tuple[str | None, int | None, int]] | None = None) -> None:
    """Account one answered (or dropped) request on ``info``; with a ``touched`` list,
    add to it the (topic, partition, error code) of every place the response reports
    an error at (the request log's record, ``kaflite.cluster.request_log``)."""
    stats = info.stats(api_key)
    stats.count += 1
    stats.total_ms += elapsed_ms
    stats.max_ms = max(stats.max_ms, elapsed_ms)
    stats.recent.append(time.monotonic())
    now = info.last_activity = time.time()
    if isinstance(request, ApiVersionsRequest) and request.client_software_name:
        info.software_name = request.client_software_name
        info.software_version = request.client_software_version
    history = info.history
    lookup = api_key in LOOKUP_APIS
    if lookup:
        history.looked_up(now, api_key)
    if response is None:
        history.dropped(now, api_key)
        return
    group = request_group(request)
    failed_groups: set[str] = set()
    top_error = first_error = 0
    failed: list[str] = []       # the targets (partitions, groups) that got an error
    gained: list[str] = []       # the targets this connection serves from now on
    ok: list[str] | None = [] if api_key in history.failing else None
    owned = history.owned
    track_partitions = api_key in PARTITION_LEADER_APIS and info.replica_id is None
    for slot in walk(response, version, resolve, group):
        if not slot.error_at(version):
            continue
        field = shape(type(slot.obj)).error
        code = getattr(slot.obj, field.name, 0) if field is not None else 0
        if slot.level == "top":
            top_error = code
        if touched is not None:
            touched.append((slot.topic, slot.partition, code))
        if code:
            stats.errors[code] = stats.errors.get(code, 0) + 1
            first_error = first_error or code
        if slot.level == "partition" and slot.topic is not None and slot.partition is not None:
            tp = (slot.topic, slot.partition)
            if code:
                failed.append(partition_target(*tp))
            elif ok is not None:
                ok.append(partition_target(*tp))
            if code in NOT_LEADER_CODES:
                info.partitions.discard(tp)
                owned.discard(tp)
            elif code == 0 and track_partitions:
                info.partitions.add(tp)
                if tp not in owned:
                    owned.add(tp)
                    gained.append(partition_target(*tp))
        elif code and slot.group is not None:
            failed.append(group_target(slot.group))
        if code in NOT_COORDINATOR_CODES and slot.group is not None:
            failed_groups.add(slot.group)
    if top_error in NOT_COORDINATOR_CODES and group is not None:
        failed_groups.add(group)
    if top_error and group is not None:
        failed.append(group_target(group))
    elif group is not None and ok is not None:
        ok.append(group_target(group))
    if api_key in GROUP_COORDINATOR_APIS:
        for g in _request_groups(api_key, request):
            if g in failed_groups:
                info.groups.discard(g)
                owned.discard(("group", g))
            else:
                info.groups.add(g)
                if not top_error and ("group", g) not in owned:
                    owned.add(("group", g))
                    gained.append(group_target(g))
    elif api_key == OFFSET_FETCH:
        info.groups.difference_update(failed_groups)
    if api_key == SHARE_GROUP_HEARTBEAT and group is not None:
        if top_error in NOT_COORDINATOR_CODES:
            info.share_groups.discard(group)
            owned.discard(("group", group))
        elif not top_error:
            info.share_groups.add(group)
            if ("group", group) not in owned:
                owned.add(("group", group))
                gained.append(group_target(group))
    if api_key in TXN_COORDINATOR_APIS:
        txn = getattr(request, "transactional_id", None) \
            or getattr(request, "v3_and_below_transactional_id", None)  # AddPartitionsToTxn
        if isinstance(txn, str) and txn:
            if top_error:
                failed.append(transaction_target(txn))
            if top_error in NOT_COORDINATOR_CODES:
                info.transactional_ids.discard(txn)
                owned.discard(("transaction", txn))
            else:
                info.transactional_ids.add(txn)
                if not top_error and ("transaction", txn) not in owned:
                    owned.add(("transaction", txn))
                    gained.append(transaction_target(txn))
    if first_error and not lookup:
        history.failed(now, api_key, first_error, failed)
    if gained or ok is not None or api_key not in history.served:   # else nothing to note
        history.answered(now, api_key, gained, ok or [], failed=bool(first_error))


# -- snapshots -----------------------------------------------------------------------------
@dataclass(frozen=True)
class ApiSnapshot:
    api: str
    api_key: int
    count: int
    mean_ms: float
    max_ms: float
    errors: dict[str, int]


@dataclass(frozen=True)
class ConnectionSnapshot:
    connection_id: int
    broker: int
    peer: str
    client_id: str | None
    software_name: str | None
    software_version: str | None
    principal: str
    opened_at: float
    last_activity: float
    closed_at: float | None
    bytes_in: int
    bytes_out: int
    roles: list[str]
    partitions: list[str]
    groups: list[str]
    transactional_ids: list[str]
    replica_id: int | None
    apis: dict[str, ApiSnapshot]
    listener: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    authenticated_at: float | None = None
    reauthentications: int = 0
    quotas: dict[str, dict[str, Any]] = field(default_factory=dict)
    throttle_time_ms: int = 0
    throttles: int = 0
    throttled_ms_total: int = 0
    requests_while_muted: int = 0
    share_groups: list[str] = field(default_factory=list)
    share_partitions: list[str] = field(default_factory=list)
    client_instance_id: str | None = None
    telemetry: dict[str, float] = field(default_factory=dict)
    telemetry_pushes: int = 0
    telemetry_at: float | None = None

    @property
    def host(self) -> str:
        return self.peer.rsplit(":", 1)[0]

    @property
    def requests(self) -> int:
        return sum(a.count for a in self.apis.values())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ClientSnapshot:
    client_id: str | None
    host: str
    software_name: str | None
    software_version: str | None
    principal: str
    connections: int
    fan_out: dict[int, int]            # broker id -> connections to it
    roles: dict[str, int]              # role -> connections with it
    partitions: list[str]
    groups: list[str]
    heartbeat_interval_ms: float | None
    commit_interval_ms: float | None
    fetch_rate: float | None           # Fetch requests per second
    requests: dict[str, int]
    throttles: int = 0                 # responses that throttled it (quotas, faults)
    throttled_ms_total: int = 0        # the throttle times they gave, summed

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def snapshot(info: ConnectionRecord) -> ConnectionSnapshot:
    return ConnectionSnapshot(
        connection_id=info.connection_id,
        broker=info.broker_id,
        peer=info.peer,
        client_id=info.client_id,
        software_name=info.software_name,
        software_version=info.software_version,
        principal=info.principal,
        opened_at=info.opened_at,
        last_activity=info.last_activity,
        closed_at=info.closed_at,
        bytes_in=info.bytes_in,
        bytes_out=info.bytes_out,
        roles=info.roles,
        partitions=sorted(f"{t}-{p}" for t, p in info.partitions),
        groups=sorted(info.groups),
        share_groups=sorted(info.share_groups),
        share_partitions=sorted(f"{t}-{p}" for t, p in info.share_partitions),
        transactional_ids=sorted(info.transactional_ids),
        replica_id=info.replica_id,
        apis={api_name(k): ApiSnapshot(api_name(k), k, s.count, round(s.mean_ms, 3),
                                       round(s.max_ms, 3),
                                       {error_name(c): n for c, n in sorted(s.errors.items())})
              for k, s in sorted(info.apis.items())},
        listener=info.listener,
        security_protocol=info.security_protocol,
        sasl_mechanism=info.sasl_mechanism,
        authenticated_at=info.authenticated_at,
        reauthentications=info.reauthentications,
        quotas={k: asdict(u) for k, u in sorted(info.quotas.items())},
        throttle_time_ms=info.throttle_time_ms,
        throttles=info.throttles,
        throttled_ms_total=info.throttled_ms_total,
        requests_while_muted=info.requests_while_muted,
        client_instance_id=info.client_instance_id,
        telemetry=dict(sorted(info.telemetry.items())),
        telemetry_pushes=info.telemetry_pushes,
        telemetry_at=info.telemetry_at,
    )


def mean_gap_ms(times: Iterable[float], last: int = 32) -> float | None:
    """The mean gap between consecutive timestamps (seconds in, milliseconds out)."""
    ordered = sorted(times)[-(last + 1):]
    if len(ordered) < 2:
        return None
    return (ordered[-1] - ordered[0]) / (len(ordered) - 1) * 1000


def rate_per_s(times: Iterable[float], now: float, window: float = 30.0) -> float | None:
    recent = [t for t in times if t >= now - window]
    if len(recent) < 2:
        return None
    span = max(now - min(recent), 1e-3)
    return len(recent) / span


def summarize(infos: list[ConnectionRecord], now: float | None = None) -> list[ClientSnapshot]:
    """Per-client (client.id + host) summaries of ``infos``."""
    now = time.monotonic() if now is None else now
    by_client: dict[tuple[str | None, str], list[ConnectionRecord]] = {}
    for info in infos:
        if info.broker_role is not None:
            continue
        by_client.setdefault((info.client_id, info.host), []).append(info)
    out = []
    for (client_id, host), conns in sorted(by_client.items(), key=lambda kv: (str(kv[0][0]),
                                                                             kv[0][1])):
        fan_out: dict[int, int] = {}
        roles: dict[str, int] = {}
        requests: dict[str, int] = {}
        stamps: dict[int, list[float]] = {}
        for c in conns:
            fan_out[c.broker_id] = fan_out.get(c.broker_id, 0) + 1
            for r in c.roles:
                roles[r] = roles.get(r, 0) + 1
            for k, s in c.apis.items():
                requests[api_name(k)] = requests.get(api_name(k), 0) + s.count
                stamps.setdefault(k, []).extend(s.recent)
        first = conns[0]
        out.append(ClientSnapshot(
            client_id=client_id,
            host=host,
            software_name=next((c.software_name for c in conns if c.software_name), None),
            software_version=next((c.software_version for c in conns if c.software_version),
                                  None),
            principal=first.principal,
            connections=len(conns),
            fan_out=dict(sorted(fan_out.items())),
            roles=dict(sorted(roles.items())),
            partitions=sorted({f"{t}-{p}" for c in conns for t, p in c.partitions}),
            groups=sorted({g for c in conns for g in c.groups}),
            heartbeat_interval_ms=mean_gap_ms(stamps.get(HEARTBEAT, [])
                                              + stamps.get(CONSUMER_GROUP_HEARTBEAT, [])),
            commit_interval_ms=mean_gap_ms(stamps.get(OFFSET_COMMIT, [])),
            fetch_rate=rate_per_s(stamps.get(FETCH, []), now),
            requests=dict(sorted(requests.items())),
            throttles=sum(c.throttles for c in conns),
            throttled_ms_total=sum(c.throttled_ms_total for c in conns),
        ))
    return out


class Registry:
    """The cluster-wide view of every broker's connections."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        # a multi-process cluster: each broker process's rows, as of ``refresh()``
        self.remote: dict[int, list[ConnectionRecord]] = {}

    async def refresh(self) -> None:
        """Fetch every broker process's rows (nothing to do with brokers in-process)."""
        server = self.cluster.controller_server
        if server is None:
            return
        from kaflite.cluster.observe_wire import record_from_json

        rows = await server.call_all("connections")
        self.remote = {node: [record_from_json(r) for r in found]
                       for node, found in rows.items() if isinstance(found, list)}

    def infos(self, include_replicas: bool = True, include_closed: bool = False
              ) -> list[ConnectionRecord]:
        out: list[ConnectionRecord] = []
        if self.cluster.use_processes:
            return [i for rows in self.remote.values() for i in rows
                    if (include_closed or i.closed_at is None)
                    and (include_replicas or i.broker_role is None)]
        for broker in list(self.cluster.brokers.values()):
            infos = [c.info for c in list(broker.connections.values()) if not c.closed]
            if include_closed:
                infos += list(broker.closed_connections)
            out += [i for i in infos if include_replicas or i.broker_role is None]
        return out

    def connections(self, include_replicas: bool = False, client_id: str | None = None,
                    broker: int | None = None, include_closed: bool = False
                    ) -> list[ConnectionSnapshot]:
        """Open connections (and, with ``include_closed``, the latest closed ones)."""
        infos = [i for i in self.infos(include_replicas, include_closed)
                 if (client_id is None or i.client_id == client_id)
                 and (broker is None or i.broker_id == broker)]
        return [snapshot(i) for i in sorted(infos, key=lambda i: (str(i.client_id),
                                                                   i.broker_id,
                                                                   i.connection_id))]

    def clients(self, include_closed: bool = False) -> list[ClientSnapshot]:
        return summarize(self.infos(include_replicas=False, include_closed=include_closed))
