"""The proxy's fault rules (``proxy.faults``, ``filters/rules.py``), added and removed
while clients run, with the bodies kaflite's cluster takes (``rule_from_body``), in
front of kaflite's own cluster: a rule scoped to a broker hits the traffic to that
broker only, each kind acts (an error placed as the broker places it, a delay, a
throttle, a dropped request, a broker's connections dropped), a removed rule acts no
more, and the idempotent producer still writes each record exactly once.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.rules import rule_from_body
from kaflite.proxy import Proxy
from tests.proxy.test_faults import consume_exact, produce_exact

NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"
N = 30


@pytest.fixture
def proxy(cluster3: Cluster) -> Iterator[Proxy]:
    with Proxy(cluster3.bootstrap_servers) as p:
        yield p


def _leader(cluster: Cluster, topic: str) -> int:
    return int(cluster.controller.topics[topic].partitions[0].leader)


def _errors_by_broker(proxy: Proxy, name: str) -> dict[int | None, int]:
    out: dict[int | None, int] = {}
    for c in proxy.connections(include_closed=True):
        n = sum(api.errors.get(name, 0) for api in c.apis.values())
        if n:
            out[c.broker] = out.get(c.broker, 0) + n
    return out


def test_rule_bodies_read_as_the_cluster_reads_them() -> None:
    error = rule_from_body("error", {"api": "Produce", "error": NOT_LEADER, "broker": 2,
                                     "topic": "t"})
    assert (error.kind, error.api_key, error.remaining, error.broker, error.topic) == \
        ("error", 0, 1, 2, "t")
    delay = rule_from_body("delay", {"api": None, "ms": 250, "broker": 1})
    assert (delay.api_key, delay.delay_ms, delay.remaining, delay.broker) == (None, 250, None, 1)
    drop = rule_from_body("drop", {"api": "*", "count": None, "client_id": "c-1"})
    assert (drop.api_key, drop.remaining, drop.client_id) == (None, None, "c-1")
    throttle = rule_from_body("throttle", {"ms": 100, "count": 2})
    assert (throttle.delay_ms, throttle.remaining) == (100, 2)
    for kind, body in (("error", {"api": "Produce"}), ("delay", {"api": "Fetch"}),
                       ("drop", {"count": 1}), ("leader", {}),
                       ("error", {"api": "NoSuchApi", "error": NOT_LEADER})):
        with pytest.raises(ValueError):
            rule_from_body(kind, body)


def test_rules_added_at_runtime_hit_one_broker_and_go(cluster3: Cluster, proxy: Proxy) -> None:
    topic = "px-rules"
    cluster3.create_topic(topic, 1, 3)
    leader = _leader(cluster3, topic)
    other = next(n for n in sorted(cluster3.brokers) if n != leader)
    faults = proxy.faults
    written = produce_exact(proxy.bootstrap_servers, topic, "warm", N)   # no rule yet
    assert not faults.applied

    # an error on every Produce to a broker that leads nothing here: never hit; and on
    # the leader, the next two: the client gets them there, and nowhere else
    elsewhere = faults.add(rule_from_body("error", {
        "api": "Produce", "error": NOT_LEADER, "broker": other, "count": None}))
    on_leader = faults.add(rule_from_body("error", {
        "api": "Produce", "error": NOT_LEADER, "broker": leader, "topic": topic, "count": 2}))
    delay = faults.add(rule_from_body("delay", {"api": "Produce", "ms": 50, "count": 3,
                                                "broker": leader}))
    throttle = faults.add(rule_from_body("throttle", {"ms": 50, "count": 2, "broker": leader}))
    written += produce_exact(proxy.bootstrap_servers, topic, "errors", N)
    assert on_leader.hits == 2 and delay.hits == 3 and throttle.hits == 2
    assert elsewhere.hits == 0
    assert _errors_by_broker(proxy, NOT_LEADER) == {leader: 2}
    assert {r.id for r in faults.rules()} == {elsewhere.id}      # the counted ones are spent
    assert faults.remove(elsewhere.id) and not faults.rules()
    assert faults.applied.get("delay") == 3 and faults.applied.get("throttle", 0) >= 2

    # a dropped request: the connection closes, the producer resends, once
    drop = faults.add(rule_from_body("drop", {"api": "Produce", "count": 1,
                                              "broker": leader}))
    written += produce_exact(proxy.bootstrap_servers, topic, "drop", N)
    assert drop.hits == 1 and not faults.rules()
    # an open producer's connections to the leader, dropped now
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "acks": "all",
                         "enable.idempotence": True})
    try:
        producer.produce(topic, b"open-0")
        assert producer.flush(30) == 0
        assert proxy.drop_connections(other - 100) == 0            # no such broker
        assert proxy.drop_connections(leader) >= 1
        producer.produce(topic, b"open-1")
        assert producer.flush(30) == 0
    finally:
        producer.flush(10)
    written += [b"open-0", b"open-1"]

    # with every rule gone, nothing more is injected
    applied = dict(faults.applied)
    written += produce_exact(proxy.bootstrap_servers, topic, "after", N)
    assert faults.applied == applied
    got = consume_exact(cluster3.bootstrap_servers, topic, "px-rules-g", len(written))
    assert sorted(got) == sorted(written)          # each exactly once


def test_a_bootstrap_connection_counts_as_the_node_it_reached() -> None:
    from kaflite.proxy.mapping import BrokerMap

    brokers = BrokerMap("127.0.0.1", lambda node: 0)
    brokers.upstream.update({1: ("localhost", 9001), 2: ("127.0.0.1", 9002)})
    assert brokers.node_at("127.0.0.1", 9001) == 1      # the host spelled another way
    assert brokers.node_at("127.0.0.1", 9002) == 2
    assert brokers.node_at("127.0.0.1", 9003) is None   # not learned (yet)
