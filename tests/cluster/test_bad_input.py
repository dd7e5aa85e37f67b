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
import uuid
from pathlib import Path

from kaflite.cluster import Cluster
from kaflite.protocol import decode_response, encode_request
from kaflite.protocol.messages import (
    ApiVersionsRequest,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    MetadataRequest,
    MetadataRequestTopic,
    MetadataResponse,
    Struct,
)
from kaflite.protocol.messages import create_partitions_request as cpq
from kaflite.protocol.messages import create_topics_request as ctq
from kaflite.protocol.messages import delete_topics_request as dtq
from tests._net import recv_exactly


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
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 5)]


def _exchange(s: socket.socket, api_key: int, version: int, correlation: int,
              body: Struct) -> tuple[int, object]:
    s.sendall(b"".join(bytes(c) for c in encode_request(api_key, version, correlation, "bad",
                                                          body)))
    size = struct.unpack(">i", recv_exactly(s, 4))[0]
    header, resp = decode_response(recv_exactly(s, size), api_key, version)
    return header.correlation_id, resp


def test_metadata_by_topic_id_before_v12_is_an_invalid_request(cluster3: Cluster) -> None:
    """v10 and v11 carry a topic id field, but their response cannot name a topic by id
    (its name is not nullable before v12): Kafka answers INVALID_REQUEST for each topic.
    Found by the frame fuzzer: the response failed to encode and the handler raised."""
    cluster3.create_topic("by-id", partitions=1, replication_factor=1)
    topic_id = cluster3.controller.topics["by-id"].topic_id
    with socket.create_connection(("127.0.0.1", cluster3.broker(0).port), timeout=10) as s:
        for version, wanted in (
                (10, [MetadataRequestTopic(name=None, topic_id=topic_id)]),
                (11, [MetadataRequestTopic(name="by-id", topic_id=topic_id),
                      MetadataRequestTopic(name=None, topic_id=uuid.uuid4())])):
            correlation, resp = _exchange(s, 3, version, version, MetadataRequest(topics=wanted))
            assert correlation == version
            assert isinstance(resp, MetadataResponse)
            assert [(t.error_code, t.name) for t in resp.topics] == \
                [(42, w.name or "") for w in wanted]
        # the connection is still served, and by id at v12 the topic is found
        _, resp = _exchange(s, 3, 12, 12, MetadataRequest(
            topics=[MetadataRequestTopic(name=None, topic_id=topic_id)]))
        assert isinstance(resp, MetadataResponse)
        assert [(t.error_code, t.name) for t in resp.topics] == [(0, "by-id")]
        # Java's admin asks by id with the name at its default, "": the id decides (it
        # was answered UNKNOWN_TOPIC_OR_PARTITION for "" with no id, which the client
        # cannot read by id: IllegalStateException in describeTopics(ofTopicIds))
        unknown = uuid.uuid4()
        _, resp = _exchange(s, 3, 13, 13, MetadataRequest(
            topics=[MetadataRequestTopic(name="", topic_id=topic_id),
                    MetadataRequestTopic(name="", topic_id=unknown)]))
        assert isinstance(resp, MetadataResponse)
        assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == \
            [(0, "by-id", topic_id), (100, None, unknown)]


def test_a_request_for_billions_of_partitions_is_refused_at_once(cluster3: Cluster) -> None:
    """Kafka's controller creates at most 10,000 partitions a request (POLICY_VIOLATION
    beyond). Found by the frame fuzzer: CreatePartitions to 239 million partitions kept
    the broker's event loop placing replicas for minutes; no broker answered meanwhile."""
    cluster3.create_topic("grows", partitions=1, replication_factor=2)
    huge = (1 << 31) - 1
    with socket.create_connection(("127.0.0.1", cluster3.broker(0).port), timeout=10) as s:
        _, created = _exchange(s, 19, 7, 1, CreateTopicsRequest(topics=[
            ctq.CreatableTopic(name="huge", num_partitions=huge, replication_factor=1),
            ctq.CreatableTopic(name="small", num_partitions=1, replication_factor=1)]))
        assert isinstance(created, CreateTopicsResponse)
        assert [(t.name, t.error_code) for t in created.topics] == [("huge", 44), ("small", 44)]
        # 10,001 in all, over two topics: still one request too many
        _, created = _exchange(s, 19, 7, 2, CreateTopicsRequest(topics=[
            ctq.CreatableTopic(name="half-a", num_partitions=5_000, replication_factor=1),
            ctq.CreatableTopic(name="half-b", num_partitions=5_001, replication_factor=1)]))
        assert isinstance(created, CreateTopicsResponse)
        assert {t.error_code for t in created.topics} == {44}
        _, grown = _exchange(s, 37, 3, 3, CreatePartitionsRequest(topics=[
            cpq.CreatePartitionsTopic(name="grows", count=huge, assignments=None)]))
        assert isinstance(grown, CreatePartitionsResponse)
        assert [(r.name, r.error_code) for r in grown.results] == [("grows", 44)]
        # an assignment unlike the topic's other partitions (two replicas each)
        for replicas in ([0], [1, 1], []):
            _, grown = _exchange(s, 37, 3, 4, CreatePartitionsRequest(topics=[
                cpq.CreatePartitionsTopic(name="grows", count=2, assignments=[
                    cpq.CreatePartitionsAssignment(broker_ids=replicas)])]))
            assert isinstance(grown, CreatePartitionsResponse)
            assert [r.error_code for r in grown.results] == [39], replicas
        _, grown = _exchange(s, 37, 3, 5, CreatePartitionsRequest(topics=[
            cpq.CreatePartitionsTopic(name="grows", count=3, assignments=None)]))
        assert isinstance(grown, CreatePartitionsResponse)
        assert [r.error_code for r in grown.results] == [0]
    assert not {"huge", "small", "half-a", "half-b"} & set(cluster3.controller.topics)
    assert len(cluster3.controller.topics["grows"].partitions) == 3


