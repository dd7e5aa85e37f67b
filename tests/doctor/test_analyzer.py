"""The analyzer on hand-made request logs: each finding from the shape that must trigger
it, none from a healthy run or from the near misses beside each threshold."""

from __future__ import annotations

import json

from kaflite.doctor import DEFAULT, Analyzer, Finding, render_text
from tests.doctor._scenario import (
    API_VERSIONS,
    CONSUMER_GROUP_HEARTBEAT,
    FETCH,
    HEARTBEAT,
    JOIN_GROUP,
    METADATA,
    OFFSET_COMMIT,
    PRODUCE,
    SYNC_GROUP,
    Scenario,
)

LEADER = ("partition-leader",)
COORD = ("group-coordinator",)
NOT_LEADER = {"NOT_LEADER_OR_FOLLOWER": 1}


def analyze(s: Scenario) -> Analyzer:
    a = Analyzer()
    assert a.feed(s.records) == len(s.records)
    return a


def names(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.name, f.subject) for f in findings]


def healthy(s: Scenario, seconds: int = 300) -> None:
    """A producer and a classic-group consumer on three brokers for ``seconds``, with
    one leader move (orders-1 from broker 1 to broker 2 at 100 s) they recover from."""
    s.at(0)
    for client in ("producer", "consumer"):
        s.add(API_VERSIONS, client=client, conn=1)
        s.add(METADATA, client=client, conn=1, topics=("orders",))
    s.at(1)
    s.add(JOIN_GROUP, client="consumer", broker=1, conn=14, roles=COORD, group="g",
          generation=1, latency_ms=3000)
    s.add(SYNC_GROUP, client="consumer", broker=1, conn=14, roles=COORD, group="g",
          generation=1, dt=0.05)
    leader = {0: 0, 1: 1, 2: 2}
    for tick in range(2, seconds):
        s.at(tick)
        if tick == 100:   # the leader moves: one refusal, a refresh, the new leader
            s.add(PRODUCE, client="producer", broker=1, conn=3, partitions=("orders-1",),
                  errors=NOT_LEADER, roles=LEADER)
            s.add(METADATA, client="producer", conn=1, topics=("orders",), dt=0.1)
            leader[1] = 2
            s.add(PRODUCE, client="producer", broker=2, conn=4, partitions=("orders-1",),
                  roles=LEADER, dt=0.05)
        for p, b in leader.items():
            s.add(PRODUCE, client="producer", broker=b, conn=2 + b,
                  partitions=(f"orders-{p}",), roles=LEADER)
            s.add(FETCH, client="consumer", broker=b, conn=11 + b,
                  partitions=(f"orders-{p}",), roles=LEADER)
        if tick % 3 == 0:
            s.add(HEARTBEAT, client="consumer", broker=1, conn=14, roles=COORD, group="g",
                  generation=1)
        if tick % 5 == 0:
            s.add(OFFSET_COMMIT, client="consumer", broker=1, conn=14, roles=COORD,
                  group="g", generation=1, partitions=("orders-0", "orders-1", "orders-2"))
        if tick % 60 == 0:
            for client in ("producer", "consumer"):
                s.add(METADATA, client=client, conn=1, topics=("orders",))


def test_a_healthy_run_has_no_finding_and_its_health() -> None:
    s = Scenario()
    healthy(s)
    a = analyze(s)
    assert a.findings() == []
    by_client = {c.client_id: c for c in a.health()}
    producer, consumer = by_client["producer"], by_client["consumer"]
    # the leader move: recovered 150 ms after the refusal; the refresh it caused
    assert producer.recovery.recovered == 1 and producer.recovery.unrecovered == 0
    assert producer.recovery.median_ms == 150.0
    assert producer.recovery.by_error == {"NOT_LEADER_OR_FOLLOWER": 1}
    assert producer.metadata.reasons == {"startup": 1, "after NOT_LEADER_OR_FOLLOWER": 1,
                                         "periodic": 4}
    assert producer.by_role == {"bootstrap": {"0": 1},
                                "partition-leader": {"0": 1, "1": 1, "2": 1}}
    group = consumer.groups[0]
    assert (group.group, group.protocol, group.rebalances, group.generations) == \
        ("g", "classic", 1, (1,))
    assert group.rebalance_median_ms == 3050.0    # JoinGroup sent -> SyncGroup answered
    assert group.heartbeat_interval_ms == 3000.0 and group.commit_interval_ms == 5000.0
    assert consumer.by_role["group-coordinator"] == {"1": 1}
    assert a.brokers() == (0, 1, 2)


