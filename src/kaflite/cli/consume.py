"""``kaflite consume``: records from a topic to stdout, like ``kcat -C``.

``--format`` renders each record kcat's way; ``--json`` prints one JSON object a line
(topic, partition, offset, timestamp, key, value, headers as [name, value] pairs; bytes
that are not UTF-8 as backslash escapes). When stdout is redirected and stderr is a
terminal, a progress bar counts the records on stderr.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite._loop import run
from kaflite.cli._format import compile_format
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig, client_props
from kaflite.cli._output import json_line
from kaflite.cli._progress import bar
from kaflite.cli._topics import topic_partitions

if TYPE_CHECKING:
    from kaflite.client import Consumer, ConsumerRecord


def consume(
    topic: Annotated[str, typer.Option("--topic", "-t", help="topic to read")],
    bootstrap: Bootstrap = FIND,
    group: Annotated[str | None, typer.Option(
        "--group", "-G", help="join this consumer group (and commit) instead of assigning")]
    = None,
    offset: Annotated[str, typer.Option(
        "--offset", "-o", help="beginning, end, an offset, or -N (N before the end)")]
    = "beginning",
    fmt: Annotated[str, typer.Option("--format", "-f", help="kcat-style format")] = "%s\\n",
    count: Annotated[int | None, typer.Option("--count", "-c", help="stop after this many")]
    = None,
    exit_at_end: Annotated[bool, typer.Option(
        "--exit", "-e", help="exit once every partition is read to its end")] = False,
    create: Annotated[bool, typer.Option(
        "--create", help="create the topic if it does not exist")] = False,
    as_json: Annotated[bool, typer.Option(
        "--json", help="one JSON object a record (instead of --format)")] = False,
    props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Print records with a kcat-style format (%t %p %o %k %s %T %h ...), or as JSON."""
    try:
        render = record_json if as_json else compile_format(fmt)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--format") from None
    extra = client_props(props)
    run(_consume(bootstrap, topic, group, offset, render, count, exit_at_end, create, extra,
                 props))


def _text(data: bytes | memoryview | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "backslashreplace")


def record_json(rec: ConsumerRecord) -> str:
    """One record as one line of JSON."""
    return json_line({"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                      "timestamp": rec.timestamp, "key": _text(rec.key),
                      "value": _text(rec.value),
                      "headers": [[k, _text(v)] for k, v in rec.headers or []]})


async def _consume(bootstrap: str, topic: str, group: str | None, offset: str,
                   render: Callable[[ConsumerRecord], str], count: int | None,
                   exit_at_end: bool, create: bool, extra: dict[str, str],
                   props: list[str] | None) -> None:
    from kaflite.client import Consumer, TopicPartition

    partitions = await topic_partitions(bootstrap, topic, create, props)
    config = {"bootstrap.servers": bootstrap, "client.id": "kaflite-consume",
              "allow.auto.create.topics": False,
              "enable.auto.commit": group is not None,
              "auto.offset.reset": "latest" if offset == "end" else "earliest", **extra}
    if group is not None:
        config["group.id"] = group
    seen = 0
    async with Consumer(config) as consumer:
        if group is not None:
            consumer.subscribe([topic])
        else:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            ends = await consumer.end_offsets(tps)
            if offset == "beginning":
                consumer.seek_to_beginning(*tps)
            elif offset == "end":
                consumer.seek_to_end(*tps)
            else:
                n = int(offset)
                starts = await consumer.beginning_offsets(tps)
                for tp in tps:
                    target = ends[tp] + n if n < 0 else n
                    consumer.seek(tp, max(starts[tp], min(target, ends[tp])))
        out = sys.stdout
        idle_since = time.monotonic()
        with bar("consuming", count, sys.stderr, quiet_on=sys.stdout) as progress:
            while count is None or seen < count:
                batch = await consumer.getmany(timeout_ms=500)
                before = seen
                for records in batch.values():
                    for rec in records:
                        out.write(render(rec))
                        seen += 1
                        if count is not None and seen >= count:
                            break
                out.flush()
                progress.advance(seen - before)
                if batch:
                    idle_since = time.monotonic()
                elif exit_at_end and await _at_end(consumer) \
                        and time.monotonic() - idle_since > 0.5:
                    break


async def _at_end(consumer: Consumer) -> bool:
    tps = list(consumer.assignment())
    if not tps:
        return False
    ends = await consumer.end_offsets(tps)
    for tp in tps:
        if await consumer.position(tp) < ends[tp]:
            return False
    return True
