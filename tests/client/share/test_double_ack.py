"""Acknowledging one delivery twice, as Apache Kafka 4.4's ``KafkaShareConsumer`` does.

Java's consumer keeps a delivered record in flight until the next poll or commit
takes the acknowledgements (``ShareInFlightBatch.takeAcknowledgedRecords``). Until
then, acknowledging it again is no error: ``Acknowledgements.add`` is a
``Map.put``, so the later type replaces the earlier one and only it goes to the
leader, once. Afterwards the record is no longer in flight and ``acknowledge``
throws ``IllegalStateException`` ("The record cannot be acknowledged."), as it does
for a record of an earlier poll. kaflite's ``IllegalStateError`` stands for it,
in the async consumer and in the sync façade alike.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kaflite.client import AcknowledgeType, ShareConsumer, ShareRecord
from kaflite.client import sync as ksync
from kaflite.client.consumer import IllegalStateError, TopicPartition
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from tests.client.share.conftest import create_topic, fetching, join, names, produce

Reported = list[tuple[dict[TopicPartition, set[int]], errors.KafkaError | None]]


def config(servers: str, group: str) -> dict[str, object]:
    return {"bootstrap.servers": servers, "group.id": group,
            "share.acknowledgement.mode": "explicit"}


async def poll_for(c: ShareConsumer[bytes, bytes], n: int) -> list[ShareRecord[bytes, bytes]]:
    """Poll until ``n`` records came (10 s at the most)."""
    got: list[ShareRecord[bytes, bytes]] = []
    deadline = time.monotonic() + 10
    while len(got) < n and time.monotonic() < deadline:
        got += await c.poll(200)
    return got


def poll_sync(c: ksync.ShareConsumer[bytes, bytes]) -> list[ShareRecord[bytes, bytes]]:
    """The sync façade's first records (10 s at the most)."""
    got: list[ShareRecord[bytes, bytes]] = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        got = c.poll(200)
    return got


def test_the_later_acknowledgement_before_a_commit_wins(cluster: Cluster) -> None:
    asyncio.run(_later_wins(cluster.bootstrap_servers))


async def _later_wins(servers: str) -> None:
    topic, group = names()
    await create_topic(servers, topic, partitions=1)
    c: ShareConsumer[bytes, bytes] = ShareConsumer(config(servers, group))
    reported: Reported = []
    c.set_acknowledgement_commit_callback(lambda offsets, exc: reported.append(
        ({tp: set(o) for tp, o in offsets.items()}, exc)))
    try:
        await c.start()
        c.subscribe([topic])
        await join([c], partitions=1)
        await produce(servers, topic, 2, partitions=1)
        got = await poll_for(c, 2)
        assert [r.value for r in got] == [b"0", b"1"]
        for r in got:
            c.acknowledge(r)                            # ACCEPT ...
            c.acknowledge(r)                            # ... and ACCEPT again: no error
        c.acknowledge(got[0], AcknowledgeType.RELEASE)  # changed its mind: RELEASE
        results = await c.commit_sync()
        assert results == {TopicPartition(topic, 0): None}
        # one acknowledgement per record went, and was answered once
        assert reported == [({TopicPartition(topic, 0): {got[0].offset, got[1].offset}},
                             None)]
        # sent: the record is no longer waiting to be acknowledged
        for r in got:
            with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
                c.acknowledge(r, AcknowledgeType.ACCEPT)
        # the later type stood: the released record comes again, the accepted one not
        again = await poll_for(c, 1)
        assert [(r.offset, r.value, r.delivery_count) for r in again] == \
            [(got[0].offset, b"0", 2)]
        c.acknowledge(again[0])
        assert await c.poll(300) == []
        # the delivery of the last poll is done with: that of an earlier one as well
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge(again[0])
    finally:
        await c.close()


def test_the_sync_consumer_acknowledges_as_the_async_one(cluster: Cluster) -> None:
    servers = cluster.bootstrap_servers
    topic, group = names()
    asyncio.run(create_topic(servers, topic, partitions=1))
    c: ksync.ShareConsumer[bytes, bytes] = ksync.ShareConsumer(config(servers, group))
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + 15
        while not fetching(c._async) and time.monotonic() < deadline:
            assert not c.poll(100)
        asyncio.run(produce(servers, topic, 1, partitions=1))
        got = poll_sync(c)
        assert [r.value for r in got] == [b"0"]
        c.acknowledge(got[0], AcknowledgeType.ACCEPT)
        c.acknowledge(got[0], AcknowledgeType.RELEASE)  # replaces the ACCEPT
        c.commit_async()
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge(got[0], AcknowledgeType.ACCEPT)
        again = poll_sync(c)
        assert [(r.value, r.delivery_count) for r in again] == [(b"0", 2)]
        c.acknowledge(again[0])
        c.commit_sync()
        with pytest.raises(IllegalStateError, match="cannot be acknowledged"):
            c.acknowledge(again[0], AcknowledgeType.REJECT)
    finally:
        c.close()