def test_vip_bootstrap_a_storm_of_refusals_after_refreshes() -> None:
    s = Scenario()
    healthy(s, 60)
    # every broker at one address: each of the client's connections lands on a broker
    # that does not lead the partitions it sends there, whatever metadata says
    s.at(10)
    s.add(METADATA, client="vip", broker=1, conn=1, topics=("orders",))
    for _ in range(10):
        for p, landed_on in ((0, 2), (1, 0), (2, 1)):
            s.add(PRODUCE, client="vip", broker=landed_on, conn=2 + p,
                  partitions=(f"orders-{p}",), errors=NOT_LEADER, roles=("other",), dt=0.05)
        s.add(METADATA, client="vip", broker=1, conn=1, topics=("orders",), dt=0.1)
    found = analyze(s).findings()
    assert names(found) == [("vip-bootstrap", "client vip @ 10.0.0.1")]
    vip = found[0]
    assert vip.counts["not_leader_or_follower"] == 30 and vip.counts["stale_repeats"] == 27
    assert vip.client_id == "vip" and 0 < len(vip.records) <= DEFAULT.evidence_records
    assert all(e.errors == (("NOT_LEADER_OR_FOLLOWER", 1),) for e in vip.records)


def test_a_failover_of_many_partitions_is_no_vip() -> None:
    # forty partitions refused once each by the old leader, then served by the new one:
    # as many refusals as a storm, but none repeated after the refresh
    s = Scenario()
    parts = tuple(f"big-{i}" for i in range(40))
    s.add(METADATA, client="failover", conn=1, topics=("big",))
    s.add(PRODUCE, client="failover", broker=1, conn=2, partitions=parts,
          errors={"NOT_LEADER_OR_FOLLOWER": 40}, roles=LEADER, dt=1)
    s.add(METADATA, client="failover", conn=1, topics=("big",), dt=0.2)
    s.add(PRODUCE, client="failover", broker=2, conn=3, partitions=parts, roles=LEADER,
          dt=0.3)
    a = analyze(s)
    assert a.findings() == []
    health = a.health()[0]
    assert health.recovery.recovered == 40 and health.recovery.median_ms == 500.0


def test_an_ambiguous_record_attributes_no_partition() -> None:
    s = Scenario()
    s.add(PRODUCE, client="c", partitions=("t-0", "t-1"), errors=NOT_LEADER, roles=LEADER)
    health = analyze(s).health()[0]
    assert health.recovery.unrecovered == 0 and health.errors == NOT_LEADER


def test_metadata_storm_and_the_rate_just_below() -> None:
    s = Scenario()
    s.add(API_VERSIONS, client="storm", conn=1)
    for _ in range(200):          # 2.5 a second for 80 s: 150 in the worst minute
        s.add(METADATA, client="storm", conn=1, topics=("t",), dt=0.4)
    s.add(API_VERSIONS, client="calm", conn=1)
    for _ in range(100):          # 100 in a minute: a lot, but under the threshold
        s.add(METADATA, client="calm", conn=1, topics=("t",), dt=0.6)
    found = analyze(s).findings()
    assert names(found) == [("metadata-storm", "client storm @ 10.0.0.1")]
    assert found[0].counts["peak_per_minute"] == 150
    assert found[0].counts["reason:unexplained"] == 199
    assert found[0].records


def test_rebalance_storm_classic_and_kip848_and_a_settled_group() -> None:
    s = Scenario()
    for gen in range(1, 8):       # seven generations in three minutes
        member = "a" if gen % 2 else "b"
        s.add(JOIN_GROUP, client=member, broker=1, conn=5, roles=COORD, group="churn",
              generation=gen, dt=30)
        s.add(SYNC_GROUP, client=member, broker=1, conn=5, roles=COORD, group="churn",
              generation=gen, dt=0.1)
    for gen in range(1, 8):       # the same seven, but 100 s apart: three per window
        s.add(JOIN_GROUP, client="slow", broker=1, conn=6, roles=COORD, group="slow",
              generation=gen, dt=100)
    s.at(0)
    for epoch in range(1, 9):     # KIP-848: eight member epochs in a minute
        s.add(CONSUMER_GROUP_HEARTBEAT, client="m", broker=2, conn=7, roles=COORD,
              group="new", generation=epoch, dt=5)
    found = analyze(s).findings()
    assert names(found) == [("rebalance-storm", "group churn"),
                            ("rebalance-storm", "group new")]
    assert found[0].counts == {"rebalances": 7, "window_s": 300.0, "members": 2}
    assert found[0].group == "churn"
    assert found[1].counts["rebalances"] == 8


