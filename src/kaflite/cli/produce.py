"""``kaflite produce``: lines from stdin (or ``--file``) to a topic, like ``kcat -P``;
or generated events (``--generate clickstream``, the pipeline's input).

It says on stderr how many records were acknowledged; ``--json`` prints that summary
on stdout as JSON instead. When stderr is a terminal, a progress bar counts the records
sent (and, with ``--file`` or ``--generate``, shows how far through them it is).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, TextIO

import typer

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig, client_props
from kaflite.cli._output import JsonOption, emit_json
from kaflite.cli._progress import bar
from kaflite.cli._topics import topic_partitions

Record = tuple[bytes | None, bytes]


class Generator(StrEnum):
    clickstream = "clickstream"


def produce(
    topic: Annotated[str, typer.Option("--topic", "-t", help="topic to write to")],
    bootstrap: Bootstrap = FIND,
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
    as_json: JsonOption = False,
    props: ClientProps = None,
    command_config: CommandConfig = None,
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
    run(topic_partitions(bootstrap, topic, create, props))
    if generate is not None:
        from kaflite.pipelines.events import encode
        from kaflite.pipelines.events import generate as events

        now = int(time.time() * 1000)
        records: Iterable[Record] = (encode(e) for e in events(count, now, int(span * 1000),
                                                                seed))
        acked = run(_produce(bootstrap, topic, records, partition, headers, compression,
                             acks, extra, count))
    else:
        source = file.open() if file is not None else sys.stdin
        total = _count_lines(file) if file is not None else None
        try:
            acked = run(_produce(bootstrap, topic, _lines(source, key_delimiter), partition,
                                 headers, compression, acks, extra, total))
        finally:
            if file is not None:
                source.close()
    if as_json:
        emit_json({"topic": topic, "acknowledged": acked})
    else:
        typer.echo(written(acked, topic, acks), err=True)


def written(n: int, topic: str, acks: str) -> str:
    """What ``kaflite produce`` says at the end (every record was, or it failed)."""
    records = "1 record" if n == 1 else f"{n} records"
    if acks == "0":
        return f"{records} sent to {topic} (acks=0: the brokers confirm none)"
    return f"{records} written to {topic}, " + ("acknowledged" if n == 1 else "all acknowledged")


def _count_lines(file: Path) -> int | None:
    """The file's line count, for the progress bar (None when it is not shown)."""
    from kaflite.cli._progress import shows_progress

    if not shows_progress(sys.stderr):
        return None
    with file.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _lines(source: TextIO, delimiter: str | None) -> Iterator[Record]:
    """(key, value) of each line; the key is None without a delimiter in the line."""
    for line in source:
        line = line.rstrip("\n")
        if delimiter is not None and delimiter in line:
            key, value = line.split(delimiter, 1)
            yield key.encode(), value.encode()
        else:
            yield None, line.encode()


async def _produce(bootstrap: str, topic: str, records: Iterable[Record],
                   partition: int | None, headers: list[tuple[str, bytes]], compression: str,
                   acks: str, extra: dict[str, str], total: int | None) -> int:
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
        with bar("producing", total, sys.stderr) as progress:
            for n, (key, value) in enumerate(records, 1):
                while True:
                    try:
                        producer.produce(topic, value, key=key, partition=partition,
                                         headers=headers or None, on_delivery=done)
                        break
                    except Exception:  # buffer full: let the sender catch up
                        await producer.flush(5)
                if n % 1000 == 0:
                    progress.update(n, total)
            await producer.flush()
    if errors:
        raise typer.Exit(_fail(f"{len(errors)} records failed, first: {errors[0]}"))
    return acked


def _fail(message: str) -> int:
    typer.echo(message, err=True)
    return 1
