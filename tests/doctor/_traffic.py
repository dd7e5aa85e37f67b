"""Traffic on a real cluster for the doctor's end-to-end tests: a librdkafka producer
through a proxy, and waiting for the request log to hold a record."""

from __future__ import annotations

from typing import Any

from kaflite.cluster import Cluster
from kaflite.proxy import Proxy
from tests.cluster.request_log._reader import Reader

NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"


def logged(cluster: Cluster, what: str, cond: Any) -> None:
    """Wait until the request log holds a record for which ``cond`` holds."""
    reader = Reader(cluster.bootstrap_servers)
    try:
        reader.wait(lambda seen: any(cond(r) for r in seen), what)
    finally:
        reader.close()


def produce_through(proxy: Proxy, client_id: str, topic: str) -> int:
    """300 keyed records from a librdkafka producer through ``proxy``; the
    NOT_LEADER_OR_FOLLOWER answers it got there, as the proxy counted them."""
    from confluent_kafka import Producer as RdProducer

    producer = RdProducer({"bootstrap.servers": proxy.bootstrap_servers,
                           "client.id": client_id, "linger.ms": 5,
                           "message.timeout.ms": 4000, "retry.backoff.ms": 50,
                           "log_level": 0})
    for i in range(300):
        producer.produce(topic, f"r-{i}".encode(), key=str(i).encode())
        producer.poll(0)
    producer.flush(20)
    return sum(a.errors.get(NOT_LEADER, 0) for c in proxy.connections(include_closed=True)
               if c.client_id == client_id for a in c.apis.values())


def storm_behind_vip(cluster: Cluster, topic: str) -> str | None:
    """librdkafka producers behind kaflite's naive proxy (every broker at one address,
    a broker drawn per connection), one after another, until one gets refused; its
    client id.

    The draw can land each of a producer's connections on its own broker (about one
    producer in 27 sees no error): at most five producers."""
    with Proxy(cluster.bootstrap_servers, naive=True) as naive:
        for n in range(5):
            if produce_through(naive, f"behind-vip-{n}", topic) > 0:
                return f"behind-vip-{n}"
    return None
