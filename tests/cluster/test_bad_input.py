"""Garbage on the wire closes that connection only; the broker keeps serving everyone.

Thousands of mutated frames (random bytes, oversized sizes, unknown API keys,
unsupported versions, truncated and corrupted bodies of real requests) go to a
live broker. Afterwards the broker must still answer a real client, its data
must be intact, and ApiVersions at an unknown version must get KIP-511's v0
answer rather than a closed socket.
"""

from __future__ import annotations

import random
import socket
import struct
import time

from kaflite.cluster import Cluster
from kaflite.protocol import decode_response, encode_request
from kaflite.protocol.messages import ApiVersionsRequest, MetadataRequest, MetadataRequestTopic


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _valid_requests() -> list[bytes]:
    reqs = [
        b"".join(encode_request(18, 3, 1, "fuzz", ApiVersionsRequest("fuzz", "1")))[4:],
        b"".join(encode_request(3, 12, 2, "fuzz", MetadataRequest(
            topics=[MetadataRequestTopic(name="fuzzed")])))[4:],
        b"".join(encode_request(3, 1, 3, "fuzz", MetadataRequest(topics=None)))[4:],
    ]
    return reqs


def _mutations(rng: random.Random, n: int) -> list[bytes]:
    base = _valid_requests()
    out = []
    for _ in range(n):
        kind = rng.randrange(6)
        if kind == 0:
            out.append(_frame(rng.randbytes(rng.randint(0, 64))))
        elif kind == 1:  # a size beyond socket.request.max.bytes, or negative
            out.append(struct.pack(">i", rng.choice([-1, -(1 << 31), 200_000_000, 0x7FFFFFFF])))
        elif kind == 2:  # unknown API key
            out.append(_frame(struct.pack(">hhih", rng.randint(200, 30000), 0, 7, -1)))
        elif kind == 3:  # unsupported version of a known API
            out.append(_frame(struct.pack(">hhih", 3, rng.randint(13, 300), 7, -1)))
        else:  # corrupt or truncate a real request
            data = bytearray(rng.choice(base))
            if kind == 4:
                del data[rng.randint(0, len(data) - 1):]
            else:
                for _ in range(rng.randint(1, 5)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
            out.append(_frame(bytes(data)))
    return out


def _send(port: int, frame: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(0.3)
        try:
            s.sendall(frame)
            s.recv(65536)
        except OSError:
            pass


def test_broker_survives_thousands_of_bad_frames(cluster3: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster3.create_topic("fuzz-survivor", partitions=1, replication_factor=3)
    producer = Producer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all"})
    for i in range(100):
        producer.produce("fuzz-survivor", f"before-{i}".encode())
    assert producer.flush(30) == 0
    rng = random.Random(1234)
    port = cluster3.broker(0).port
    frames = _mutations(rng, 2000)
    # Several bad frames per connection, many connections.
    for i in range(0, len(frames), 4):
        _send(port, b"".join(frames[i:i + 4]))
    assert cluster3.broker(0).running
    for i in range(100):
        producer.produce("fuzz-survivor", f"after-{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": cluster3.bootstrap_servers, "group.id": "fz",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("fuzz-survivor", 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < 200 and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            assert m.error() is None
            values.append(m.value().decode())
    consumer.close()
    assert values == [f"before-{i}" for i in range(100)] + [f"after-{i}" for i in range(100)]


def test_api_versions_at_unknown_version_gets_a_v0_answer(cluster3: Cluster) -> None:
    port = cluster3.broker(1).port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        # ApiVersions v99 with a v2 header (client id + empty tagged fields).
        body = struct.pack(">hhih", 18, 99, 42, 4) + b"fuzz" + b"\x00" + b"\x00\x00\x00"
        s.sendall(_frame(body))
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
    header, resp = decode_response(data, 18, 0)
    assert header.correlation_id == 42
    assert resp.error_code == 35  # UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
