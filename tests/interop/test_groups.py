"""Two kaflite consumers in one group, with the classic protocol (JoinGroup/SyncGroup,
kaflite's own assignor) and with KIP-848's (``group.protocol=consumer``, the broker
assigns), against each target.

The members split the topic's partitions with no partition ever owned by both (checked
at every step), each consumes only what it owns, and every record is consumed exactly
once: first by the two members, then, after one commits and leaves, by the other
alone, which takes over the leaver's partitions from its committed offsets.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from kaflite.client import Consumer, Producer
from kaflite.protocol import errors
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, replicas, run, uid
from tests.interop.conftest import matrix_fixture

pytestmark = pytest.mark.interop

# kaflite, Apache Kafka, Tansu and kfake (tests/interop/conftest.py)
target = matrix_fixture()

PARTITIONS = 6
PER_ROUND = 120
# Tansu 0.6 completes a classic JoinGroup only after about half the member's session
# timeout (23 s at the default 45 s, 5 s at 10 s): the brokers' minimum keeps its two
# rebalances short (a clean leave does not wait for a session to expire). KIP-848's
# protocol takes no client session timeout: the broker sets it.
SESSION_TIMEOUT_MS = 6000


class Member:
    """A consumer polled on its own task, recording what it consumed and whether it
    owned the partition when it did."""

    def __init__(self, consumer: Consumer, topic: str) -> None:
        self.consumer = consumer
        self.topic = topic
        self.records: list[tuple[int, int, bytes]] = []
        self.not_owned: list[tuple[int, int]] = []
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self.consumer.subscribe([self.topic])
        self.task = asyncio.get_running_loop().create_task(self._poll())

    async def _poll(self) -> None:
        while True:
            for r in await self.consumer.poll(timeout_ms=100):
                owned = self.owned()
                if r.partition not in owned:
                    self.not_owned.append((r.partition, r.offset))
                self.records.append((r.partition, r.offset, r.value or b""))

    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment() if tp.topic == self.topic}

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.consumer.close()


async def settle(members: list[Member], what: str, timeout: float = 60) -> None:
    """Until the members own every partition, each at least one; fails at once if a
    partition ever has two owners, or with the error that ended a member's polling."""
    deadline = time.monotonic() + timeout
    while True:
        for m in members:
            if m.task is not None and m.task.done():
                m.task.result()     # raises what stopped the member
        owned = [m.owned() for m in members]
        assert sum(map(len, owned)) == len(set().union(*owned)), \
            f"{what}: a partition has two owners: {owned}"
        if set().union(*owned) == set(range(PARTITIONS)) and all(owned):
            return
        assert time.monotonic() < deadline, f"{what}: not settled: {owned}"
        await asyncio.sleep(0.02)


async def consumed(members: list[Member], live: list[Member], count: int, what: str,
                   timeout: float = 60) -> None:
    """Until ``members`` consumed ``count`` records in all, the ``live`` ones settled
    (with no overlap) at every step meanwhile."""
    deadline = time.monotonic() + timeout
    while sum(len(m.records) for m in members) < count:
        await settle(live, what)
        assert time.monotonic() < deadline, \
            f"{what}: {sum(len(m.records) for m in members)} of {count} consumed"
        await asyncio.sleep(0.05)


async def produce(servers: str, topic: str, first: int, count: int) -> None:
    async with Producer(bootstrap_servers=servers, acks="all", linger_ms=5) as p:
        for i in range(first, first + count):
            p.produce(topic, f"r{i}".encode(), partition=i % PARTITIONS)
        await p.flush()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_two_members_share_partitions_and_consume_each_record_once(
        target: ClusterUnderTest, protocol: str) -> None:
    topic, group = uid(f"group-{protocol}"), uid(f"g-{protocol}")
    servers = target.bootstrap_servers

    async def main() -> tuple[list[Member], list[set[int]]]:
        await create_topic(servers, topic, PARTITIONS, replicas(target))
        members = [Member(Consumer(bootstrap_servers=servers, group_id=group,
                                   group_protocol=protocol, client_id=f"{protocol}-m{i}",
                                   **({"session_timeout_ms": SESSION_TIMEOUT_MS}
                                      if protocol == "classic" else {}),
                                   auto_offset_reset="earliest", enable_auto_commit=False),
                          topic) for i in range(2)]
        try:
            for m in members:
                await m.start()
            await settle(members, "two members joined")
            split = [m.owned() for m in members]
            await produce(servers, topic, 0, PER_ROUND)
            await consumed(members, members, PER_ROUND, "first round")
            for m in members:
                await m.consumer.commit()
            leaver, stayer = members[1], members[0]
            await leaver.close()
            await settle([stayer], "the leaver's partitions moved")
            await produce(servers, topic, PER_ROUND, PER_ROUND)
            await consumed(members, [stayer], 2 * PER_ROUND, "second round")
            return members, split
        finally:
            for m in members:
                await m.close()

    if protocol == "consumer" and target.name.startswith("tansu"):
        with pytest.raises(errors.UnsupportedVersionError, match="ConsumerGroupHeartbeat"):
            run(main(), timeout=150)
        pytest.skip(f"{target.name}: Tansu 0.6 serves no ConsumerGroupHeartbeat (KIP-848 "
                    "groups); kaflite's consumer fails with UNSUPPORTED_VERSION, as checked")
    members, split = run(main(), timeout=150)
    assert all(split) and not split[0] & split[1]
    for m in members:
        assert m.not_owned == [], f"{m.consumer.client_id} read partitions it did not own"
    # the first round went to both members, as their assignments split it
    for m, owned in zip(members, split, strict=True):
        first = {p for p, _, v in m.records if int(v[1:]) < PER_ROUND}
        assert first == owned
    everything = Counter((p, o) for m in members for p, o, _ in m.records)
    assert sorted(v for m in members for _, _, v in m.records) == \
        sorted(f"r{i}".encode() for i in range(2 * PER_ROUND))
    assert max(everything.values()) == 1
