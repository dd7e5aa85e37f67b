"""``kaflite bench``: a quick produce and consume benchmark against any cluster."""

from __future__ import annotations

import time
import uuid
from typing import Annotated

import typer

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap


def bench(
    bootstrap: Bootstrap = FIND,
    records: Annotated[int, typer.Option("--records", "-n")] = 200_000,
    size: Annotated[int, typer.Option("--size", "-s", help="value size in bytes")] = 100,
    partitions: Annotated[int, typer.Option("--partitions", "-p")] = 6,
    acks: Annotated[str, typer.Option(help="0, 1 or all")] = "1",
) -> None:
    """Produce RECORDS values of SIZE bytes to a fresh topic, read them back, print rates."""
    produce_s, consume_s = run(_bench(bootstrap, records, size, partitions, acks))
    mb = records * size / 1e6
    typer.echo(f"produce: {records / produce_s:,.0f} msg/s  {mb / produce_s:,.1f} MB/s")
    typer.echo(f"consume: {records / consume_s:,.0f} msg/s  {mb / consume_s:,.1f} MB/s")


async def _bench(bootstrap: str, records: int, size: int, partitions: int,
                 acks: str) -> tuple[float, float]:
    from kaflite.client import Admin, Consumer, NewTopic, Producer, TopicPartition

    topic = f"kaflite-bench-{uuid.uuid4().hex[:8]}"
    async with Admin({"bootstrap.servers": bootstrap, "client.id": "kaflite-bench"}) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    value = b"x" * size
    chunk = 10_000
    async with Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "client.id": "kaflite-bench"}) as producer:
        start = time.perf_counter()
        for done in range(0, records, chunk):
            await producer.send_batch(topic, [value] * min(chunk, records - done))
        await producer.flush()
        produce_s = time.perf_counter() - start
    async with Consumer({"bootstrap.servers": bootstrap, "client.id": "kaflite-bench",
                         "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        seen = 0
        start = time.perf_counter()
        deadline = time.monotonic() + 300
        while seen < records and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500, max_records=100_000)
            seen += sum(len(v) for v in batch.values())
        consume_s = time.perf_counter() - start
    async with Admin({"bootstrap.servers": bootstrap, "client.id": "kaflite-bench"}) as admin:
        await admin.delete_topics([topic])
    return produce_s, consume_s
