"""UnregisterBroker (key 64), with the answers a 3-node Kafka 4.4 gave to the same steps
(probe of 2026-11-30): an unknown id is BROKER_ID_NOT_REGISTERED ("Broker ID 99 is not
currently registered"); a killed broker is removed from DescribeCluster (even with
fenced brokers included) while replica assignments keep it, offline; unregistering it
again is BROKER_ID_NOT_REGISTERED; a running broker is taken out at once (its
leaderships move, it leaves every ISR) and stays out; a broker that starts again
registers again. The metadata log keeps the removal."""

from __future__ import annotations

import asyncio

import pytest

from kaflite.client.admin import Admin
from kaflite.cluster import Cluster
from kaflite.cluster.controller import Controller
from kaflite.cluster.metadata_state import BrokerInfo, PartitionState
from kaflite.cluster.metalog import broker_record, replay
from kaflite.protocol import errors
from kaflite.protocol.messages._generated.unregister_broker_record import UnregisterBrokerRecord


def _registered(cluster: Cluster) -> list[int]:
    async def ask() -> list[int]:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            return sorted(b.node_id for b in (await admin.describe_cluster())["brokers"])
    return asyncio.run(asyncio.wait_for(ask(), 30))


def _partitions(cluster: Cluster) -> list[PartitionState]:
    return [s for i in range(3) if (s := cluster.controller.partition("t", i)) is not None]


def _unregister(cluster: Cluster, node: int) -> None:
    async def go() -> None:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            await admin.unregister_broker(node)
    asyncio.run(asyncio.wait_for(go(), 30))


@pytest.mark.parametrize("processes", [False, True], ids=["one-process", "processes"])
def test_unregister_a_dead_and_a_live_broker_as_kafka_does(processes: bool) -> None:
    with Cluster(brokers=3, processes=processes) as cluster:
        cluster.create_topic("t", 3, 3)
        with pytest.raises(errors.BrokerIdNotRegisteredError, match="Broker ID 99 is not"):
            _unregister(cluster, 99)
        cluster.call(cluster.kill_broker(2))
        _unregister(cluster, 2)
        assert _registered(cluster) == [0, 1]
        for p in _partitions(cluster):
            assert 2 in p.replicas and 2 not in p.isr and p.leader != 2
        with pytest.raises(errors.BrokerIdNotRegisteredError):
            _unregister(cluster, 2)
        # a running broker: out at once, and it stays out
        _unregister(cluster, 1)
        assert _registered(cluster) == [0]
        for p in _partitions(cluster):
            assert p.leader == 0 and p.isr == [0], (p.leader, p.isr)
        # and a broker that starts again registers again
        cluster.call(cluster.restart_broker(2))
        assert 2 in _registered(cluster)


def test_the_metadata_log_replays_the_removal() -> None:
    """A restarted controller, and every broker process, replay UnregisterBrokerRecord."""
    replica = Controller(None)
    replay(replica, broker_record(BrokerInfo(5, "127.0.0.1", 9095, None)))
    assert 5 in replica.brokers
    replay(replica, UnregisterBrokerRecord(5, replica.brokers[5].epoch))
    assert 5 not in replica.brokers