def test_auto_creating_more_than_ten_thousand_partitions_creates_none(cluster3: Cluster) -> None:
    """Kafka's controller refuses to create more than 10,000 partitions for one request,
    and a broker answers every topic it asked to auto-create LEADER_NOT_AVAILABLE. One
    Metadata request naming 10,001 new topics kept kaflite's event loop creating topics
    for over a minute (8 s a thousand); now it creates none. An invalid name is still
    INVALID_TOPIC_EXCEPTION, a topic that exists is answered, and a request under the
    bound still creates its topics."""
    cluster3.create_topic("there", partitions=1, replication_factor=1)
    before = set(cluster3.controller.topics)
    names = [f"auto-{i}" for i in range(10_001)]
    wanted = [MetadataRequestTopic(name=n) for n in [*names, "bad name!", "there"]]
    with socket.create_connection(("127.0.0.1", cluster3.broker(0).port), timeout=60) as s:
        _, resp = _exchange(s, 3, 12, 1, MetadataRequest(topics=wanted,
                                                         allow_auto_topic_creation=True))
        assert isinstance(resp, MetadataResponse)
        codes = [t.error_code for t in resp.topics]
        assert codes == [5] * len(names) + [17, 0]   # LEADER_NOT_AVAILABLE, INVALID_TOPIC
        assert set(cluster3.controller.topics) == before
        _, resp = _exchange(s, 3, 12, 2, MetadataRequest(
            topics=[MetadataRequestTopic(name=n) for n in names[:2]],
            allow_auto_topic_creation=True))
        assert isinstance(resp, MetadataResponse)
        assert [(t.name, t.error_code) for t in resp.topics] == [(n, 0) for n in names[:2]]
    assert set(cluster3.controller.topics) == before | set(names[:2])


def test_one_request_writes_the_metadata_file_once(tmp_path: Path) -> None:
    """CreateTopics, DeleteTopics and Metadata's auto-creation of many topics write the
    controller's metadata file once a request, not once a topic (which made a request
    of n topics cost n writes of a file that grows with n)."""
    with Cluster(brokers=1, data_dir=tmp_path) as cluster, \
            socket.create_connection(("127.0.0.1", cluster.broker(0).port), timeout=60) as s:
        controller = cluster.controller
        names = [f"many-{i}" for i in range(30)]
        before = controller.writes
        _, created = _exchange(s, 19, 7, 1, CreateTopicsRequest(topics=[
            ctq.CreatableTopic(name=n, num_partitions=2, replication_factor=1)
            for n in names]))
        assert isinstance(created, CreateTopicsResponse)
        assert {t.error_code for t in created.topics} == {0}
        assert controller.writes == before + 1
        before = controller.writes
        _, meta = _exchange(s, 3, 12, 2, MetadataRequest(
            topics=[MetadataRequestTopic(name=f"auto-{i}") for i in range(10)],
            allow_auto_topic_creation=True))
        assert isinstance(meta, MetadataResponse)
        assert {t.error_code for t in meta.topics} == {0}
        assert controller.writes == before + 1
        before = controller.writes
        _, deleted = _exchange(s, 20, 6, 3, DeleteTopicsRequest(
            topics=[dtq.DeleteTopicState(name=n) for n in names]))
        assert isinstance(deleted, DeleteTopicsResponse)
        assert {r.error_code for r in deleted.responses} == {0}
        assert controller.writes == before + 1
    # and what was written is what a restart reads
    with Cluster(brokers=1, data_dir=tmp_path) as cluster:
        assert {f"auto-{i}" for i in range(10)} <= set(cluster.controller.topics)
        assert not set(names) & set(cluster.controller.topics)
