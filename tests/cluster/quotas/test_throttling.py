"""Byte-rate quotas against real clients, measured: one cluster, three clients at once.

A confluent-kafka producer (user alice) and a confluent-kafka consumer (user
carol) that push as hard as they can, and kaflite's own producer (user dave),
each under a 1 MB/s quota, run together for 20 s; each is held within 10% of
its quota, measured from the log (bytes appended, bytes read). Then alice's
quota is raised while her producer runs, and her rate follows.

The cluster uses ``quota.window.num=2``: the initial burst every quota allows
(``window.num - 1`` windows' worth) is over after a second, and the coarse
sawtooth a greedy consumer rides with few, long windows (it is only served when
the rate with its fetch stays at or under the quota, so it gets less than the
quota on average) stays within a few percent. The consumer's fetches are small
(32 KiB batches, ``max.partition.fetch.bytes`` 32 KiB) for the same reason: Kafka
counts a fetch as a whole, so the bigger it is, the further under the quota a
greedy consumer ends up.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflite.client._quotas import ClientQuotaAlteration
from kaflite.client.sync import Admin
from kaflite.cluster import Cluster

confluent_kafka = pytest.importorskip("confluent_kafka")

QUOTA = 1024 * 1024
MEASURE_S = 20.0
WARMUP_S = 1.5
VALUE = b"q" * 10_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    config = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.users": "alice:alice-secret,carol:carol-secret,dave:dave-secret",
        "quota.window.num": "2",
    }
    with Cluster(brokers=1, listeners="PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                 config=config) as c:
        yield c


def _sasl(cluster: Cluster, user: str) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": f"{user}-secret", "client.id": user}


def _log_bytes(cluster: Cluster, topic: str) -> int:
    return int(cluster.broker(0).partitions[(topic, 0)].log.size_bytes)


def _confluent_producer(config: dict[str, Any], topic: str, stop: threading.Event,
                        throttles: list[int]) -> None:
    def stats(text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            if b.get("throttle", {}).get("max", 0) > 0:
                throttles.append(int(b["throttle"]["max"]))

    p = confluent_kafka.Producer({**config, "linger.ms": 5, "statistics.interval.ms": 500,
                                  "stats_cb": stats, "queue.buffering.max.kbytes": 4096})
    while not stop.is_set():
        try:
            p.produce(topic, VALUE)
        except BufferError:
            p.poll(0.01)
    p.flush(10)


def _confluent_consumer(config: dict[str, Any], topic: str, stop: threading.Event,
                        received: list[tuple[float, int]], throttles: list[int]) -> None:
    def stats(text: str) -> None:
        for b in json.loads(text).get("brokers", {}).values():
            if b.get("throttle", {}).get("max", 0) > 0:
                throttles.append(int(b["throttle"]["max"]))

    c = confluent_kafka.Consumer({**config, "group.id": "quota-readers",
                                  "enable.auto.commit": False, "statistics.interval.ms": 500,
                                  "max.partition.fetch.bytes": 32768,
                                  "stats_cb": stats})
    c.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    try:
        while not stop.is_set():
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    received.append((time.monotonic(), len(m.value() or b"")))
    finally:
        c.close()


def _kaflite_producer(config: dict[str, Any], topic: str, stop: threading.Event,
                      events: list[str]) -> None:
    from kaflite.client import BufferFull, Producer

    async def main() -> None:
        producer = Producer({**config, "linger.ms": 5, "buffer.memory": 2 * QUOTA})
        await producer.start()
        try:
            while not stop.is_set():
                try:
                    producer.produce(topic, VALUE)
                    await asyncio.sleep(0)      # let the sender run
                except BufferFull:
                    await asyncio.sleep(0.01)
            await producer.flush(10)
            events.extend(str(e) for e in producer.events("throttle"))
        finally:
            await producer.close(5)

    asyncio.run(main())


def _rate(sample: Callable[[], int], seconds: float) -> float:
    first = sample()
    time.sleep(seconds)
    return (sample() - first) / seconds


def test_byte_rate_quotas_hold_three_clients_and_a_change_applies_at_once(
        cluster: Cluster) -> None:
    began = time.monotonic()
    for topic in ("q-alice", "q-dave", "q-read"):
        cluster.create_topic(topic)
    with Admin({"bootstrap.servers": cluster.bootstrap("PLAINTEXT")}) as admin:
        # 25 MB to read in 32 KiB batches, written over PLAINTEXT (User:ANONYMOUS: no quota)
        plain = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap("PLAINTEXT"),
                                          "linger.ms": 20, "batch.size": 32768})
        for _ in range(2500):
            while True:
                try:
                    plain.produce("q-read", VALUE)
                    break
                except BufferError:
                    plain.poll(0.01)
        assert plain.flush(30) == 0
        del plain
        admin.alter_client_quotas([
            ClientQuotaAlteration({"user": "alice"}, {"producer_byte_rate": QUOTA}),
            ClientQuotaAlteration({"user": "dave"}, {"producer_byte_rate": QUOTA}),
            ClientQuotaAlteration({"user": "carol"}, {"consumer_byte_rate": QUOTA})])

        stop = threading.Event()
        producer_throttles: list[int] = []
        consumer_throttles: list[int] = []
        received: list[tuple[float, int]] = []
        kaflite_events: list[str] = []
        threads = [
            threading.Thread(target=_confluent_producer, args=(
                _sasl(cluster, "alice"), "q-alice", stop, producer_throttles)),
            threading.Thread(target=_confluent_consumer, args=(
                _sasl(cluster, "carol"), "q-read", stop, received, consumer_throttles)),
            threading.Thread(target=_kaflite_producer, args=(
                _sasl(cluster, "dave"), "q-dave", stop, kaflite_events)),
        ]
        for t in threads:
            t.start()
        try:
            time.sleep(WARMUP_S)
            start = time.monotonic()
            alice0, dave0 = _log_bytes(cluster, "q-alice"), _log_bytes(cluster, "q-dave")
            time.sleep(MEASURE_S)
            end = time.monotonic()
            alice = (_log_bytes(cluster, "q-alice") - alice0) / (end - start)
            dave = (_log_bytes(cluster, "q-dave") - dave0) / (end - start)
            read = sum(n for t, n in list(received) if start <= t < end) / (end - start)
            # a quota raised while the producer runs applies at once
            admin.alter_client_quotas([
                ClientQuotaAlteration({"user": "alice"}, {"producer_byte_rate": 4 * QUOTA})])
            time.sleep(1.0)
            raised = _rate(lambda: _log_bytes(cluster, "q-alice"), 3.0)
            # no quota while the clients flush and close
            admin.alter_client_quotas([ClientQuotaAlteration({"user": u}, {k: None}) for u, k in (
                ("alice", "producer_byte_rate"), ("dave", "producer_byte_rate"),
                ("carol", "consumer_byte_rate"))])
        finally:
            stop.set()
            for t in threads:
                t.join(30)
        rows = {c.client_id: c for c in cluster.connections(include_closed=True)
                if c.client_id in ("alice", "carol", "dave") and c.throttles}
    print(f"{time.monotonic() - began:.1f} s; alice {alice / QUOTA:.3f}, dave {dave / QUOTA:.3f}, "
          f"carol {read / QUOTA:.3f}, alice raised {raised / QUOTA:.3f} MB/s; muted arrivals "
          f"{ {k: r.requests_while_muted for k, r in rows.items()} }")
    assert abs(alice - QUOTA) <= 0.1 * QUOTA, alice
    assert abs(dave - QUOTA) <= 0.1 * QUOTA, dave
    # Under the old quota she held 1.0 +- 0.1; the new one is 4x, but on two loaded cores
    # her producer, a consumer, another producer and the broker share the CPU, so the
    # bar is set where the old quota could not reach, not at the new one.
    assert raised > 1.4 * QUOTA, raised
    # each was told to wait, and knew it
    assert producer_throttles and consumer_throttles
    assert kaflite_events and "throttled Produce for" in kaflite_events[0]
    # the registry shows each client's quota, its rate and its throttle time
    assert rows["dave"].quotas["producer_byte_rate"]["limit"] == QUOTA
    assert rows["carol"].quotas["consumer_byte_rate"]["rate"] > 0
    assert rows["dave"].throttle_time_ms > 0
    # kaflite's producer waited out every throttle: nothing reached a muted channel
    assert rows["dave"].requests_while_muted == 0
    assert abs(read - QUOTA) <= 0.1 * QUOTA, read
