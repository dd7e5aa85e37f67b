"""Twelve brokers, twelve leaders: the client's connections and the cluster's registry agree.

A 12-partition topic whose partition i is led by broker i, read by a kaflite
consumer in a group: the client keeps exactly 13 connections (one to each
leader, plus the separate coordinator connection, as Java keeps it), each
with the role it has, and the registry of the cluster, seen from the other
end of the same sockets, reports the same 13 connections with the same roles.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.cluster import Cluster

BROKERS = 12


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    config = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 12,
              "offsets.topic.replication.factor": 1, "replica.lag.time.max.ms": 10000}
    with Cluster(brokers=BROKERS, config=config) as c:
        yield c


def test_thirteen_connections_twelve_leaders_one_coordinator(cluster: Cluster) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    cid = f"twelve-{uuid.uuid4().hex[:6]}"
    cluster.create_topic(topic, partitions=BROKERS, replication_factor=1,
                         assignments=[[i] for i in range(BROKERS)])

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            for i in range(BROKERS):
                await p.send_batch(topic, [f"{i}-{j}".encode() for j in range(5)], partition=i)
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers, client_id=cid,
                            group_id=group, auto_offset_reset="earliest",
                            heartbeat_interval_ms=500, session_timeout_ms=10000) as c:
            c.subscribe([topic])
            seen: set[TopicPartition] = set()
            deadline = time.monotonic() + 30
            while len(seen) < BROKERS:
                assert time.monotonic() < deadline, f"read only {sorted(seen)}"
                seen |= {TopicPartition(r.topic, r.partition) for r in await c.poll(200)}
            await c.commit()
            coordinator = c._group.coordinator if c._group else None
            assert coordinator is not None
            await c.poll(300)

            conns = c.connections()
            assert len(conns) == BROKERS + 1, [(i.broker, i.channel, i.roles) for i in conns]
            data = {i.broker: i for i in conns if i.channel == "data"}
            assert sorted(data) == list(range(BROKERS))
            for b, info in data.items():
                assert info.roles == [f"leader for {topic}-{b}"], info
            [coord] = [i for i in conns if i.channel == "coordinator"]
            assert coord.broker == coordinator
            assert coord.roles == [f"group coordinator ({group})"]

            # The cluster's view of the same sockets, matched by (broker, our end): Linux
            # may give connections to different brokers the same local port.
            registry = {(s.broker, s.peer): s for s in await asyncio.to_thread(
                cluster.connections, client_id=cid)}
            assert len(registry) == BROKERS + 1, sorted(registry)
            assert set(registry) == {(i.broker, i.local_address) for i in conns}
            for info in conns:
                snap = registry[(info.broker, info.local_address)]
                assert snap.broker == info.broker
                if info.channel == "data":
                    assert snap.roles == ["partition-leader"], snap.roles
                    assert snap.partitions == [f"{topic}-{info.broker}"], snap.partitions
                    assert "Fetch" in snap.apis and "JoinGroup" not in snap.apis
                else:
                    assert snap.roles == ["group-coordinator"], snap.roles
                    assert snap.groups == [group]
                    assert {"JoinGroup", "SyncGroup", "OffsetCommit"} <= set(snap.apis)
                    assert "Fetch" not in snap.apis
            fan_out = [cl for cl in await asyncio.to_thread(cluster.clients)
                       if cl.client_id == cid]
            assert len(fan_out) == 1 and fan_out[0].connections == BROKERS + 1
            assert fan_out[0].fan_out == {b: (2 if b == coordinator else 1)
                                          for b in range(BROKERS)}

    started = time.monotonic()
    asyncio.run(asyncio.wait_for(main(), 60))
    assert time.monotonic() - started < 60
