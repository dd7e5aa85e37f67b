"""``kaflite produce``: lines from stdin (or ``--file``) to a topic, like ``kcat -P``;
or generated events (``--generate clickstream``, the pipeline's input)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TextIO

import typer
from rich.progress import Progress

from kaflite._loop import run
from kaflite.cli._topics import topic_partitions

Bootstrap = Annotated[str, typer.Option("--bootstrap", "-b", envvar="KAFLITE_BOOTSTRAP",
                                        help="bootstrap.servers of any Kafka cluster")]
ClientProps = Annotated[list[str] | None, typer.Option(
    "-X", help="a client property as name=value (repeatable), as kcat's -X")]


class Generator(StrEnum):
    clickstream = "clickstream"


def client_props(items: list[str] | None) -> dict[str, str]:
    """``-X name=value`` options as a config dict (Kafka's property names)."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected name=value, got {item!r}", param_hint="-X")
        out[name.strip()] = value
    return out


def produce(
    topic: Annotated[str, typer.Option("--topic", "-t", help="topic to write to")],
    bootstrap: Bootstrap = "127.0.0.1:9092",
    key_delimiter: Annotated[str | None, typer.Option(
        "--key-delimiter", "-K", help="split each line into key and value at this string")] = None,
    partition: Annotated[int | None, typer.Option("--partition", "-p")] = None,
    header: Annotated[list[str] | None, typer.Option(
        "--header", "-H", help="a header as name=value (repeatable)")] = None,
    compression: Annotated[str, typer.Option("--compression", "-z",
                                             help="none, gzip, snappy, lz4 or zstd")] = "none",
    acks: Annotated[str, typer.Option(help="0, 1 or all")] = "all",
    file: Annotated[Path | None, typer.Option("--file", "-f", help="read lines from a file")]
    = None,
    create: Annotated[bool, typer.Option(
        "--create", help="create the topic if it does not exist")] = False,
    generate: Annotated[Generator | None, typer.Option(
        "--generate", help="write generated events instead of input lines: clickstream "
                           "(JSON click events keyed by user, the pipeline's input)")] = None,
    count: Annotated[int, typer.Option(
        "--count", "-n", min=0, help="how many events --generate writes")] = 1000,
    span: Annotated[float, typer.Option(
        help="seconds of event time the generated events cover, ending now")] = 600.0,
    seed: Annotated[int | None, typer.Option(
        help="seed of the generated events, to repeat them")] = None,
    props: ClientProps = None,
) -> None:
    """Write one record per input line (or generated event); print how many were
    acknowledged."""
    extra = client_props(props)
    headers = []
    for h in header or []:
        name, sep, value = h.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected name=value, got {h!r}", param_hint="--header")
        headers.append((name, value.encode()))
    if generate is not None and (file is not None or key_delimiter is not None):
        raise typer.BadParameter("--generate makes the records: no --file or -K with it",
                                 param_hint="--generate")
    run(topic_partitions(bootstrap, topic, create))
    if generate is not None:
        from kaflite.pipelines.events import encode
        from kaflite.pipelines.events import generate as events

        now = int(time.time() * 1000)
        records: Iterable[tuple[bytes | None, bytes]] = (
            encode(e) for e in events(count, now, int(span * 1000), seed))
        acked = run(_produce(bootstrap, topic, records, partition, headers, compression,
                             acks, extra))
    else:
        source = file.open() if file is not None else sys.stdin
        try:
            acked = run(_produce(bootstrap, topic, _lines(source, key_delimiter), partition,
                                 headers, compression, acks, extra))
        finally:
            if file is not None:
                source.close()
    typer.echo(f"{acked} records acknowledged by {topic}", err=True)


def _lines(source: TextIO, delimiter: str | None) -> Iterator[tuple[bytes | None, bytes]]:
    """(key, value) of each line; the key is None without a delimiter in the line."""
    for line in source:
        line = line.rstrip("\n")
        if delimiter is not None and delimiter in line:
            key, value = line.split(delimiter, 1)
            yield key.encode(), value.encode()
        else:
            yield None, line.encode()


async def _produce(bootstrap: str, topic: str, records: Iterable[tuple[bytes | None, bytes]],
                   partition: int | None, headers: list[tuple[str, bytes]], compression: str,
                   acks: str, extra: dict[str, str]) -> int:
    from kaflite.client import Producer

    errors: list[str] = []
    acked = 0

    def done(err: BaseException | None, md: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1
        else:
            errors.append(repr(err))

    async with Producer({"bootstrap.servers": bootstrap, "compression.type": compression,
                         "acks": acks, "client.id": "kaflite-produce", **extra}) as producer:
        show = sys.stderr.isatty()
        with Progress(disable=not show, transient=True) as progress:
            task = progress.add_task("producing", total=None)
            for n, (key, value) in enumerate(records, 1):
                while True:
                    try:
                        producer.produce(topic, value, key=key,
                                         partition=partition, headers=headers or None,
                                         on_delivery=done)
                        break
                    except Exception:  # buffer full: let the sender catch up
                        await producer.flush(5)
                if n % 1000 == 0:
                    progress.update(task, completed=n)
            await producer.flush()
    if errors:
        raise typer.Exit(_fail(f"{len(errors)} records failed, first: {errors[0]}"))
    return acked


def _fail(message: str) -> int:
    typer.echo(message, err=True)
    return 1
