"""Share groups with every broker in its own process: the share coordinator reached over
inter-broker connections, the registry's share roles and the share faults over the wire."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):
    pytest.skip("confluent-kafka has no ShareConsumer", allow_module_level=True)
TOPIC, GROUP = "procs-share", "procs-share"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=2, processes=True,
                 config={"broker.heartbeat.interval.ms": 250,
                         "group.share.record.lock.duration.ms": 2000,
                         "group.share.min.record.lock.duration.ms": 1000}) as c:
        yield c


def test_share_group_across_broker_processes(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    cluster.create_topic(TOPIC, 1, 2)
    c = ck.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                          "share.acknowledgement.mode": "explicit"})
    c.subscribe([TOPIC])
    try:
        # share.auto.offset.reset is latest: records produced once the share-partition
        # exists (the consumer's first fetch) are the ones it reads.
        deadline = time.monotonic() + 30
        while not any("share-partition-leader" in x.roles for x in cluster.connections()):
            assert time.monotonic() < deadline, "no share fetch reached the leader"
            assert not [m for m in c.poll(0.2) if m.error() is None]
        p = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(10):
            p.produce(TOPIC, f"v{i}".encode(), partition=0)
        assert p.flush(30) == 0
        held: list[str] = []
        deadline = time.monotonic() + 30
        while len(held) < 10 and time.monotonic() < deadline:
            held += [m.value().decode() for m in c.poll(0.5) if m.error() is None]
        assert sorted(held) == [f"v{i}" for i in range(10)]
        # The locks expire on demand, in the leader's process: all ten come back.
        released = cluster.faults.expire_share_locks(GROUP, TOPIC, 0)
        assert released == 10
        assert cluster.faults.bump_share_state_epoch(GROUP, TOPIC, 0)
        roles = {r for x in cluster.connections() for r in x.roles}
        assert {"share-coordinator", "share-partition-leader"} <= roles
    finally:
        c.close()
    again = ck.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers,
                              "group.id": GROUP})
    again.subscribe([TOPIC])
    counts: dict[str, int] = {}
    try:
        def drained() -> bool:
            for m in again.poll(0.3):
                if m.error() is None:
                    counts[m.value().decode()] = m.delivery_count()
            return len(counts) == 10
        wait_for(drained, "the released records, delivered again")
    finally:
        again.close()
    assert set(counts.values()) == {2}
