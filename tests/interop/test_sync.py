"""kaflite's blocking façade (``kaflite.client.sync``) against each target: the producer's
caller-side batches (``produce``), idempotent and transactional, and a read_committed
consumer in a group, with the offsets it commits seen by the admin client."""

from __future__ import annotations

import time

import pytest

from kaflite.client import NewTopic, TopicPartition
from kaflite.client.sync import Admin, Consumer, Producer
from kaflite.protocol import errors
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import replicas, uid
from tests.interop.conftest import ONE_BROKER, limited, matrix_fixture

pytestmark = pytest.mark.interop

# one broker of kaflite and Apache Kafka, Tansu and kfake (tests/interop/conftest.py)
target1 = matrix_fixture(ONE_BROKER, name="target1")

PARTITIONS = 3
PLAIN = 1000


def wait_for_leaders(admin: Admin, topic: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            parts = admin.describe_topics([topic])[topic].partitions
            if len(parts) == PARTITIONS and all(p.leader >= 0 for p in parts):
                return
        except errors.UnknownTopicOrPartitionError:
            pass        # Kafka's brokers learn of it from the controller a little later
        assert time.monotonic() < deadline, f"{topic} got no leaders"
        time.sleep(0.1)


def test_sync_producers_and_a_read_committed_group(target1: ClusterUnderTest) -> None:
    target = target1
    limited(target, {"tansu": "Tansu 0.6 hands aborted records to read_committed "
                              "(test_transactions.py checks it); a pass here would be luck"})
    topic, group = uid("sync"), uid("sync-group")
    servers = target.bootstrap_servers
    with Admin(bootstrap_servers=servers) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, replicas(target))])
        wait_for_leaders(admin, topic)
        with Producer(bootstrap_servers=servers, enable_idempotence=True, acks="all") as p:
            for i in range(PLAIN):
                p.produce(topic, f"plain-{i}".encode(), key=f"k{i % 10}".encode())
            p.flush()
            last = p.send(topic, b"plain-sent", partition=0)
            assert last.offset >= 0
        with Producer(bootstrap_servers=servers, transactional_id=uid("sync-tid")) as t:
            t.init_transactions()
            t.begin_transaction()
            for i in range(10):
                t.produce(topic, f"txn-{i}".encode(), partition=i % PARTITIONS)
            t.commit_transaction()
            t.begin_transaction()
            for i in range(5):
                t.produce(topic, f"aborted-{i}".encode(), partition=i % PARTITIONS)
            t.abort_transaction()
        want = {f"plain-{i}".encode() for i in range(PLAIN)} | {b"plain-sent"} \
            | {f"txn-{i}".encode() for i in range(10)}
        got: list[bytes] = []
        with Consumer(bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                      isolation_level="read_committed", enable_auto_commit=False) as c:
            c.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(got) < len(want):
                got += [r.value or b"" for r in c.poll(timeout_ms=200)]
                assert time.monotonic() < deadline, f"{len(got)} of {len(want)} read"
            c.commit()
            positions = {TopicPartition(topic, p): c.position(TopicPartition(topic, p))
                         for p in range(PARTITIONS)}
        assert sorted(got) == sorted(want)
        committed = admin.list_group_offsets(group)
        assert {tp: o.offset for tp, o in committed.items()} == positions
