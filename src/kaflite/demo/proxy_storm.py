"""One producer through one proxy, and what came of it: the measure behind
``kaflite demo --proxy`` (``kaflite.demo.vip_story`` tells the story around it).

A confluent-kafka producer writes keyed records to a topic through a proxy, either
kaflite's naive one (every broker advertised at one address, each connection on a
broker drawn at random, as a load balancer in front of Kafka does) or the aware one
(one port per broker). The proxy's registry counts the NOT_LEADER_OR_FOLLOWER answers
the producer got there. (A consumer is not the one to show it with: since KIP-392 a
follower serves a consumer's Fetch, so a consumer behind a VIP reads on; a producer's
records must reach each partition's leader.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kaflite.proxy import Proxy

__all__ = ["NOT_LEADER", "StormResult", "produce_through"]

NOT_LEADER = "NOT_LEADER_OR_FOLLOWER"


@dataclass(frozen=True)
class StormResult:
    client_id: str
    records: int            # records the producer was given
    delivered: int          # records it had acknowledged
    failed: int             # records it gave up on
    not_leader: int         # NOT_LEADER_OR_FOLLOWER answers it got through the proxy
    requests: int           # its requests through the proxy
    seconds: float

    @property
    def stormed(self) -> bool:
        return self.not_leader > 0


def produce_through(proxy: Proxy, client_id: str, topic: str, records: int,
                    timeout_s: float) -> StormResult:
    """``records`` keyed records from a librdkafka producer (``client_id``) through
    ``proxy``, each given up on after ``timeout_s``; what the producer and the proxy
    saw of it. The producer is gone when this returns."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": proxy.bootstrap_servers, "client.id": client_id,
                         "linger.ms": 5, "message.timeout.ms": int(timeout_s * 1000),
                         "log_level": 0})
    outcome = {"ok": 0, "failed": 0}

    def done(err: Any, msg: Any) -> None:
        outcome["failed" if err is not None else "ok"] += 1

    t0 = time.monotonic()
    for i in range(records):
        producer.produce(topic, f"record-{i}".encode(), key=str(i).encode(), on_delivery=done)
        producer.poll(0)
    producer.flush(timeout_s + 10)
    seconds = time.monotonic() - t0
    del producer        # librdkafka's client closes its connections when destroyed
    rows = proxy.connections(client_id, include_closed=True)
    return StormResult(client_id, records, outcome["ok"], outcome["failed"],
                       sum(a.errors.get(NOT_LEADER, 0) for r in rows for a in r.apis.values()),
                       sum(r.requests for r in rows), seconds)
