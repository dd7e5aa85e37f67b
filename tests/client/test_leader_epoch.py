"""Leader epoch changes that leave the leader on a broker the client already uses.

The consumer keeps a fetch session per broker (KIP-227). A session that did not resend a
partition after its leader epoch moved kept the old epoch on the broker, which answered
FENCED_LEADER_EPOCH to every Fetch, forever. These tests move the epoch while the leader
stays on the same broker, and move it away and back to a broker the consumer fetched from.
"""

from __future__ import annotations

import asyncio

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.cluster import Cluster
from tests.client.test_cluster import run, topic_name


async def _produce(cluster: Cluster, topic: str, values: range) -> None:
    async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
        for i in values:
            p.produce(topic, str(i).encode(), partition=0)
        await p.flush()


async def _consume_until(c: Consumer, seen: list[int], n: int, polls: int = 60) -> None:
    for _ in range(polls):
        if len(seen) >= n:
            return
        seen += [int(r.value) for r in await c.poll(timeout_ms=250)]


def _fenced(c: Consumer) -> int:
    return sum("FENCED_LEADER_EPOCH" in str(e) for e in c.events())


def test_consumer_follows_epoch_bump_on_the_same_broker(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=1)

    async def main() -> None:
        await _produce(cluster, topic, range(10))
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([TopicPartition(topic, 0)])
            seen: list[int] = []
            await _consume_until(c, seen, 10)
            for round_ in range(3):   # the leader stays: only its epoch moves
                leader = cluster.controller.topics[topic].partitions[0].leader
                await asyncio.to_thread(cluster.move_leader, topic, 0, leader)
                await asyncio.sleep(0.3)   # idle fetches see the new epoch first
                await _produce(cluster, topic, range(10 * (round_ + 1), 10 * (round_ + 2)))
                await _consume_until(c, seen, 10 * (round_ + 2))
            assert seen == list(range(40)), (seen, [str(e) for e in c.events()][-10:])
            assert _fenced(c) <= 6, [str(e) for e in c.events()][-10:]

    run(main())


def test_consumer_follows_leader_back_to_a_broker_it_used(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        await _produce(cluster, topic, range(10))
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([TopicPartition(topic, 0)])
            seen: list[int] = []
            await _consume_until(c, seen, 10)
            first = cluster.controller.topics[topic].partitions[0].leader
            other = next(r for r in cluster.controller.topics[topic].partitions[0].replicas
                         if r != first)
            # away and back, with nothing new to read in between: the offset the session
            # holds for the partition on `first` is unchanged, only the epoch moved
            await asyncio.to_thread(cluster.move_leader, topic, 0, other)
            await asyncio.sleep(0.5)
            await asyncio.to_thread(cluster.move_leader, topic, 0, first)
            await asyncio.sleep(0.5)
            await _produce(cluster, topic, range(10, 20))
            await _consume_until(c, seen, 20)
            assert seen == list(range(20)), (seen, [str(e) for e in c.events()][-10:])
            assert _fenced(c) <= 6, [str(e) for e in c.events()][-10:]

    run(main())


EPOCH_ERRORS = ["FENCED_LEADER_EPOCH", "UNKNOWN_LEADER_EPOCH", "NOT_LEADER_OR_FOLLOWER",
                "LEADER_NOT_AVAILABLE", "OFFSET_NOT_AVAILABLE"]


@pytest.mark.parametrize("error", EPOCH_ERRORS)
def test_fetch_errors_end_in_progress(cluster: Cluster, error: str) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        await _produce(cluster, topic, range(10))
        rule = cluster.faults.inject_error("Fetch", error, count=8, topic=topic)
        try:
            async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                                auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                retry_backoff_ms=20, retry_backoff_max_ms=100) as c:
                c.assign([TopicPartition(topic, 0)])
                seen: list[int] = []
                await _consume_until(c, seen, 10)
                assert seen == list(range(10)), [str(e) for e in c.events()][-10:]
                assert rule.remaining == 0
        finally:
            cluster.faults.remove(rule.id)

    run(main())


def test_offset_lookup_retries_offset_not_available(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        await _produce(cluster, topic, range(5))
        rule = cluster.faults.inject_error("ListOffsets", "OFFSET_NOT_AVAILABLE", count=3,
                                           topic=topic)
        try:
            async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                                auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
                c.assign([TopicPartition(topic, 0)])
                seen: list[int] = []
                await _consume_until(c, seen, 5)
                assert seen == list(range(5))
                assert rule.remaining == 0
        finally:
            cluster.faults.remove(rule.id)

    run(main())


def test_a_partition_that_never_recovers_backs_off_and_shows_as_stuck(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=3)

    async def main() -> None:
        await _produce(cluster, topic, range(3))
        rule = cluster.faults.inject_error("Fetch", "FENCED_LEADER_EPOCH", count=None,
                                           topic=topic)
        try:
            async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                                auto_offset_reset="earliest", fetch_max_wait_ms=100,
                                retry_backoff_ms=10, retry_backoff_max_ms=80) as c:
                c.assign([TopicPartition(topic, 0)])
                stuck: list[str] = []
                for _ in range(200):
                    await c.poll(timeout_ms=50)
                    stuck = [str(e) for e in c.events() if "makes no progress" in str(e)]
                    if stuck:
                        break
                assert stuck and "FENCED_LEADER_EPOCH" in stuck[0], stuck
        finally:
            cluster.faults.remove(rule.id)

    run(main())


def test_consumer_goes_on_after_its_fetch_session_was_evicted(cluster: Cluster) -> None:
    topic = topic_name()
    cluster.create_topic(topic, partitions=1, replication_factor=1)

    async def main() -> None:
        await _produce(cluster, topic, range(10))
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            c.assign([TopicPartition(topic, 0)])
            seen: list[int] = []
            await _consume_until(c, seen, 10)
            leader = cluster.controller.topics[topic].partitions[0].leader

            async def evict() -> None:
                cluster.broker(leader).services["fetch_sessions"].sessions.clear()
            cluster.call(evict())
            await asyncio.to_thread(cluster.move_leader, topic, 0, leader)
            await _produce(cluster, topic, range(10, 20))
            await _consume_until(c, seen, 20)
            assert seen == list(range(20)), [str(e) for e in c.events()][-10:]

    run(main())


def test_a_partition_that_leaves_the_session_and_rejoins_carries_the_new_epoch(
        cluster: Cluster) -> None:
    topic = topic_name()
    # both partitions on one broker: one session holds both
    cluster.create_topic(topic, partitions=2, replication_factor=1, assignments=[[0], [0]])

    async def main() -> None:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
            for i in range(20):
                p.produce(topic, str(i).encode(), partition=i % 2)
            await p.flush()
        async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                            auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
            tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
            c.assign([tp0, tp1])
            seen: list[int] = []
            await _consume_until(c, seen, 20)
            c.pause(tp0)                  # tp0 leaves the session (forgotten)
            for _ in range(3):
                await c.poll(timeout_ms=150)
            await asyncio.to_thread(cluster.move_leader, topic, 0, 0)
            async with Producer(bootstrap_servers=cluster.bootstrap_servers) as p:
                for i in range(20, 30):
                    p.produce(topic, str(i).encode(), partition=0)
                await p.flush()
            c.resume(tp0)                 # and rejoins it, at the same offset
            await _consume_until(c, seen, 30)
            assert sorted(seen) == list(range(30)), [str(e) for e in c.events()][-10:]
            assert _fenced(c) <= 6

    run(main())
