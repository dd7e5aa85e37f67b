"""Leader epoch changes that leave the leader on a broker the client already uses.

The consumer keeps a fetch session per broker (KIP-227). A session that did not resend a
partition after its leader epoch moved kept the old epoch on the broker, which answered
FENCED_LEADER_EPOCH to every Fetch, forever. These tests move the epoch while the leader
stays on the same broker, and move it away and back to a broker the consumer fetched from.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.cluster import Cluster
from kaflite.cluster.faults import Rule
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


def _topic(cluster: Cluster, replicas: int, **kw: Any) -> str:
    topic = topic_name()
    cluster.create_topic(topic, replication_factor=replicas, **kw)
    return topic


@contextlib.asynccontextmanager
async def _reading(cluster: Cluster, topic: str, n: int, **config: Any
                   ) -> AsyncIterator[tuple[Consumer, list[int]]]:
    """``n`` records produced to partition 0 and read by a consumer assigned to it."""
    await _produce(cluster, topic, range(n))
    async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                        auto_offset_reset="earliest", fetch_max_wait_ms=100, **config) as c:
        c.assign([TopicPartition(topic, 0)])
        seen: list[int] = []
        await _consume_until(c, seen, n)
        yield c, seen


@contextlib.contextmanager
def _injected(cluster: Cluster, api: str, error: str, count: int | None, topic: str
              ) -> Iterator[Rule]:
    rule = cluster.faults.inject_error(api, error, count=count, topic=topic)
    try:
        yield rule
    finally:
        cluster.faults.remove(rule.id)


def test_consumer_follows_epoch_bump_on_the_same_broker(cluster: Cluster) -> None:
    topic = _topic(cluster, 1)

    async def main() -> None:
        async with _reading(cluster, topic, 10) as (c, seen):
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
    topic = _topic(cluster, 3)

    async def main() -> None:
        async with _reading(cluster, topic, 10) as (c, seen):
            state = cluster.controller.topics[topic].partitions[0]
            first = state.leader
            other = next(r for r in state.replicas if r != first)
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
    topic = _topic(cluster, 3)

    async def main() -> None:
        with _injected(cluster, "Fetch", error, 8, topic) as rule:
            async with _reading(cluster, topic, 10, retry_backoff_ms=20,
                                retry_backoff_max_ms=100) as (c, seen):
                assert seen == list(range(10)), [str(e) for e in c.events()][-10:]
                assert rule.remaining == 0

    run(main())


def test_offset_lookup_retries_offset_not_available(cluster: Cluster) -> None:
    topic = _topic(cluster, 3)

    async def main() -> None:
        with _injected(cluster, "ListOffsets", "OFFSET_NOT_AVAILABLE", 3, topic) as rule:
            async with _reading(cluster, topic, 5) as (_, seen):
                assert seen == list(range(5))
                assert rule.remaining == 0

    run(main())


def test_a_partition_that_never_recovers_backs_off_and_shows_as_stuck(cluster: Cluster) -> None:
    topic = _topic(cluster, 3)

    async def main() -> None:
        with _injected(cluster, "Fetch", "FENCED_LEADER_EPOCH", None, topic):
            async with _reading(cluster, topic, 0, retry_backoff_ms=10,
                                retry_backoff_max_ms=80) as (c, _):
                stuck: list[str] = []
                for _ in range(200):
                    await c.poll(timeout_ms=50)
                    stuck = [str(e) for e in c.events() if "makes no progress" in str(e)]
                    if stuck:
                        break
                assert stuck and "FENCED_LEADER_EPOCH" in stuck[0], stuck

    run(main())


def test_consumer_goes_on_after_its_fetch_session_was_evicted(cluster: Cluster) -> None:
    topic = _topic(cluster, 1)

    async def main() -> None:
        async with _reading(cluster, topic, 10) as (c, seen):
            leader = cluster.controller.topics[topic].partitions[0].leader

            async def evict() -> None:
                cluster.broker(leader).fetch_sessions.sessions.clear()
            cluster.call(evict())
            await asyncio.to_thread(cluster.move_leader, topic, 0, leader)
            await _produce(cluster, topic, range(10, 20))
            await _consume_until(c, seen, 20)
            assert seen == list(range(20)), [str(e) for e in c.events()][-10:]

    run(main())


def test_a_partition_that_leaves_the_session_and_rejoins_carries_the_new_epoch(
        cluster: Cluster) -> None:
    # both partitions on one broker: one session holds both
    topic = _topic(cluster, 1, partitions=2, assignments=[[0], [0]])

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
