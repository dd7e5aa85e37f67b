"""Broker metrics: plain counters on the hot path, Prometheus exposition at scrape time.

Each broker keeps a ``BrokerMetrics``: ints and floats the request path bumps
(no locks: everything runs on the cluster's event loop, and no Prometheus
object is touched per request). ``ClusterCollector`` reads them, and the
gauges it derives from the brokers' state (under-replicated partitions, groups
by state, connections by role), when ``GET /metrics`` is scraped
(``render``), through ``prometheus_client``'s custom collector interface.

Names follow Kafka's JMX MBeans as the Prometheus JMX exporter's Kafka rules
translate them (``lowercaseOutputName``; ``...PerSec`` meters become
``_total`` counters, ``Value`` gauges keep their name): for example
``kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce`` is
``kafka_network_requestmetrics_requests_total{request="Produce"}``. Every
per-broker series carries a ``broker`` label (one endpoint serves the whole
cluster, where Kafka's exporters tell brokers apart by scrape target). The
request latency histograms (Kafka's ``TotalTimeMs``) are real Prometheus
histograms in milliseconds. docs/metrics.md lists every metric.

As Kafka does, a broker's counters start from zero when the broker (re)starts,
and a stopped broker exports nothing.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from kaflite.cluster.groups._group import GroupState
from kaflite.cluster.observe import api_name

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.cluster import Cluster
    from kaflite.cluster.controller import Controller

__all__ = ["CONTENT_TYPE", "LATENCY_BUCKETS_MS", "BrokerMetrics", "ClusterCollector",
           "broker_text", "registry_for", "registry_of", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Upper bounds (ms) of the request latency buckets; a long-poll Fetch waits up to
# fetch.max.wait.ms (500 by default), a replica fetch up to replica.fetch.wait.max.ms.
LATENCY_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
                      2500.0, 5000.0, 10000.0, 30000.0)

FETCH = 1
# Kafka counts a Fetch twice: as "Fetch" and as "FetchConsumer" or "FetchFollower".
# Here a Fetch is kept under one of these two keys, and "Fetch" is their sum.
FETCH_CONSUMER, FETCH_FOLLOWER = -1, -2
REQUEST_NAMES = {FETCH_CONSUMER: "FetchConsumer", FETCH_FOLLOWER: "FetchFollower"}

# Kafka's GroupMetadataManager gauges, by classic group state.
GROUP_STATE_GAUGES = (
    (GroupState.PREPARING_REBALANCE, "numgroupspreparingrebalance"),
    (GroupState.COMPLETING_REBALANCE, "numgroupscompletingrebalance"),
    (GroupState.STABLE, "numgroupsstable"),
    (GroupState.DEAD, "numgroupsdead"),
    (GroupState.EMPTY, "numgroupsempty"),
)


class RequestStats:
    """One API's requests on one broker: counts by version and a latency histogram."""

    __slots__ = ("buckets", "sum_ms", "versions")

    def __init__(self) -> None:
        self.versions: dict[int, int] = {}
        self.buckets = [0] * (len(LATENCY_BUCKETS_MS) + 1)  # the last one is +Inf
        self.sum_ms = 0.0

    def merged(self, other: RequestStats) -> RequestStats:
        out = RequestStats()
        out.sum_ms = self.sum_ms + other.sum_ms
        out.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]
        for stats in (self, other):
            for v, n in stats.versions.items():
                out.versions[v] = out.versions.get(v, 0) + n
        return out


class TopicStats:
    """Kafka's per-topic BrokerTopicMetrics, for client traffic."""

    __slots__ = ("bytes_in", "bytes_out", "messages_in")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0
        self.messages_in = 0


