"""``kaflite demo --proxy``: the same producer through a shared VIP and through
``kaflite proxy``.

The seeds' warning, shown: a 3-broker cluster and a 6-partition topic; one
confluent-kafka producer writes to it through a naive proxy (every broker
advertised at one address, each connection on a broker drawn at random, as a load
balancer in front of Kafka does), then the same producer writes through the
aware proxy (one port per broker). Each proxy's registry counts the
NOT_LEADER_OR_FOLLOWER answers its clients got. (A consumer is not the one to
show it with: since KIP-392 a follower serves a consumer's Fetch, so a consumer
behind a VIP reads on; a producer's records must reach each partition's leader.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kaflite.cluster import Cluster
from kaflite.proxy import Proxy

__all__ = ["StormResult", "print_storm", "run_proxy_storm"]

NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"
PARTITIONS = 6


@dataclass(frozen=True)
class StormResult:
    mode: str
    delivered: int          # records the producer had acknowledged
    failed: int             # records it gave up on
    not_leader: int         # NOT_LEADER_OR_FOLLOWER answers through the proxy
    requests: int           # requests through the proxy
    seconds: float


def _produce(proxy: Proxy, topic: str, records: int, timeout_s: float, mode: str
             ) -> StormResult:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "linger.ms": 5,
                         "message.timeout.ms": int(timeout_s * 1000), "log_level": 0})
    outcome = {"ok": 0, "failed": 0}

    def done(err: Any, msg: Any) -> None:
        outcome["failed" if err is not None else "ok"] += 1

    t0 = time.monotonic()
    for i in range(records):
        producer.produce(topic, f"record-{i}".encode(), key=str(i).encode(), on_delivery=done)
        producer.poll(0)
    producer.flush(timeout_s + 10)
    rows = proxy.connections(include_closed=True)
    return StormResult(mode, outcome["ok"], outcome["failed"],
                       sum(a.errors.get(NOT_LEADER, 0) for r in rows for a in r.apis.values()),
                       sum(r.requests for r in rows), time.monotonic() - t0)


def run_proxy_storm(records: int = 3000, timeout_s: float = 10.0) -> list[StormResult]:
    """Produce ``records`` records through a naive proxy, then through an aware one."""
    with Cluster(brokers=3) as cluster:
        topic = "storm"
        cluster.create_topic(topic, PARTITIONS, 3)
        results = []
        for mode, naive in (("naive (shared VIP)", True), ("kaflite proxy", False)):
            with Proxy(cluster.bootstrap_servers, naive=naive) as proxy:
                results.append(_produce(proxy, topic, records, timeout_s, mode))
        return results


def print_storm(results: list[StormResult], records: int) -> None:
    print(f"one producer writing {records} keyed records to a 6-partition topic on "
          "3 brokers:")
    print(f"  {'through':20} {'delivered':>9} {'failed':>7} {'NOT_LEADER_OR_FOLLOWER':>23} "
          f"{'requests':>9} {'seconds':>8}")
    for r in results:
        print(f"  {r.mode:20} {r.delivered:>9} {r.failed:>7} {r.not_leader:>23} "
              f"{r.requests:>9} {r.seconds:>8.1f}")
