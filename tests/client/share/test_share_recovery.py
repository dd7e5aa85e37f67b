"""Share consumers through cluster changes: a leader move, and the loss of the group
coordinator's broker (reconnection, coordinator lookup, rejoin)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from kaflite.client import ShareConsumer
from kaflite.cluster import Cluster
from tests.client.share.conftest import SHARE_CONFIG, create_topic, join, names, produce
from tests.client.share.test_share_consumer import RECORDS, consumer, drain


def leader_of(c: ShareConsumer, topic: str, partition: int) -> int:
    found = c.metadata.leader(topic, partition)
    assert found is not None
    return found.leader


def test_members_follow_a_leader_move(cluster: Cluster) -> None:
    asyncio.run(_leader_move(cluster))


@contextlib.asynccontextmanager
async def members(cluster: Cluster) -> AsyncIterator[tuple[str, list[ShareConsumer]]]:
    """Two share consumers joined to a new group on a new 2-partition topic."""
    servers = cluster.bootstrap_servers
    topic, group = names()
    await create_topic(servers, topic)
    consumers = [consumer(servers, group) for _ in range(2)]
    try:
        for c in consumers:
            await c.start()
            c.subscribe([topic])
        await join(consumers)
        yield topic, consumers
    finally:
        for c in consumers:
            await c.close(timeout=5)


async def _leader_move(cluster: Cluster) -> None:
    servers = cluster.bootstrap_servers
    async with members(cluster) as (topic, consumers):
        seen: list[list[bytes]] = [[] for _ in consumers]
        values = set(await produce(servers, topic, RECORDS // 2))
        await drain(consumers, values, seen)
        before = {p: leader_of(consumers[0], topic, p) for p in (0, 1)}
        for p in (0, 1):
            await asyncio.to_thread(cluster.move_leader, topic, p)
        values |= set(await produce(servers, topic, RECORDS // 2, start=RECORDS // 2))
        await drain(consumers, values, seen)
        assert {v for s in seen for v in s} == values
        # the members fetched the second half from the new leaders
        assert all(leader_of(c, topic, p) != before[p] for c in consumers for p in (0, 1))


def test_members_survive_losing_their_coordinator() -> None:
    """The group coordinator's broker dies: the members find the new coordinator,
    rejoin, reconnect to the new partition leaders and read on."""
    with Cluster(brokers=3, config=SHARE_CONFIG) as own:
        asyncio.run(_coordinator_lost(own))


async def _coordinator_lost(cluster: Cluster) -> None:
    servers = cluster.bootstrap_servers
    async with members(cluster) as (topic, consumers):
        seen: list[list[bytes]] = [[] for _ in consumers]
        values = set(await produce(servers, topic, RECORDS // 4))
        await drain(consumers, values, seen)
        victim = consumers[0]._member.coordinator
        assert victim is not None
        await asyncio.to_thread(cluster.call, cluster.kill_broker(victim))
        values |= set(await produce(servers, topic, RECORDS // 4, start=RECORDS // 4))
        await drain(consumers, values, seen, timeout=40)
        assert {v for s in seen for v in s} == values
        deadline = time.monotonic() + 20   # the heartbeats find the new coordinator
        while time.monotonic() < deadline and any(
                c._member.coordinator in (None, victim) for c in consumers):
            await drain(consumers, values, seen, timeout=0.5)
            await asyncio.sleep(0.1)
        for c in consumers:
            assert c._member.coordinator not in (None, victim)
            assert any("coordinator moved" in e.message for e in c.events("coordinator"))