class BrokerMetrics:
    """The counters one broker's request path and replication keep."""

    def __init__(self) -> None:
        self.requests: dict[int, RequestStats] = {}
        self.topics: dict[str, TopicStats] = {}
        self.replication_bytes_in = 0    # appended by this broker's replica fetchers
        self.replication_bytes_out = 0   # sent to followers' Fetch requests
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.failed_isr_updates = 0

    # -- the hot path ------------------------------------------------------------------
    def request(self, api_key: int, version: int, elapsed_ms: float, follower: bool) -> None:
        """One request handled, ``elapsed_ms`` from its decoding to its response."""
        if api_key == FETCH:
            api_key = FETCH_FOLLOWER if follower else FETCH_CONSUMER
        stats = self.requests.get(api_key)
        if stats is None:
            stats = self.requests[api_key] = RequestStats()
        versions = stats.versions
        versions[version] = versions.get(version, 0) + 1
        stats.buckets[bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1
        stats.sum_ms += elapsed_ms

    def topic(self, name: str) -> TopicStats:
        stats = self.topics.get(name)
        if stats is None:
            stats = self.topics[name] = TopicStats()
        return stats

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        """A Produce appended ``records`` records in ``nbytes`` bytes to a leader's log."""
        stats = self.topic(topic)
        stats.bytes_in += nbytes
        stats.messages_in += records

    def isr_changed(self, old: list[int], new: list[int]) -> None:
        """The controller accepted this broker's ISR change (Kafka's AlterPartition)."""
        if set(old) - set(new):
            self.isr_shrinks += 1
        if set(new) - set(old):
            self.isr_expands += 1


# -- scraping -----------------------------------------------------------------------------
def _request_families(brokers: list[Broker]) -> Iterator[Metric]:
    requests = CounterMetricFamily(
        "kafka_network_requestmetrics_requests",
        "Requests handled (Kafka's RequestMetrics RequestsPerSec), by API name and version; "
        "a Fetch counts as Fetch and as FetchConsumer or FetchFollower",
        labels=["broker", "request", "version"])
    times = HistogramMetricFamily(
        "kafka_network_requestmetrics_totaltimems",
        "Time from a request's decoding to its response, in ms (Kafka's RequestMetrics "
        "TotalTimeMs)", labels=["broker", "request"])
    for b in brokers:
        broker = str(b.node_id)
        named = {REQUEST_NAMES.get(k) or api_name(k): s for k, s in b.metrics.requests.items()}
        consumer, follower = named.get("FetchConsumer"), named.get("FetchFollower")
        if consumer is not None or follower is not None:
            named["Fetch"] = (consumer or RequestStats()).merged(follower or RequestStats())
        for name, stats in sorted(named.items()):
            for version, n in sorted(stats.versions.items()):
                requests.add_metric([broker, name, str(version)], n)
            cumulative, acc = [], 0
            for bound, n in zip([*LATENCY_BUCKETS_MS, float("inf")], stats.buckets,
                                strict=True):
                acc += n
                cumulative.append((_le(bound), acc))
            times.add_metric([broker, name], cumulative, stats.sum_ms)
    yield requests
    yield times


def _le(bound: float) -> str:
    if bound == float("inf"):
        return "+Inf"
    return str(int(bound)) if bound == int(bound) else str(bound)


def _topic_families(brokers: list[Broker]) -> Iterator[Metric]:
    prefix = "kafka_server_brokertopicmetrics_"
    per_topic = (
        ("bytesin", "Bytes appended by Produce requests (BytesInPerSec)", "bytes_in"),
        ("bytesout", "Record bytes sent to consumers' Fetch requests (BytesOutPerSec)",
         "bytes_out"),
        ("messagesin", "Records appended by Produce requests (MessagesInPerSec)",
         "messages_in"),
    )
    for name, doc, attr in per_topic:
        family = CounterMetricFamily(prefix + name, doc, labels=["broker", "topic"])
        for b in brokers:
            for topic, stats in sorted(b.metrics.topics.items()):
                family.add_metric([str(b.node_id), topic], getattr(stats, attr))
        yield family
    replication = (
        ("replicationbytesin", "Record bytes this broker's replica fetchers appended "
                               "(ReplicationBytesInPerSec)", "replication_bytes_in"),
        ("replicationbytesout", "Record bytes sent to followers' Fetch requests "
                                "(ReplicationBytesOutPerSec)", "replication_bytes_out"),
    )
    for name, doc, attr in replication:
        family = CounterMetricFamily(prefix + name, doc, labels=["broker"])
        for b in brokers:
            family.add_metric([str(b.node_id)], getattr(b.metrics, attr))
        yield family
    # replication throttling (KIP-73): Kafka's LeaderReplication/FollowerReplication
    # byte-rate, and how often each side held a partition back
    for side in ("leader", "follower"):
        rate = GaugeMetricFamily(
            f"kafka_server_{side}replication_byte_rate",
            f"Bytes per second of throttled partitions, as the {side} replication quota "
            "measures them", labels=["broker"])
        held = CounterMetricFamily(
            f"kaflite_replication_throttled_{side}",
            f"Partitions the {side} replication quota held back", labels=["broker"])
        for b in brokers:
            quota = getattr(b.replication_quotas, side)
            rate.add_metric([str(b.node_id)], quota.measure())
            held.add_metric([str(b.node_id)], quota.throttled)
        yield rate
        yield held


def _replica_families(controller: Controller, brokers: list[Broker]) -> Iterator[Metric]:
    prefix = "kafka_server_replicamanager_"
    urp = GaugeMetricFamily(prefix + "underreplicatedpartitions",
                            "Partitions this broker leads whose ISR is smaller than their "
                            "replica set (UnderReplicatedPartitions)", labels=["broker"])
    under_min = GaugeMetricFamily(prefix + "underminisrpartitioncount",
                                  "Partitions this broker leads whose ISR is smaller than "
                                  "min.insync.replicas (UnderMinIsrPartitionCount)",
                                  labels=["broker"])
    partitions = GaugeMetricFamily(prefix + "partitioncount",
                                   "Partition replicas on this broker (PartitionCount)",
                                   labels=["broker"])
    leaders = GaugeMetricFamily(prefix + "leadercount",
                                "Partitions this broker leads (LeaderCount)", labels=["broker"])
    for b in brokers:
        led = [p for p in list(b.partitions.values()) if p.is_leader]
        n_urp = n_under_min = 0
        for p in led:
            state = controller.partition(p.topic, p.index)
            # As Kafka: during a reassignment the replicas being added do not count.
            adding = len(state.adding) if state is not None else 0
            if len(p.isr) < len(p.replicas) - adding:
                n_urp += 1
            if len(p.isr) < int(p.log.config.min_insync_replicas):
                n_under_min += 1
        broker = [str(b.node_id)]
        urp.add_metric(broker, n_urp)
        under_min.add_metric(broker, n_under_min)
        partitions.add_metric(broker, len(b.partitions))
        leaders.add_metric(broker, len(led))
    yield from (urp, under_min, partitions, leaders)
    counters = (
        ("isrshrinks", "ISR shrinks this broker made as leader (IsrShrinksPerSec)",
         "isr_shrinks"),
        ("isrexpands", "ISR expansions this broker made as leader (IsrExpandsPerSec)",
         "isr_expands"),
        ("failedisrupdates", "ISR changes the controller refused (FailedIsrUpdatesPerSec)",
         "failed_isr_updates"),
    )
    for name, doc, attr in counters:
        family = CounterMetricFamily(prefix + name, doc, labels=["broker"])
        for b in brokers:
            family.add_metric([str(b.node_id)], getattr(b.metrics, attr))
        yield family


def _group_families(brokers: list[Broker]) -> Iterator[Metric]:
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    total = GaugeMetricFamily(prefix + "numgroups",
                              "Groups this broker coordinates (NumGroups)", labels=["broker"])
    by_state = {state: GaugeMetricFamily(prefix + name, f"Groups in state {state} this broker "
                                         f"coordinates (NumGroups{state})", labels=["broker"])
                for state, name in GROUP_STATE_GAUGES}
    for b in brokers:
        counts = dict.fromkeys(by_state, 0)
        n = 0
        if b.groups is not None:
            for shard in b.groups.active_shards():
                for group in shard.groups.values():
                    counts[group.state] = counts.get(group.state, 0) + 1
                    n += 1
        broker = [str(b.node_id)]
        total.add_metric(broker, n)
        for state, family in by_state.items():
            family.add_metric(broker, counts[state])
    yield total
    yield from by_state.values()


def _connection_families(brokers: list[Broker]) -> Iterator[Metric]:
    count = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                              "Open connections (socket-server-metrics connection-count)",
                              labels=["broker", "listener"])
    by_role = GaugeMetricFamily("kaflite_connections",
                                "Open connections by the role the connection registry "
                                "gives them; a connection with several roles counts in each",
                                labels=["broker", "role"])
    for b in brokers:
        conns = [c for c in list(b.connections.values()) if not c.closed]
        count.add_metric([str(b.node_id), "PLAINTEXT"], len(conns))
        roles: dict[str, int] = {}
        for c in conns:
            for role in c.info.roles:
                roles[role] = roles.get(role, 0) + 1
        for role, n in sorted(roles.items()):
            by_role.add_metric([str(b.node_id), role], n)
    yield count
    yield by_role


