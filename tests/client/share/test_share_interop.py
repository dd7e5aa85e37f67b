"""A share group mixing kaflite's ShareConsumer and confluent-kafka's (librdkafka).

Two members of each kind share a 2-partition topic on a kaflite cluster: both
kinds get records, every record is processed, and none comes back once the
locks would have expired (each member's acceptances reach the leaders). The group's
lock is longer than the module's (a group config): librdkafka acknowledges on its next
poll, and on two loaded cores that can come later than 1.5 s, a legitimate redelivery.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from kaflite.client import Admin, ShareConsumer
from kaflite.client.admin import ConfigResource
from kaflite.cluster import Cluster
from tests.client.share.conftest import (
    create_topic,
    join,
    names,
    produce,
    start_group,
)
from tests.client.share.test_share_consumer import RECORDS, consumer

pytestmark = pytest.mark.interop

GROUP_RESOURCE = 32     # ConfigResource type GROUP (KIP-848's group configs)
GROUP_LOCK_MS = 5000


class RdShareMember:
    """confluent-kafka's ShareConsumer, polled on its own thread (implicit acks)."""

    def __init__(self, servers: str, group: str, topic: str) -> None:
        self.conf = {"bootstrap.servers": servers, "group.id": group,
                     "client.id": f"rdkafka-share-{group}", "max.poll.records": 5}
        self.topic = topic
        self.values: list[bytes] = []
        self.polls = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="rdkafka-share", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        from confluent_kafka import ShareConsumer as RdShareConsumer

        try:
            member = RdShareConsumer(self.conf)
            member.subscribe([self.topic])
            try:
                while not self._stop.is_set():
                    batch = member.poll(0.1)
                    got = []
                    for msg in batch:
                        if msg.error():
                            raise RuntimeError(str(msg.error()))
                        got.append(msg.value())
                    with self._lock:
                        self.values.extend(got)
                        self.polls += 1
                    if got:
                        time.sleep(0.01)
            finally:
                member.close()
        except BaseException as exc:
            self.error = exc

    def seen(self) -> list[bytes]:
        with self._lock:
            return list(self.values)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def test_kaflite_and_librdkafka_share_a_group(cluster: Cluster) -> None:
    asyncio.run(_mixed(cluster.bootstrap_servers))


async def _mixed(servers: str) -> None:
    topic, group = names()
    await create_topic(servers, topic)
    async with Admin({"bootstrap.servers": servers}) as admin:
        await admin.alter_configs({ConfigResource(GROUP_RESOURCE, group): {
            "share.record.lock.duration.ms": str(GROUP_LOCK_MS)}})
    await start_group(servers, topic, group)
    ours = [consumer(servers, group) for _ in range(2)]
    theirs = [RdShareMember(servers, group, topic) for _ in range(2)]
    try:
        for c in ours:
            await c.start()
            c.subscribe([topic])
        for m in theirs:
            m.start()
        await join(ours, partitions=None)   # the librdkafka members may hold a partition
        # the librdkafka members have joined too once each polled a while
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(m.polls > 20 for m in theirs):
            assert not any(await asyncio.gather(*(c.poll(100) for c in ours)))
        values: set[bytes] = set()
        ours_seen: list[list[bytes]] = [[] for _ in ours]
        for start in range(0, RECORDS, RECORDS // 4):   # in rounds: everyone gets a turn
            values |= set(await produce(servers, topic, RECORDS // 4, start=start))
            until = time.monotonic() + 0.3
            while time.monotonic() < until:
                await _poll(ours, ours_seen)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and \
                not values <= {v for s in ours_seen for v in s} | {v for m in theirs
                                                                  for v in m.seen()}:
            await _poll(ours, ours_seen)
        theirs_seen = [m.seen() for m in theirs]
        assert {v for s in ours_seen + theirs_seen for v in s} == values
        assert any(ours_seen) and any(theirs_seen), \
            ([len(s) for s in ours_seen], [len(s) for s in theirs_seen])
        # accepted by both kinds: nothing is delivered again after the locks expire
        before = sum(len(s) for s in ours_seen) + sum(len(s) for s in theirs_seen)
        until = time.monotonic() + 1.2 * GROUP_LOCK_MS / 1000
        while time.monotonic() < until:
            await _poll(ours, ours_seen)
        after = sum(len(s) for s in ours_seen) + sum(len(m.seen()) for m in theirs)
        assert after == before, f"{after - before} records delivered again"
    finally:
        for m in theirs:
            m.stop()
        for c in ours:
            await c.close()
    assert all(m.error is None for m in theirs), [m.error for m in theirs]


async def _poll(ours: list[ShareConsumer], seen: list[list[bytes]]) -> None:
    for i, records in enumerate(await asyncio.gather(*(c.poll(100) for c in ours))):
        seen[i].extend(r.value for r in records if r.value is not None)