def test_the_rebalances_in_a_clients_health() -> None:
    s = Scenario()
    for gen in (1, 2):
        s.add(JOIN_GROUP, client="a", conn=5, roles=COORD, group="g", latency_ms=500,
              dt=10)
        s.records[-1].generation = gen
        s.add(SYNC_GROUP, client="a", conn=5, roles=COORD, group="g", generation=gen,
              dt=1)
    group = analyze(s).health()[0].groups[0]
    assert group.rebalances == 2 and group.generations == (1, 2)
    assert group.rebalance_median_ms == 1500.0 and group.rebalance_max_ms == 1500.0


def test_coordinator_flapping_and_moves_that_are_not() -> None:
    s = Scenario()
    for broker in (0, 1, 0, 1):   # back and forth: three moves
        s.add(HEARTBEAT, client="m", broker=broker, conn=10 + broker, roles=COORD,
              group="flap", generation=1, dt=10)
        s.add(HEARTBEAT, client="m", broker=1 - broker, conn=11 - broker, roles=COORD,
              group="flap", errors={"NOT_COORDINATOR": 1}, dt=1)  # the old one refuses
        s.add(HEARTBEAT, client="m", broker=broker, conn=10 + broker, roles=COORD,
              group="flap", generation=1, dt=1)
    s.at(0)
    for broker in (0, 1, 0):      # a restart and the failback: two moves
        s.add(HEARTBEAT, client="r", broker=broker, conn=20 + broker, roles=COORD,
              group="restart", generation=1, dt=10)
    s.at(0)
    for broker in (0, 1, 2, 3):   # three moves, never back
        s.add(HEARTBEAT, client="w", broker=broker, conn=30 + broker, roles=COORD,
              group="walk", generation=1, dt=10)
    a = analyze(s)
    found = a.findings()
    assert names(found) == [("coordinator-flapping", "group flap")]
    assert found[0].counts["moves"] == 3
    assert "0 -> 1 -> 0 -> 1" in found[0].explanation
    m = next(c for c in a.health() if c.client_id == "m")
    # each NOT_COORDINATOR was followed, a second later, by a success on the group
    assert m.recovery.recovered == 4 and m.recovery.median_ms == 1000.0


def test_connection_fanout_beyond_twice_the_brokers_plus_two() -> None:
    s = Scenario()
    for client, n in (("fan", 9), ("ok", 8)):
        s.at(0)
        for conn in range(n):
            s.add(METADATA, client=client, broker=conn % 3, conn=conn, topics=("t",),
                  dt=0.1)
        for conn in range(n):
            s.add(FETCH, client=client, broker=conn % 3, conn=conn, partitions=("t-0",),
                  roles=LEADER, dt=0.1)
    found = analyze(s).findings()
    assert names(found) == [("connection-fanout", "client fan @ 10.0.0.1")]
    assert found[0].counts == {"max_open_connections": 9, "brokers": 3, "limit": 8,
                               "connections_seen": 9}


def test_sequential_connections_are_no_fanout() -> None:
    s = Scenario()
    for conn in range(20):        # twenty in turn, each closed before the next
        s.add(METADATA, client="seq", broker=conn % 3, conn=conn, topics=("t",), dt=1)
    assert analyze(s).findings() == []


def idle_run(s: Scenario, client: str, *, replaced: bool = False,
             stops: bool = False) -> None:
    """Five connections opened and used; then only connection 1 goes on for 200 s (and,
    ``replaced``, four new ones to the same brokers beside it)."""
    s.at(0)
    for conn in range(1, 6):
        s.add(METADATA, client=client, broker=conn % 3, conn=conn, topics=("t",), dt=0.1)
    for conn in range(1, 6):
        s.add(FETCH, client=client, broker=conn % 3, conn=conn, partitions=("t-0",),
              roles=LEADER, dt=1)
    if stops:
        return
    active = [1, *(range(12, 16) if replaced else ())]
    for _ in range(40):
        for conn in active:
            s.add(FETCH, client=client, broker=conn % 3, conn=conn, partitions=("t-0",),
                  roles=LEADER, dt=5 / len(active))


