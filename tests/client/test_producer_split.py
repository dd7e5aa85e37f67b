"""MESSAGE_TOO_LARGE for a batch of several records: the producer splits it, as Java's does."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.client.producer import RecordMetadata
from kaflite.cluster import Cluster
from kaflite.protocol import errors


@pytest.fixture(scope="module")
def one_broker() -> Iterator[Cluster]:
    with Cluster(brokers=1) as c:
        yield c


def small_topic(cluster: Cluster) -> str:
    topic = f"small-{uuid.uuid4().hex[:8]}"
    # Batches of more than 1,500 bytes are refused; records are about 110 bytes.
    cluster.create_topic(topic, partitions=1, replication_factor=1,
                         configs={"max.message.bytes": "1500"})
    return topic


async def read_all(cluster: Cluster, topic: str, n: int) -> list[tuple[int, bytes]]:
    async with Consumer(bootstrap_servers=cluster.bootstrap_servers,
                        auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, 0)])
        got: list[tuple[int, bytes]] = []
        for _ in range(100):
            got += [(r.offset, bytes(r.value)) for r in await c.poll(timeout_ms=300)]
            if len(got) >= n:
                break
        return got


@pytest.mark.parametrize("batch_size", [3_000, 100_000])   # several in flight, or one
@pytest.mark.parametrize("idempotent", [True, False])
def test_too_large_batches_are_split_until_they_fit(one_broker: Cluster, idempotent: bool,
                                                    batch_size: int) -> None:
    topic = small_topic(one_broker)
    n = 200
    reports: dict[bytes, Any] = {}

    async def main() -> None:
        async with Producer(bootstrap_servers=one_broker.bootstrap_servers, linger_ms=50,
                            batch_size=batch_size, enable_idempotence=idempotent,
                            acks=-1 if idempotent else 1) as p:
            values = [b"%04d" % i + b"x" * 96 for i in range(n)]
            for v in values[:n // 2]:
                p.produce(topic, v, partition=0,
                          on_delivery=lambda err, md, v=v: reports.__setitem__(v, (err, md)))
            awaited = await asyncio.gather(*(p.send(topic, v, partition=0)
                                             for v in values[n // 2:]))
            await p.flush()
            for v, md in zip(values[n // 2:], awaited, strict=True):
                reports[v] = (None, md)
            assert any("split a batch" in e.message for e in p.events("producer"))
        got = await read_all(one_broker, topic, n)
        if idempotent:
            assert [v for _, v in got] == values      # every record once, in order
        else:
            # Without idempotence, retries of several batches in flight may reorder
            # them (as in Java with max.in.flight.requests.per.connection > 1).
            assert sorted(v for _, v in got) == values
        for offset, v in got:
            err, md = reports[v]
            assert err is None and isinstance(md, RecordMetadata)
            assert (md.partition, md.offset) == (0, offset)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_a_single_record_too_large_fails(one_broker: Cluster) -> None:
    topic = small_topic(one_broker)

    async def main() -> None:
        async with Producer(bootstrap_servers=one_broker.bootstrap_servers,
                            batch_size=100_000) as p:
            with pytest.raises(errors.MessageTooLargeError):
                await p.send(topic, b"y" * 3000, partition=0)
            md = await p.send(topic, b"fits", partition=0)   # the partition goes on
            assert md.offset == 0

    asyncio.run(asyncio.wait_for(main(), 60))


def test_records_beside_a_too_large_one_are_delivered(one_broker: Cluster) -> None:
    topic = small_topic(one_broker)
    values = [b"a" * 100, b"b" * 100, b"c" * 3000, b"d" * 100, b"e" * 100]

    async def main() -> None:
        async with Producer(bootstrap_servers=one_broker.bootstrap_servers, linger_ms=50,
                            batch_size=100_000) as p:
            results = await asyncio.gather(*(p.send(topic, v, partition=0) for v in values),
                                           return_exceptions=True)
        assert isinstance(results[2], errors.MessageTooLargeError)
        delivered = [r for i, r in enumerate(results) if i != 2]
        assert all(isinstance(r, RecordMetadata) for r in delivered)
        got = await read_all(one_broker, topic, 4)
        assert [v for _, v in got] == [v for i, v in enumerate(values) if i != 2]
        assert [(0, o) for o, _ in got] == [(r.partition, r.offset) for r in delivered]

    asyncio.run(asyncio.wait_for(main(), 60))
