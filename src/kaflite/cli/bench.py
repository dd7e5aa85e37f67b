"""``kaflite bench``: a quick produce and consume benchmark against any cluster.

It creates a fresh topic, produces RECORDS values, reads them back and deletes the
topic; it prints the rates (``--json``: one JSON summary). ``-X name=value`` goes to
its admin, producer and consumer alike (each takes the properties of its kind). When
stderr is a terminal, a progress bar follows each phase.
"""

from __future__ import annotations

import sys
import time
import uuid
from typing import Annotated

import typer

from kaflite._loop import run
from kaflite.cli._options import (
    FIND,
    Bootstrap,
    ClientProps,
    CommandConfig,
    client_config,
    props_for,
)
from kaflite.cli._output import JsonOption, emit_json
from kaflite.cli._progress import Bar, bar

CLIENT_ID = "kaflite-bench"


def bench(
    bootstrap: Bootstrap = FIND,
    records: Annotated[int, typer.Option("--records", "-n")] = 200_000,
    size: Annotated[int, typer.Option("--size", "-s", help="value size in bytes")] = 100,
    partitions: Annotated[int, typer.Option("--partitions", "-p")] = 6,
    acks: Annotated[str, typer.Option(help="0, 1 or all")] = "1",
    as_json: JsonOption = False,
    props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Produce RECORDS values of SIZE bytes to a fresh topic, read them back, print rates."""
    with bar("producing", records, sys.stderr) as progress:
        produce_s, consume_s, seen = run(_bench(bootstrap, records, size, partitions, acks,
                                                props, progress))
    mb = records * size / 1e6
    if as_json:
        emit_json({"records": records, "size": size, "partitions": partitions, "acks": acks,
                   "consumed": seen,
                   "produce": {"seconds": round(produce_s, 3),
                               "records_per_s": round(records / produce_s),
                               "mb_per_s": round(mb / produce_s, 2)},
                   "consume": {"seconds": round(consume_s, 3),
                               "records_per_s": round(seen / consume_s),
                               "mb_per_s": round(seen * size / 1e6 / consume_s, 2)}})
        return
    typer.echo(f"produce: {records / produce_s:,.0f} msg/s  {mb / produce_s:,.1f} MB/s")
    typer.echo(f"consume: {seen / consume_s:,.0f} msg/s  {seen * size / 1e6 / consume_s:,.1f} "
               "MB/s")


async def _bench(bootstrap: str, records: int, size: int, partitions: int, acks: str,
                 props: list[str] | None, progress: Bar) -> tuple[float, float, int]:
    from kaflite.client import Admin, Consumer, NewTopic, Producer, TopicPartition

    topic = f"kaflite-bench-{uuid.uuid4().hex[:8]}"
    admin_config = client_config(bootstrap, CLIENT_ID, props_for("admin", props))
    async with Admin(admin_config) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    value = b"x" * size
    chunk = 10_000
    try:
        async with Producer(client_config(bootstrap, CLIENT_ID, props_for("producer", props), acks=acks,
                                          **{"linger.ms": 5})) as producer:
            start = time.perf_counter()
            for done in range(0, records, chunk):
                n = min(chunk, records - done)
                await producer.send_batch(topic, [value] * n)
                progress.advance(n)
            await producer.flush()
            produce_s = time.perf_counter() - start
        progress.describe("consuming", records)
        async with Consumer(client_config(bootstrap, CLIENT_ID, props_for("consumer", props),
                                          **{"auto.offset.reset": "earliest"})) as consumer:
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
            seen = 0
            start = time.perf_counter()
            deadline = time.monotonic() + 300
            while seen < records and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500, max_records=100_000)
                got = sum(len(v) for v in batch.values())
                seen += got
                progress.advance(got)
            consume_s = time.perf_counter() - start
    finally:
        async with Admin(admin_config) as admin:
            await admin.delete_topics([topic])
    return produce_s, consume_s, seen
