"""``kaflite doctor``: diagnose a deployment from its request log.

Reads ``__kaflite_requests`` (the brokers write it with ``kaflite up --request-log``,
a proxy in front of any Kafka with ``kaflite proxy --request-log``) for the last
``--minutes``, feeds the records to ``kaflite.doctor.Analyzer`` in time order, and
prints each client's health and the findings (``--json``: the report as one JSON
object). ``--follow`` keeps reading and prints the report again every
``--interval`` seconds (``--reports`` of them, or until Ctrl-C). ``docs/doctor.md``
explains each finding and its threshold.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig, client_config
from kaflite.cli._output import json_line
from kaflite.cli.requests import REQUEST_LOG_TOPIC

if TYPE_CHECKING:
    from kaflite.client import Consumer, TopicPartition
    from kaflite.doctor import Analyzer, Report

__all__ = ["CLIENT_ID", "doctor", "not_enabled"]

CLIENT_ID = "kaflite-doctor"    # the doctor's own clients, left out of its report
IDLE_EXIT_S = 0.5               # without --follow: at the end and idle this long, stop


def doctor(
    bootstrap: Bootstrap = FIND,
    minutes: Annotated[float, typer.Option(
        "--minutes", "-m", min=0, help="read the requests of the last this many minutes "
        "(0: the whole log)")] = 10.0,
    follow: Annotated[bool, typer.Option(
        "--follow", "-f", help="keep reading, and print the report every --interval")]
    = False,
    interval: Annotated[float, typer.Option(
        "--interval", min=0.1, help="with --follow: seconds between reports")] = 10.0,
    reports: Annotated[int | None, typer.Option(
        "--reports", min=1, help="with --follow: stop after this many reports")] = None,
    topic: Annotated[str, typer.Option("--topic", "-t", help="the request log's topic")]
    = REQUEST_LOG_TOPIC,
    as_json: Annotated[bool, typer.Option("--json", help="the report as one JSON object")]
    = False,
    props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Diagnose clients from the request log: health per client and named findings."""
    code = run(_doctor(bootstrap, topic, minutes, follow, interval, reports, as_json,
                       props))
    if code:
        raise typer.Exit(code)


def not_enabled(topic: str, bootstrap: str) -> str:
    return (f"kaflite doctor: the request log topic {topic} does not exist on {bootstrap}.\n"
            "Turn it on: `kaflite up --request-log` (the broker config "
            "kaflite.request.log.enable=true), or put `kaflite proxy --request-log` in "
            "front of any Kafka; then run the clients, and the doctor again.\n")


def _print(report: Report, as_json: bool) -> None:
    from kaflite.doctor import render_text

    sys.stdout.write(json_line(report.to_dict()) if as_json else render_text(report))
    sys.stdout.flush()


async def _doctor(bootstrap: str, topic: str, minutes: float, follow: bool, interval: float,
                  reports: int | None, as_json: bool, props: list[str] | None) -> int:
    from kaflite.client import Admin, Consumer, TopicPartition
    from kaflite.doctor import Analyzer
    from kaflite.protocol import errors

    async with Admin(client_config(bootstrap, CLIENT_ID, props)) as admin:
        try:
            described = await admin.describe_topics([topic])
        except errors.UnknownTopicOrPartitionError:
            sys.stderr.write(not_enabled(topic, bootstrap))
            return 1
    tps = [TopicPartition(topic, p.partition) for p in described[topic].partitions]
    config = client_config(bootstrap, CLIENT_ID, props, **{
        "allow.auto.create.topics": False, "enable.auto.commit": False,
        "auto.offset.reset": "earliest"})
    analyzer = Analyzer(ignore_clients={CLIENT_ID})
    async with Consumer(config) as consumer:
        consumer.assign(tps)
        await _seek(consumer, tps, minutes)
        if not follow:
            await _read(consumer, tps, analyzer, until_end=True)
            _print(analyzer.report(), as_json)
            return 0
        shown = 0
        while reports is None or shown < reports:
            await _read(consumer, tps, analyzer, until_end=False, for_s=interval)
            _print(analyzer.report(), as_json)
            shown += 1
    return 0


async def _seek(consumer: Consumer[bytes, bytes], tps: list[TopicPartition],
                minutes: float) -> None:
    if minutes <= 0:
        consumer.seek_to_beginning(*tps)
        return
    since_ms = int((time.time() - minutes * 60) * 1000)
    found = await consumer.offsets_for_times({tp: since_ms for tp in tps})
    ends = await consumer.end_offsets(tps)
    for tp in tps:
        at = found.get(tp)
        consumer.seek(tp, at.offset if at is not None else ends.get(tp, 0))


async def _read(consumer: Consumer[bytes, bytes], tps: list[TopicPartition],
                analyzer: Analyzer, *, until_end: bool, for_s: float = 0.0) -> None:
    """Feed what there is: to the end of the log (``until_end``), or for ``for_s``."""
    from kaflite.cluster.request_log import RequestRecord

    started = idle_since = time.monotonic()
    while True:
        batch = await consumer.getmany(timeout_ms=200)
        records: list[RequestRecord] = []
        for got in batch.values():
            for rec in got:
                if rec.value is None:
                    continue
                try:
                    records.append(RequestRecord.decode(bytes(rec.value)))
                except (ValueError, TypeError):
                    continue
        records.sort(key=lambda r: r.timestamp)
        analyzer.feed(records)
        now = time.monotonic()
        if batch:
            idle_since = now
        if not until_end:
            if now - started >= for_s:
                return
        elif now - idle_since > IDLE_EXIT_S and await _at_end(consumer, tps):
            return


async def _at_end(consumer: Consumer[bytes, bytes], tps: list[TopicPartition]) -> bool:
    ends = await consumer.end_offsets(tps)
    for tp in tps:
        if await consumer.position(tp) < ends.get(tp, 0):
            return False
    return True
