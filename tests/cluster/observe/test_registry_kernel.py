"""The registry agrees with the kernel.

A confluent-kafka consumer, in its own process, reads a 12-partition topic whose
partition i is led by broker i of a 12-broker cluster. The registry's
connections for its client.id must be exactly the TCP connections the kernel
shows for that process (``/proc/<pid>/fd`` + ``/proc/<pid>/net/tcp``, what
``ss -tnp`` prints), once connections still being opened have settled, and each
must have the right role: one partition leader per broker, each for its own
partition, plus the group coordinator when the group coordinator exists, and
nothing but bootstrap otherwise.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.observe import ConnectionSnapshot
from tests.cluster.observe.kernel import established_connections, ss_connections

pytest.importorskip("confluent_kafka")

BROKERS = 12
TOPIC = "registry-kernel"
CLIENT = "registry-kernel-consumer"
SCRIPT = Path(__file__).with_name("consumer_process.py")


@pytest.fixture(scope="module")
def cluster12() -> Iterator[Cluster]:
    with Cluster(brokers=BROKERS, config={"offsets.topic.replication.factor": 1,
                                          "group.initial.rebalance.delay.ms": 0}) as cluster:
        cluster.create_topic(TOPIC, BROKERS, 1, assignments=[[i] for i in range(BROKERS)])
        yield cluster


def _produce_everywhere(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for p in range(BROKERS):
        producer.produce(TOPIC, b"record", partition=p)
    assert producer.flush(30) == 0


def test_registry_matches_kernel_and_roles(cluster12: Cluster) -> None:
    cluster = cluster12
    for p in range(BROKERS):
        assert cluster.controller.topics[TOPIC].partitions[p].leader == p
    _produce_everywhere(cluster)
    group = "registry-kernel-group"
    bootstrap = f"127.0.0.1:{cluster.broker(0).port}"
    args = [sys.executable, str(SCRIPT), bootstrap, TOPIC, str(BROKERS), CLIENT]
    proc = subprocess.Popen([*args, group], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        ports = {b.port for b in cluster.brokers.values()}
        deadline = time.monotonic() + 15
        while True:
            conns = cluster.connections(client_id=CLIENT)
            registry = {int(c.peer.rsplit(":", 1)[1]) for c in conns}
            kernel = established_connections(proc.pid, ports)
            roles = Counter(r for c in conns for r in c.roles)
            settled = (registry == kernel and roles["partition-leader"] == BROKERS
                       and roles["group-coordinator"] == 1)
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert registry == kernel, f"registry {sorted(registry)} != kernel {sorted(kernel)}"
        shown = ss_connections(proc.pid, ports)
        assert shown is None or shown == kernel, f"ss -tnp shows {sorted(shown or [])}"
        _check_roles(conns, group)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)


def _check_roles(conns: list[ConnectionSnapshot], group: str) -> None:
    leaders = [c for c in conns if "partition-leader" in c.roles]
    assert sorted(c.broker for c in leaders) == list(range(BROKERS))  # one per broker
    for c in leaders:
        assert c.partitions == [f"{TOPIC}-{c.broker}"]  # each for the partition it leads
        assert c.apis["Fetch"].count >= 1
    coordinators = [c for c in conns if "group-coordinator" in c.roles]
    assert len(coordinators) == 1 and coordinators[0].groups == [group]
    assert "Heartbeat" in coordinators[0].apis or "JoinGroup" in coordinators[0].apis
    others = [c for c in conns if c not in leaders and c not in coordinators]
    for c in others:
        assert c.roles == ["bootstrap"], c
    assert all(c.software_name == "confluent-kafka-python" for c in conns
               if "ApiVersions" in c.apis)
    assert all(c.principal == "User:ANONYMOUS" for c in conns)
