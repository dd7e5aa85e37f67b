"""``GET /metrics``: the Prometheus exposition of the brokers' counters and gauges.

Every test scrapes over HTTP, parses with prometheus_client's own parser, and
checks that the values moved by what the test did (deltas, since the cluster is
shared by the module).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kaflite.client.sync import Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi
from kaflite.cluster.metrics import LATENCY_BUCKETS_MS
from tests.conftest import wait_for

Sample = tuple[str, frozenset[tuple[str, str]]]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, str]]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 600}) as cluster:
        api = cluster.call(HttpApi(cluster).start())
        try:
            yield cluster, api.url
        finally:
            cluster.call(api.stop())


class Scrape:
    """One scrape of /metrics: sample values by name and labels."""

    def __init__(self, url: str) -> None:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = resp.read().decode()
        self.types: dict[str, str] = {}
        self.samples: dict[Sample, float] = {}
        for family in text_string_to_metric_families(text):
            self.types[family.name] = family.type
            for s in family.samples:
                self.samples[(s.name, frozenset(s.labels.items()))] = s.value

    def sum(self, name: str, **labels: str | int) -> float:
        """The sum of the ``name`` samples whose labels include ``labels``."""
        want = {(k, str(v)) for k, v in labels.items()}
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= ls)

    def brokers(self, name: str) -> set[str]:
        return {dict(ls)["broker"] for (n, ls) in self.samples if n == name}


REQUESTS = "kafka_network_requestmetrics_requests_total"
TIMES = "kafka_network_requestmetrics_totaltimems"
URP = "kafka_server_replicamanager_underreplicatedpartitions"
SHRINKS = "kafka_server_replicamanager_isrshrinks_total"
EXPANDS = "kafka_server_replicamanager_isrexpands_total"
GROUPS = "kafka_coordinator_group_groupmetadatamanager_"


def isr(cluster: Cluster, topic: str) -> list[int]:
    return list(cluster.controller.topics[topic].partitions[0].isr)


def led_with(cluster: Cluster, leader: int, replica: int, in_isr: bool) -> list[tuple[str, int]]:
    """Partitions ``leader`` leads that have ``replica`` among their replicas (or ISR)."""
    return [(t.name, p.partition) for t in list(cluster.controller.topics.values())
            for p in t.partitions
            if p.leader == leader and replica in (p.isr if in_isr else p.replicas)]


def under_replicated(cluster: Cluster, leader: int) -> list[tuple[str, int]]:
    return [(t.name, p.partition) for t in list(cluster.controller.topics.values())
            for p in t.partitions if p.leader == leader and len(p.isr) < len(p.replicas)]


def test_produce_fetch_and_request_metrics(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    cluster.create_topic("metered", 1, 3, assignments=[[0, 1, 2]])
    before = Scrape(url)
    assert before.types[REQUESTS.removesuffix("_total")] == "counter"
    assert before.types[TIMES] == "histogram"
    n, value = 12, b"v" * 200
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                   "client.id": "metered-producer"}) as p:
        for _ in range(n):
            p.send("metered", value, partition=0)   # one Produce request each
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                   "auto.offset.reset": "earliest"}) as c:
        c.assign([("metered", 0)])
        got: list[bytes] = []
        for _ in range(100):
            got += [r.value for r in c.poll(timeout_ms=200)]
            if len(got) >= n:
                break
    assert got == [value] * n
    after = Scrape(url)

    def delta(name: str, **labels: str | int) -> float:
        return after.sum(name, **labels) - before.sum(name, **labels)

    assert delta(REQUESTS, broker=0, request="Produce") == n
    assert delta(TIMES + "_count", broker=0, request="Produce") == n
    assert delta(TIMES + "_bucket", broker=0, request="Produce", le="+Inf") == n
    assert delta(TIMES + "_sum", broker=0, request="Produce") > 0
    # Buckets are cumulative.
    counts = [after.sum(TIMES + "_bucket", broker=0, request="Produce", le=le)
              for le in [*(f"{b:g}" for b in LATENCY_BUCKETS_MS), "+Inf"]]
    assert counts == sorted(counts)
    assert delta(REQUESTS, request="FetchConsumer") >= 1
    # As Kafka: every Fetch counts as Fetch, and as FetchConsumer or FetchFollower.
    for b in range(3):
        assert after.sum(REQUESTS, broker=b, request="Fetch") == \
            after.sum(REQUESTS, broker=b, request="FetchConsumer") + \
            after.sum(REQUESTS, broker=b, request="FetchFollower")
    topic = "kafka_server_brokertopicmetrics_"
    assert delta(topic + "messagesin_total", broker=0, topic="metered") == n
    assert delta(topic + "bytesin_total", broker=0, topic="metered") >= n * len(value)
    assert delta(topic + "bytesout_total", broker=0, topic="metered") >= n * len(value)
    assert delta(topic + "messagesin_total", broker=1) == 0      # followers take no Produce
    assert delta(topic + "replicationbytesout_total", broker=0) >= 2 * n * len(value)
    for follower in (1, 2):
        assert delta(topic + "replicationbytesin_total", broker=follower) >= n * len(value)
    assert after.sum("kafka_server_replicamanager_leadercount", broker=0) >= 1
    assert after.sum("kafka_controller_kafkacontroller_globaltopiccount") == \
        len(cluster.controller.topics)


def test_groups_and_connection_roles(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    cluster.create_topic("grouped", 1, 3)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        p.send("grouped", b"hello", partition=0)
    group = "metered-group"
    with Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                   "auto.offset.reset": "earliest"}) as c:
        c.subscribe(["grouped"])
        got = []
        for _ in range(100):
            got += c.poll(timeout_ms=200)
            if got:
                break
        assert [r.value for r in got] == [b"hello"]
        coordinator = cluster.faults.coordinator_of(group)[2]
        leader = cluster.controller.topics["grouped"].partitions[0].leader
        live = Scrape(url)
        assert live.sum(GROUPS + "numgroupsstable", broker=coordinator) == 1
        assert live.sum(GROUPS + "numgroupsstable") == 1
        assert live.sum(GROUPS + "numgroups") == 1
        roles = "kaflite_connections"
        assert live.sum(roles, broker=coordinator, role="group-coordinator") >= 1
        assert live.sum(roles, broker=leader, role="partition-leader") >= 1
        assert live.sum(roles, role="replica-fetcher") >= 1
        assert live.sum("kafka_server_socket_server_metrics_connection_count",
                        broker=coordinator) >= \
            live.sum(roles, broker=coordinator, role="group-coordinator")
        assert live.sum(REQUESTS, broker=coordinator, request="JoinGroup") >= 1
        assert live.sum(REQUESTS, broker=coordinator, request="SyncGroup") >= 1
    # The consumer left: its group is Empty (its offsets keep it).
    wait_for(lambda: Scrape(url).sum(GROUPS + "numgroupsempty", broker=coordinator) == 1,
             what="the group Empty once its only member left")
    left = Scrape(url)
    assert left.sum(GROUPS + "numgroupsstable") == 0
    assert left.sum(REQUESTS, broker=coordinator, request="LeaveGroup") >= 1


def test_isr_shrink_and_expand(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    cluster.create_topic("shrinking", 1, 3, assignments=[[1, 0, 2]])
    leader, follower = 1, 2
    with Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"}) as p:
        p.send("shrinking", b"before", partition=0)
    wait_for(lambda: isr(cluster, "shrinking") == [1, 0, 2], what="a full ISR")
    # A count of ISR changes on broker 1 also moves with partitions the fault never
    # touches: with replica.lag.time.max.ms at 600, a loaded host drops followers for a
    # moment and takes them back (once 18 expansions where the fault made 2, with three
    # pytest workers on two cores). Each such shrink is undone by one expansion; so the
    # window starts and ends with every partition broker 1 leads fully replicated, and
    # the counts are compared with each other and with what the fault did at least.
    def settled() -> bool:
        return Scrape(url).sum(URP, broker=leader) == 0

    wait_for(settled, what=f"URP 0 on broker {leader}",
             state=lambda: under_replicated(cluster, leader))
    affected = led_with(cluster, leader, follower, in_isr=True)
    assert ("shrinking", 0) in affected
    before = Scrape(url)
    cluster.faults.isolate_replication(follower)
    try:
        wait_for(lambda: not led_with(cluster, leader, follower, in_isr=True),
                 what=f"broker {follower} out of the ISRs broker {leader} leads")
        during = Scrape(url)
        assert during.sum(SHRINKS, broker=leader) - before.sum(SHRINKS, broker=leader) >= \
            len(affected)
        assert during.sum(URP, broker=leader) >= 1
        assert during.sum(URP, broker=leader) == len(led_with(cluster, leader, follower,
                                                               in_isr=False))
    finally:
        cluster.faults.isolate_replication(follower, isolated=False)
    wait_for(lambda: set(affected) <= set(led_with(cluster, leader, follower, in_isr=True)),
             what=f"broker {follower} back in the ISRs",
             state=lambda: sorted(set(affected) - set(led_with(cluster, leader, follower,
                                                                  in_isr=True))))
    wait_for(settled, what=f"URP 0 on broker {leader} again",
             state=lambda: under_replicated(cluster, leader))
    after = Scrape(url)
    shrinks = after.sum(SHRINKS, broker=leader) - before.sum(SHRINKS, broker=leader)
    expands = after.sum(EXPANDS, broker=leader) - before.sum(EXPANDS, broker=leader)
    assert expands == shrinks >= len(affected)
    assert after.sum(URP, broker=leader) == 0


def test_stopped_follower_is_under_replication(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    cluster.create_topic("stopping", 1, 3, assignments=[[0, 2, 1]])
    leader, follower = 0, 2
    wait_for(lambda: isr(cluster, "stopping") == [0, 2, 1], what="a full ISR")
    # With replica.lag.time.max.ms at 600, a loaded machine drops followers out of other
    # ISRs for a moment (18 of broker 0's partitions once, the offsets topic's among them):
    # the metric must come back to 0 once everything broker 0 leads is replicated again.
    wait_for(lambda: Scrape(url).sum(URP, broker=leader) == 0,
             what=f"URP 0 on broker {leader}",
             state=lambda: under_replicated(cluster, leader))
    cluster.faults.stop_broker(follower)
    try:
        stopped = Scrape(url)
        # Every partition broker 0 leads with broker 2 as a replica is under-replicated.
        expected = len(led_with(cluster, leader, follower, in_isr=False))
        assert expected >= 1
        assert stopped.sum(URP, broker=leader) == expected
        assert str(follower) not in stopped.brokers(URP)   # a stopped broker exports nothing
        assert stopped.sum("kafka_controller_kafkacontroller_activebrokercount") == 2
    finally:
        cluster.faults.restart_broker(follower)
    wait_for(lambda: Scrape(url).sum(URP, broker=leader) == 0,
             what="no under-replicated partition once broker 2 is back")
    back = Scrape(url)
    assert str(follower) in back.brokers(URP)
    assert back.sum("kafka_controller_kafkacontroller_activebrokercount") == 3
