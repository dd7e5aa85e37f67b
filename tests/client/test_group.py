"""The classic group member: assignors (pure), and groups on a live broker.

Assignor tests need no broker. The live tests run against the kaflite cluster;
two members sharing a group also run against Tansu.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.client.consumer._assignors import (
    ASSIGNORS,
    MemberSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kaflite.cluster import Cluster


def members(n: int, topics: list[str], owned: dict[str, list[tuple[str, int]]] | None = None
            ) -> list[MemberSubscription]:
    owned = owned or {}
    return [MemberSubscription(f"m{i}", topics, owned.get(f"m{i}", []), 1) for i in range(n)]


def test_range_matches_java() -> None:
    plan = ASSIGNORS["range"]().assign({"a": 5, "b": 2}, members(2, ["a", "b"]))
    assert plan == {"m0": [("a", 0), ("a", 1), ("a", 2), ("b", 0)],
                    "m1": [("a", 3), ("a", 4), ("b", 1)]}


def test_roundrobin() -> None:
    plan = ASSIGNORS["roundrobin"]().assign({"a": 3, "b": 2}, members(2, ["a", "b"]))
    assert plan == {"m0": [("a", 0), ("a", 2), ("b", 1)], "m1": [("a", 1), ("b", 0)]}


@pytest.mark.parametrize("name", ["sticky", "cooperative-sticky"])
def test_sticky_balances_and_keeps_owned(name: str) -> None:
    owned = {"m0": [("a", p) for p in range(6)]}
    plan = ASSIGNORS[name]().assign({"a": 6}, members(3, ["a"], owned))
    every = sorted(tp for tps in plan.values() for tp in tps)
    if name == "sticky":
        assert every == [("a", p) for p in range(6)]
        assert all(len(tps) == 2 for tps in plan.values())
        assert set(plan["m0"]) <= set(owned["m0"])
    else:
        # KIP-429: moving partitions are withheld until revoked; m0 keeps 2 of its own.
        assert len(plan["m0"]) == 2 and plan["m1"] == [] and plan["m2"] == []


def test_consumer_protocol_round_trip() -> None:
    data = encode_subscription(["b", "a"], [("a", 1)], 4, "rack-1")
    sub = decode_subscription("m", data)
    assert sub.topics == ["a", "b"] and sub.owned == [("a", 1)] and sub.generation == 4
    assert sub.rack == "rack-1"
    assert decode_assignment(encode_assignment([("t", 2), ("t", 0)])) == [("t", 0), ("t", 2)]
    assert data[:2] == b"\x00\x03"


async def _two_members(servers: str, topic: str, n: int, strategy: str) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    async with Producer(bootstrap_servers=servers) as p:
        await p.send_batch(topic, [str(i).encode() for i in range(n)])
    opts = dict(bootstrap_servers=servers, group_id=group, auto_offset_reset="earliest",
                heartbeat_interval_ms=500, session_timeout_ms=10000,
                partition_assignment_strategy=strategy)
    c1, c2 = Consumer(**opts), Consumer(**opts)
    async with c1, c2:
        c1.subscribe([topic])
        c2.subscribe([topic])
        seen: list[bytes] = []
        for _ in range(120):
            a, b = await asyncio.gather(c1.poll(250), c2.poll(250))
            seen += [r.value for r in a + b]
            if len(seen) >= n and c1.assignment() and c2.assignment():
                break
        assert c1.assignment() and c2.assignment()
        assert not c1.assignment() & c2.assignment()
        assert len(c1.assignment() | c2.assignment()) == 4
        assert sorted(seen) == sorted(str(i).encode() for i in range(n))
        assert any("rebalance: generation" in str(e) for e in c1.events())


def test_group_rebalance_on_kaflite(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=4, replication_factor=3)
    asyncio.run(asyncio.wait_for(_two_members(cluster.bootstrap_servers, topic, 2000,
                                              "cooperative-sticky"), 90))


@pytest.mark.interop
@pytest.mark.peer
def test_group_rebalance_on_tansu(tansu: str) -> None:
    from kaflite.client import Admin, NewTopic
    topic = f"t-{uuid.uuid4().hex[:8]}"

    async def main() -> None:
        async with Admin(bootstrap_servers=tansu) as admin:
            await admin.create_topics([NewTopic(topic, 4, 1)])
        await _two_members(tansu, topic, 1000, "range")

    asyncio.run(asyncio.wait_for(main(), 90))


def test_commit_and_committed_on_kaflite(cluster: Cluster) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        group = f"g-{uuid.uuid4().hex[:8]}"
        tp = TopicPartition(topic, 0)
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            await p.send_batch(topic, [b"x"] * 10)
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                            auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.subscribe([topic])
            got = 0
            for _ in range(40):
                got += len(await c.poll(500))
                if got >= 10:
                    break
            await c.commit()
            assert await c.committed(tp) == 10
        # A new consumer of the group (assigned by hand) starts at the committed offset.
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group) as c:
            c.assign([tp])
            assert await c.committed(tp) == 10
            assert await c.position(tp) == 10

    asyncio.run(asyncio.wait_for(main(), 90))
