"""``kaflite requests``: read the request log (``__kaflite_requests``), filtered.

The brokers write it with ``kaflite up --request-log`` (the broker config
``kaflite.request.log.enable``), a proxy with ``kaflite proxy --request-log``.
One line per served request::

    20:14:03.118 b0 PLAINTEXT #3 app-1 (kaflite 0.1.0) Produce v11 [partition-leader]
        orders-0 2.1 ms NOT_LEADER_OR_FOLLOWER

Filters: ``--client-id``, ``--api`` (a name such as Produce, or a key), ``--errors``
(failed requests only) or ``--error NAME``. It reads from the beginning up to the
end and stops; ``--follow`` keeps reading new records (until ``--count`` or Ctrl-C).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig, client_props
from kaflite.cli._output import json_line
from kaflite.cli._topics import topic_partitions

if TYPE_CHECKING:
    from kaflite.client import Consumer, TopicPartition
    from kaflite.cluster.request_log import RequestRecord

__all__ = ["format_line", "matcher", "requests"]

IDLE_EXIT_S = 0.5     # without --follow: at the end and idle this long, stop
# kaflite.cluster.request_log.REQUEST_LOG_TOPIC, not imported: importing kaflite.cluster
# loads the whole broker, which every other command does without
REQUEST_LOG_TOPIC = "__kaflite_requests"


def requests(
    bootstrap: Bootstrap = FIND,
    client_id: Annotated[str | None, typer.Option("--client-id", "-C",
                                                  help="only this client id")] = None,
    api: Annotated[str | None, typer.Option(
        "--api", help="only this API (a name such as Produce, or its key)")] = None,
    failed: Annotated[bool, typer.Option("--errors", help="only failed requests")] = False,
    error: Annotated[str | None, typer.Option(
        "--error", help="only requests with this error (e.g. NOT_LEADER_OR_FOLLOWER)")]
    = None,
    follow: Annotated[bool, typer.Option("--follow", "-f",
                                         help="keep reading new records")] = False,
    count: Annotated[int | None, typer.Option("--count", "-c", help="stop after this many")]
    = None,
    topic: Annotated[str, typer.Option("--topic", "-t", help="the request log's topic")]
    = REQUEST_LOG_TOPIC,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object a record")] = False,
    props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Tail the request log: one line per request the brokers (or a proxy) served."""
    keep = matcher(client_id, api, failed, error)
    render = (lambda r: json_line(r.to_dict())) if as_json else format_line
    run(_read(bootstrap, topic, keep, render, follow, count, client_props(props), props))


def matcher(client_id: str | None, api: str | None, failed: bool,
            error: str | None) -> Callable[[RequestRecord], bool]:
    """The filter the options describe."""
    api_key = int(api) if api is not None and api.isdigit() else None
    wanted = error.upper() if error is not None else None

    def keep(r: RequestRecord) -> bool:
        if client_id is not None and r.client_id != client_id:
            return False
        if api is not None and (r.api_key != api_key if api_key is not None
                                else r.api.lower() != api.lower()):
            return False
        if failed and not r.errors:
            return False
        return wanted is None or wanted in r.errors
    return keep


def format_line(r: RequestRecord) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(r.timestamp))
    millis = int(r.timestamp * 1000) % 1000
    where = f"b{r.broker}" if r.source == "broker" else f"proxy->{r.broker}"
    software = f" ({r.software_name} {r.software_version})" if r.software_name else ""
    parts = ",".join(r.partitions) or ",".join(r.topics)
    more = f"+{r.partition_count - len(r.partitions)}" \
        if r.partition_count > len(r.partitions) else ""
    errs = " ".join(r.errors) if r.errors else "-"
    throttle = f" throttled {r.throttle_ms} ms" if r.throttle_ms else ""
    return (f"{stamp}.{millis:03d} {where} {r.listener} #{r.connection_id} {r.client_id}"
            f"{software} {r.api} v{r.version} [{','.join(r.roles)}] {parts or '-'}{more} "
            f"{r.latency_ms:.1f} ms {errs}{throttle}\n")


async def _read(bootstrap: str, topic: str, keep: Callable[[RequestRecord], bool],
                render: Callable[[RequestRecord], str], follow: bool, count: int | None,
                extra: dict[str, str], props: list[str] | None) -> None:
    from kaflite.client import Consumer, TopicPartition
    from kaflite.cluster.request_log import RequestRecord

    partitions = await topic_partitions(bootstrap, topic, False, props)
    config = {"bootstrap.servers": bootstrap, "client.id": "kaflite-requests",
              "allow.auto.create.topics": False, "enable.auto.commit": False,
              "auto.offset.reset": "earliest", **extra}
    shown = 0
    async with Consumer(config) as consumer:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        idle_since = time.monotonic()
        while count is None or shown < count:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for rec in records:
                    if rec.value is None:
                        continue
                    try:
                        r = RequestRecord.decode(bytes(rec.value))
                    except (ValueError, TypeError):
                        continue
                    if keep(r) and (count is None or shown < count):
                        sys.stdout.write(render(r))
                        shown += 1
            sys.stdout.flush()
            if batch:
                idle_since = time.monotonic()
            elif not follow and time.monotonic() - idle_since > IDLE_EXIT_S \
                    and await _at_end(consumer, tps):
                break


async def _at_end(consumer: Consumer, tps: list[TopicPartition]) -> bool:
    ends = await consumer.end_offsets(tps)
    for tp in ends:
        if await consumer.position(tp) < ends[tp]:
            return False
    return True
