"""What the interop tests share: unique names, a bounded ``run``, and reading a topic
to its end with kaflite's consumer."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

from kaflite.client import Admin, Consumer, ConsumerRecord, TopicPartition
from kaflite.protocol import errors
from kaflite.testing import ClusterUnderTest

T = TypeVar("T")


def replicas(target: ClusterUnderTest) -> int:
    """The replication factor for a test topic: every broker, up to three."""
    return min(3, len(target.node_ids))


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro: Coroutine[Any, Any, T], timeout: float = 90) -> T:
    """``asyncio.run`` with a bound: a client that hangs fails its test."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def create_topic(servers: str, topic: str, partitions: int, replication: int,
                       configs: dict[str, str] | None = None) -> None:
    """Create ``topic`` with kaflite's admin client and wait until every partition has
    a leader in the metadata: Apache Kafka answers CreateTopics once the controller has
    committed the topic, before every broker's metadata cache has it."""
    from kaflite.client import NewTopic

    async with Admin(bootstrap_servers=servers) as admin:
        await admin.create_topics([NewTopic(topic, partitions, replication,
                                            configs=configs or {})])
        deadline = time.monotonic() + 30
        while True:
            try:
                meta = (await admin.describe_topics([topic])).get(topic)
            except errors.UnknownTopicOrPartitionError:
                meta = None     # Kafka's brokers learn of the topic from the controller later
            if meta is not None and len(meta.partitions) == partitions \
                    and all(p.leader >= 0 for p in meta.partitions):
                return
            assert time.monotonic() < deadline, f"{topic} has no leaders: {meta}"
            await asyncio.sleep(0.1)


async def read_to_end(servers: str, topic: str, partitions: int,
                      isolation: str = "read_uncommitted", want: int | None = None,
                      timeout: float = 30) -> list[ConsumerRecord[bytes, bytes]]:
    """Every record of ``topic`` up to the end of each partition (the last stable offset
    under read_committed), with no group; at least ``want`` records when given."""
    async with Consumer(bootstrap_servers=servers, isolation_level=isolation,
                        auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        got: list[ConsumerRecord[bytes, bytes]] = []
        deadline = time.monotonic() + timeout
        while True:
            ends = await c.end_offsets(tps)
            for records in (await c.getmany(timeout_ms=200)).values():
                got += records
            positions = [await c.position(tp) for tp in tps]
            if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)) \
                    and (want is None or len(got) >= want):
                return got
            assert time.monotonic() < deadline, \
                f"{topic}: stuck at {positions}, ends {ends}, {len(got)} records"


async def upsert_scram_user(servers: str, user: str, password: str,
                            mechanism: str = "SCRAM-SHA-256", iterations: int = 4096
                            ) -> dict[str, list[tuple[str, int]]]:
    """Make (or replace) ``user``'s SCRAM credential through the admin client, and wait
    until the brokers describe it (Kafka's learn of it from the controller)."""
    async with Admin(bootstrap_servers=servers) as admin:
        await admin.alter_user_scram_credentials([(user, mechanism, password, iterations)])
        deadline = time.monotonic() + 20
        while True:
            try:
                users = await admin.describe_user_scram_credentials([user])
            except errors.ResourceNotFoundError:
                # a Kafka broker that has not replayed the credential's record yet says
                # so (seen on 3-node Kafka 4.4 right after the alter): not yet
                users = {}
            if users.get(user):
                return users
            assert time.monotonic() < deadline, f"{user}'s credential never appeared"
            await asyncio.sleep(0.1)
