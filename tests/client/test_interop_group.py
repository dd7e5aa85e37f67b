"""kaflite and confluent-kafka (librdkafka) consumers in one group.

Two kaflite members and one librdkafka member share a group with the range
assignor, then with cooperative-sticky (KIP-429). Whichever client the
coordinator makes the leader runs the assignor for everybody, so this is the
proof that kaflite's subscription and assignment bytes are what librdkafka
writes and reads. Once the group is stable the records are produced, and:

* no partition is owned by two members, and every partition has an owner;
* every record is consumed exactly once across the three members, each by the
  member that owns its partition.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.cluster import Cluster
from tests.client._rdkafka_group import RdMember

pytestmark = pytest.mark.interop

PARTITIONS = 6
RECORDS = 1200


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    config = {"replica.lag.time.max.ms": 10000, "group.initial.rebalance.delay.ms": 200,
              "offsets.topic.num.partitions": 6}
    with Cluster(brokers=3, config=config) as c:
        yield c


async def _group_of_three(cluster: Cluster, strategy: str, leader: str) -> None:
    topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    opts: dict[str, Any] = dict(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                                auto_offset_reset="earliest", heartbeat_interval_ms=200,
                                session_timeout_ms=6000, auto_commit_interval_ms=200,
                                partition_assignment_strategy=strategy)
    ours = [Consumer(**opts, client_id=f"kaflite-{i}") for i in range(2)]
    theirs = RdMember(cluster.bootstrap_servers, group, topic, strategy=strategy)
    got: dict[str, list[tuple[int, bytes]]] = {"kaflite-0": [], "kaflite-1": []}
    stop = asyncio.Event()

    async def pump(c: Consumer, name: str) -> None:
        while not stop.is_set():
            got[name] += [(r.partition, r.value) for r in await c.poll(timeout_ms=50)]

    def owners() -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in ours] + [theirs.snapshot()[0]]

    # The first member to join leads the group (and keeps leading while it rejoins).
    if leader == "librdkafka":
        theirs.start()
        deadline = time.monotonic() + 30
        while not theirs.snapshot()[0]:
            assert theirs.error is None, theirs.error
            assert time.monotonic() < deadline, "librdkafka never joined"
            await asyncio.sleep(0.05)
    for c in ours:
        await c.start()
        c.subscribe([topic])
    tasks = [asyncio.create_task(pump(c, f"kaflite-{i}")) for i, c in enumerate(ours)]
    if leader == "kaflite":
        while not ours[0].assignment():
            await asyncio.sleep(0.05)
        theirs.start()
    try:
        # Stable: everyone owns something, the owners partition the topic, and the
        # assignment has not changed for a second (cooperative takes two rounds).
        deadline = time.monotonic() + 40
        last, since = None, time.monotonic()
        while True:
            assert theirs.error is None, theirs.error
            for t in tasks:
                if t.done():
                    t.result()
            now = owners()
            settled = all(now) and sum(map(len, now)) == PARTITIONS and \
                set().union(*now) == set(range(PARTITIONS))
            if now != last:
                last, since = now, time.monotonic()
            elif settled and time.monotonic() - since > 1.0:
                break
            assert time.monotonic() < deadline, f"group did not settle: {now}"
            await asyncio.sleep(0.1)
        assert not any(got.values()) and not theirs.snapshot()[1]
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=2) as p:
            await p.send_batch(topic, [f"r{i:05d}".encode() for i in range(RECORDS)],
                               keys=[f"k{i}".encode() for i in range(RECORDS)])
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) + len(theirs.snapshot()[1]) < RECORDS:
            assert time.monotonic() < deadline, "records missing"
            await asyncio.sleep(0.1)
        # Every member has read what it owns to the log end, so nothing more can arrive
        # without a rebalance (checked next): a duplicate would have shown in the count.
        ends = {tp.partition: off for tp, off in (await ours[0].end_offsets(
            [TopicPartition(topic, p) for p in range(PARTITIONS)])).items()}
        assert sum(ends.values()) == RECORDS

        async def ours_at_end() -> bool:
            return all([await c.position(tp) == ends[tp.partition]
                        for c in ours for tp in c.assignment()])

        deadline = time.monotonic() + 30
        while not (await ours_at_end() and theirs.at(ends)):
            assert time.monotonic() < deadline, "members did not reach the log end"
            await asyncio.sleep(0.05)
        final = owners()
        assert final == last, "a rebalance happened mid-stream"
        got["librdkafka"] = theirs.snapshot()[1]
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        theirs.stop()
        for c in ours:
            await c.close()
    assert theirs.error is None, theirs.error
    everything = [v for records in got.values() for _, v in records]
    assert len(everything) == RECORDS
    assert sorted(everything) == [f"r{i:05d}".encode() for i in range(RECORDS)]
    for name, owned in zip(("kaflite-0", "kaflite-1", "librdkafka"), final, strict=True):
        assert got[name], f"{name} consumed nothing"
        assert {p for p, _ in got[name]} <= owned, name
    # Who ran the assignor: kaflite says so in its events when it leads.
    led = [events_of(c, "leader of generation") for c in ours]
    if leader == "kaflite":
        assert any(f"{strategy} assignment for 3 members" in e for es in led for e in es), led
    else:
        assert led == [[], []], led


def events_of(c: Consumer, text: str) -> list[str]:
    return [str(e) for e in c.events() if text in str(e)]


@pytest.mark.parametrize("leader", ["kaflite", "librdkafka"])
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_kaflite_and_librdkafka_share_a_group(cluster: Cluster, strategy: str,
                                              leader: str) -> None:
    pytest.importorskip("confluent_kafka")
    started = time.monotonic()
    asyncio.run(asyncio.wait_for(_group_of_three(cluster, strategy, leader), 120))
    assert time.monotonic() - started < 120, "the test ran out of time"
