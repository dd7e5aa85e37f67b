"""Replication over incremental fetch sessions: a follower's Fetch costs what changed.

At thousands of partitions per broker, a replica Fetch that named (and was answered
with) every partition held the event loop for hundreds of milliseconds at every
produce (issue 36). These tests count, on the leader, the partitions each replica
Fetch names and the partitions it reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.handlers import fetch as fetch_handler
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import ProduceRequest
from kaflite.protocol.messages import produce_request as pq
from kaflite.protocol.records import encode_batch

PARTITIONS = 100


@dataclass
class Counted:
    named: list[int] = field(default_factory=list)   # partitions each replica Fetch named
    reads: int = 0                                    # partitions read for replica Fetches


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counted]:
    seen = Counted()
    targets, read = fetch_handler._targets, fetch_handler._read_partition

    def counting_targets(broker, req, version):  # type: ignore[no-untyped-def]
        out = targets(broker, req, version)
        if req.replica_state.replica_id >= 0 or req.replica_id >= 0:
            seen.named.append(len(out))
        return out

    def counting_read(broker, conn, sp, replica_id, *args):  # type: ignore[no-untyped-def]
        if replica_id >= 0:
            seen.reads += 1
        return read(broker, conn, sp, replica_id, *args)

    monkeypatch.setattr(fetch_handler, "_targets", counting_targets)
    monkeypatch.setattr(fetch_handler, "_read_partition", counting_read)
    yield seen


async def produce(conn: BrokerConnection, topic: str, partition: int) -> None:
    req = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[pq.TopicProduceData(
        name=topic, partition_data=[pq.PartitionProduceData(partition, encode_batch([b"x"]))])])
    resp = await conn.request(req)
    assert resp.responses[0].partition_responses[0].error_code == 0


async def whole_isrs(cluster: Cluster, topic: str) -> bool:
    for _ in range(200):
        state = cluster.controller.topics[topic]
        if all(len(p.isr) == 2 for p in state.partitions):
            return True
        await asyncio.sleep(0.05)
    return False


def test_a_follower_fetch_names_and_reads_only_what_changed(counted: Counted) -> None:
    async def main() -> None:
        # a session reads everything once per 30 s (FULL_SCAN_S)
        async with Cluster(brokers=2, config={"replica.lag.time.max.ms": 60000}) as cluster:
            cluster.create_topic("wide", partitions=PARTITIONS, replication_factor=2)
            assert await whole_isrs(cluster, "wide")
            await asyncio.sleep(1.0)            # the sessions' first full fetches are done
            state = cluster.controller.topics["wide"].partitions
            leader0 = [p.partition for p in state if p.leader == 0]
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                counted.named.clear()
                counted.reads = 0
                for i in range(10):           # acks=all: each waits for the follower's fetch
                    await produce(conn, "wide", leader0[i % len(leader0)])
            finally:
                conn.close()
            fetches = len(counted.named)
            assert fetches >= 10
            # Each Fetch names the partition it got data for, not the ~50 it follows.
            assert max(counted.named) <= 2, counted.named
            # Reads: the changed partitions, and at most one whole session per follower.
            assert counted.reads < 2 * PARTITIONS + 4 * fetches, (counted.reads, fetches)
            assert all(len(p.isr) == 2 for p in state)

    asyncio.run(main())


def test_idle_partitions_keep_their_followers_in_the_isr() -> None:
    """An idle partition is not read at every fetch (a session reads all of them once
    per 30 s only); its follower must still count as caught up at each fetch of its
    session, or it would leave the ISR after replica.lag.time.max.ms."""
    async def main() -> None:
        async with Cluster(brokers=2, config={"replica.lag.time.max.ms": 1000}) as cluster:
            cluster.create_topic("idle", partitions=20, replication_factor=2)
            assert await whole_isrs(cluster, "idle")
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                state = cluster.controller.topics["idle"].partitions
                busy = next(p.partition for p in state if p.leader == 0)
                for _ in range(30):           # 3 s: three times the lag bound
                    await produce(conn, "idle", busy)
                    await asyncio.sleep(0.1)
            finally:
                conn.close()
            shrunk = {p.partition: p.isr for p in state if len(p.isr) != 2}
            assert not shrunk

    asyncio.run(main())
