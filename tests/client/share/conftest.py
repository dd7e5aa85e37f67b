"""A 3-broker cluster with short share-group timers, and helpers to bring share
consumers into a group before anything is produced (the groups read from the
end of the log: ``share.auto.offset.reset`` is ``latest`` by default)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator, Sequence

import pytest

from kaflite.client import Admin, NewTopic, Producer, ShareConsumer
from kaflite.cluster import Cluster

LOCK_MS = 1500
COUNT_LIMIT = 3
SHARE_CONFIG = {
    "replica.lag.time.max.ms": 10000,
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.delivery.count.limit": str(COUNT_LIMIT),
    "group.share.min.delivery.count.limit": "2",
    "group.share.heartbeat.interval.ms": "200",
    "group.share.min.heartbeat.interval.ms": "100",
    "group.share.session.timeout.ms": "3000",
    "group.share.min.session.timeout.ms": "1000",
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=SHARE_CONFIG) as c:
        yield c


def names() -> tuple[str, str]:
    """A fresh (topic, group)."""
    suffix = uuid.uuid4().hex[:8]
    return f"share-{suffix}", f"workers-{suffix}"


async def create_topic(servers: str, topic: str, partitions: int = 2) -> None:
    async with Admin({"bootstrap.servers": servers}) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 3)])


async def produce(servers: str, topic: str, count: int, partitions: int = 2,
                  start: int = 0) -> list[bytes]:
    values = [str(i).encode() for i in range(start, start + count)]
    async with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as producer:
        for i, v in enumerate(values):
            producer.produce(topic, v, partition=i % partitions)
        await producer.flush()
    return values


def fetching(consumer: ShareConsumer) -> bool:
    """Assigned, with a share session open on the leader of every assigned partition
    (the share-partitions exist: what is produced from now on is the group's)."""
    fetcher = consumer._fetcher
    if not fetcher.assignment:
        return False
    sessions = [s for s in fetcher.sessions.values() if s.open]
    return all(any(tp in s.partitions for s in sessions) for tp in fetcher.assignment)


async def join(consumers: Sequence[ShareConsumer], partitions: int | None = 2,
               timeout: float = 15.0) -> None:
    """Poll until every consumer fetches and (unless ``partitions`` is None) the
    ``partitions`` partitions are all assigned to them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = await asyncio.gather(*(c.poll(100) for c in consumers))
        assert not any(got), "records before anything was produced"
        covered = {tp.partition for c in consumers for tp in c.assignment()}
        if all(fetching(c) for c in consumers) and partitions in (None, len(covered)):
            return
    raise AssertionError(f"consumers did not join: {[c.assignment() for c in consumers]}")


async def start_group(servers: str, topic: str, group: str, partitions: int = 2) -> None:
    """Make the group's share-partitions exist (one member fetches every partition
    once, then leaves): what is produced from now on is the group's."""
    c = ShareConsumer({"bootstrap.servers": servers, "group.id": group})
    try:
        await c.start()
        c.subscribe([topic])
        await join([c], partitions)
    finally:
        await c.close()