def test_idle_connections_while_the_client_works_on() -> None:
    s = Scenario()
    idle_run(s, "idle")
    found = analyze(s).findings()
    assert names(found) == [("idle-connections", "client idle @ 10.0.0.1")]
    assert found[0].counts["idle_connections"] == 4
    assert sorted(e.connection_id for e in found[0].records) == [2, 3, 4, 5]


def test_replaced_or_finished_connections_are_not_idle() -> None:
    s = Scenario()
    idle_run(s, "reconnects", replaced=True)
    idle_run(s, "finished", stops=True)
    assert analyze(s).findings() == []


def test_throttling_in_the_health() -> None:
    s = Scenario()
    for ms in (0, 100, 250, 0):
        s.add(PRODUCE, client="t", partitions=("t-0",), roles=LEADER, throttle_ms=ms, dt=1)
    throttle = analyze(s).health()[0].throttle
    assert (throttle.throttled_requests, throttle.total_ms, throttle.max_ms) == (2, 350, 250)


def test_clients_apart_by_host_and_by_source() -> None:
    s = Scenario()
    s.add(METADATA, client="same", host="10.0.0.1")
    s.add(METADATA, client="same", host="10.0.0.2")
    s.add(METADATA, client="same", host="10.0.0.2", source="proxy", broker=-1)
    s.add(METADATA, client="same", host="10.0.0.2", source="proxy", broker=2)
    a = analyze(s)
    subjects = sorted(c.subject for c in a.health())
    assert subjects == ["client same @ 10.0.0.1", "client same @ 10.0.0.2",
                        "client same @ 10.0.0.2 via proxy"]
    assert a.brokers("broker") == (0,) and a.brokers("proxy") == (2,)
    assert a.report().brokers == (0, 2)


def test_a_log_the_proxy_alone_writes_names_the_brokers() -> None:
    # in front of Apache Kafka, the proxy's records are all there is
    s = Scenario()
    for broker in (-1, 0, 1, 2):
        s.add(METADATA, client="app", source="proxy", broker=broker, conn=broker + 2)
    assert analyze(s).report().brokers == (0, 1, 2)


def test_fed_in_pieces_the_same_as_at_once_and_ignored_clients() -> None:
    s = Scenario()
    healthy(s, 60)
    idle_run(s, "idle")
    s.records.sort(key=lambda r: r.timestamp)
    whole, pieces = Analyzer(), Analyzer(ignore_clients={"consumer"})
    whole.feed(s.records)
    for i in range(0, len(s.records), 97):
        pieces.feed(s.records[i:i + 97])
    assert whole.findings() == pieces.findings() != []
    assert {c.client_id for c in whole.health()} == {"producer", "consumer", "idle"}
    assert {c.client_id for c in pieces.health()} == {"producer", "idle"}


def test_the_report_as_text_and_as_json() -> None:
    s = Scenario()
    healthy(s, 30)
    idle_run(s, "idle")
    report = analyze(s).report()
    text = render_text(report)
    assert "Findings (1)" in text and "idle-connections  client idle @ 10.0.0.1" in text
    assert "group g (classic): 1 rebalances, generations 1" in text
    as_json = json.loads(json.dumps(report.to_dict()))
    assert as_json["findings"][0]["name"] == "idle-connections"
    assert {c["subject"] for c in as_json["clients"]} >= {"client producer @ 10.0.0.1"}
    assert render_text(Analyzer().report()).startswith("kaflite doctor: no requests")


def test_a_brokers_own_connections_are_no_clients() -> None:
    # A replica fetcher's first requests (ApiVersions, before the Fetch that carries its
    # replica id) were logged as a client's bootstrap, and a log written then still
    # says so: the client id tells (Kafka's conventions, and kaflite's older names).
    s = Scenario()
    healthy(s, 300)
    brokers = ("broker-1-fetcher-0", "broker-2-txn-marker-sender", "Persister-client-0",
               "replica-fetcher-1", "txn-coordinator-2", "share-persister-0")
    for client in brokers:
        idle_run(s, client)      # as a client's, five connections, four of them idle
    s.add(METADATA, client="anything", roles=("replica-fetcher",))
    s.records.sort(key=lambda r: r.timestamp)
    a = Analyzer()
    clients = [r for r in s.records if r.client_id in ("producer", "consumer")]
    assert a.feed(s.records) == len(clients)
    assert a.findings() == []
    assert {c.client_id for c in a.health()} == {"producer", "consumer"}