def _controller_families(cluster: Cluster) -> Iterator[Metric]:
    controller = cluster.controller
    prefix = "kafka_controller_kafkacontroller_"
    partitions = [p for t in list(controller.topics.values()) for p in t.partitions]
    values = (
        ("activebrokercount", "Brokers registered and alive (ActiveBrokerCount)",
         sum(1 for b in list(controller.brokers.values()) if b.alive)),
        ("globaltopiccount", "Topics in the cluster (GlobalTopicCount)",
         len(controller.topics)),
        ("globalpartitioncount", "Partitions in the cluster (GlobalPartitionCount)",
         len(partitions)),
        ("offlinepartitionscount", "Partitions without a leader (OfflinePartitionsCount)",
         sum(1 for p in partitions if p.leader == -1)),
    )
    for name, doc, value in values:
        yield GaugeMetricFamily(prefix + name, doc, value=value)
    # The event loop of this process (every broker of a one-process cluster, or the
    # controller's process under --processes): kaflite.cluster.loop_lag.
    lag = cluster.loop_lag.summary()
    family = GaugeMetricFamily("kaflite_event_loop_lag_ms",
                               "How late the event loop ran what was due, in ms",
                               labels=["stat"])
    for stat, ms in (("p50", lag.p50_ms), ("p99", lag.p99_ms), ("max", lag.max_ms),
                     ("worst", lag.worst_ms)):
        family.add_metric([stat], ms)
    yield family


