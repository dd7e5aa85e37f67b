"""Cluster-level faults through ``cluster.faults``: replication isolation, broker crashes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 600}) as c:
        yield c


def isr(cluster: Cluster, topic: str, partition: int = 0) -> list[int]:
    return list(cluster.controller.topics[topic].partitions[partition].isr)


def deliver(cluster: Cluster, p: Any, topic: str, value: bytes) -> None:
    result: list[Any] = []
    p.produce(topic, value, partition=0, on_delivery=lambda err, msg: result.append(err))
    assert p.flush(30) == 0 and result == [None]


def test_isolated_broker_leaves_the_isr_and_comes_back(cluster: Cluster) -> None:
    cluster.create_topic("isolated", 1, 3, assignments=[[0, 1, 2]])
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    deliver(cluster, p, "isolated", b"before")
    wait_for(lambda: isr(cluster, "isolated") == [0, 1, 2], what="a full ISR")
    cluster.faults.isolate_replication(2)
    # No replication connection to or from broker 2 survives.
    replicas = [c for c in cluster.connections(include_replicas=True)
                if "replica-fetcher" in c.roles]
    assert all(c.broker != 2 and c.replica_id != 2 for c in replicas)
    deliver(cluster, p, "isolated", b"during")  # acks=all completes once 2 is out of the ISR
    wait_for(lambda: isr(cluster, "isolated") == [0, 1], what="broker 2 dropped from the ISR")
    assert cluster.broker(2).partitions[("isolated", 0)].log_end_offset == 1
    cluster.faults.isolate_replication(2, isolated=False)
    wait_for(lambda: isr(cluster, "isolated") == [0, 1, 2], what="broker 2 back in the ISR")
    assert cluster.broker(2).partitions[("isolated", 0)].log_end_offset == 2


def test_killed_leader_fails_over_and_restarts(cluster: Cluster) -> None:
    cluster.create_topic("crash", 1, 3, assignments=[[1, 0, 2]])
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                     "client.id": "crash-producer", "retry.backoff.ms": 50})
    deliver(cluster, p, "crash", b"before")
    cluster.faults.kill_broker(1)
    assert not cluster.broker(1).running
    assert cluster.controller.topics["crash"].partitions[0].leader in (0, 2)
    deliver(cluster, p, "crash", b"after-kill")
    cluster.faults.restart_broker(1)
    assert cluster.broker(1).running
    wait_for(lambda: 1 in isr(cluster, "crash"), what="the restarted broker in the ISR")
    cluster.faults.stop_broker(0)
    deliver(cluster, p, "crash", b"after-stop")
    cluster.faults.restart_broker(0)
    leaders = {c.broker for c in cluster.connections(client_id="crash-producer")
               if "crash-0" in c.partitions}
    assert leaders == {cluster.controller.topics["crash"].partitions[0].leader}