def broker_families(brokers: list[Broker], controller: Controller) -> Iterator[Metric]:
    """The per-broker families of ``brokers``."""
    yield from _request_families(brokers)
    yield from _topic_families(brokers)
    yield from _replica_families(controller, brokers)
    yield from _group_families(brokers)
    yield from _connection_families(brokers)


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def broker_text(broker: Broker) -> str:
    """One broker process's families in the text exposition (for its controller process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(broker_families([broker], broker.controller))))
    return generate_latest(registry).decode()


class ClusterCollector(Collector):
    """Every running broker's metrics and the controller's, read at scrape time.

    In a multi-process cluster the broker processes render their own families;
    ``refresh()`` fetches them, and they are merged here family by family.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.remote: dict[int, str] = {}

    async def refresh(self) -> None:
        server = self.cluster.controller_server
        if server is not None:
            self.remote = {n: str(t) for n, t in (await server.call_all("metrics")).items()}

    def collect(self) -> Iterator[Metric]:
        if self.cluster.use_processes:
            yield from _merged(self.remote)
        else:
            brokers = sorted((b for b in list(self.cluster.brokers.values()) if b.running),
                             key=lambda b: b.node_id)
            yield from broker_families(brokers, self.cluster.controller)
        yield from _controller_families(self.cluster)


def _merged(texts: dict[int, str]) -> Iterator[Metric]:
    from prometheus_client.parser import text_string_to_metric_families

    families: dict[str, Metric] = {}
    for _, text in sorted(texts.items()):
        for family in text_string_to_metric_families(text):
            known = families.get(family.name)
            if known is None:
                families[family.name] = family
            else:
                known.samples.extend(family.samples)
    yield from families.values()


def registry_for(cluster: Cluster) -> CollectorRegistry:
    return registry_of(ClusterCollector(cluster))


def registry_of(collector: ClusterCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition of ``registry``."""
    return generate_latest(registry)
