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
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig, client_config
from kaflite.cli._output import json_line
from kaflite.cli.requests import REQUEST_LOG_TOPIC

if TYPE_CHECKING:
    from kaflite.doctor import Report

__all__ = ["CLIENT_ID", "doctor", "not_enabled"]

CLIENT_ID = "kaflite-doctor"    # the doctor's own clients (kaflite.doctor.reader.DOCTOR_CLIENT_ID)


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
    from kaflite.doctor.reader import how_to_enable

    return (f"kaflite doctor: the request log topic {topic} does not exist on {bootstrap}.\n"
            f"{how_to_enable()} Then run the doctor again.\n")


def _print(report: Report, as_json: bool) -> None:
    from kaflite.doctor import render_text

    sys.stdout.write(json_line(report.to_dict()) if as_json else render_text(report))
    sys.stdout.flush()


async def _doctor(bootstrap: str, topic: str, minutes: float, follow: bool, interval: float,
                  reports: int | None, as_json: bool, props: list[str] | None) -> int:
    from kaflite.doctor import Analyzer
    from kaflite.doctor.reader import RequestLogOff, RequestLogReader

    reader = RequestLogReader(client_config(bootstrap, CLIENT_ID, props), topic)
    try:
        await reader.open(minutes)
    except RequestLogOff:
        sys.stderr.write(not_enabled(topic, bootstrap))
        return 1
    analyzer = Analyzer(ignore_clients={CLIENT_ID})
    try:
        if not follow:
            await reader.catch_up(analyzer)
            _print(analyzer.report(), as_json)
            return 0
        shown = 0
        while reports is None or shown < reports:
            await reader.read_for(analyzer, interval)
            _print(analyzer.report(), as_json)
            shown += 1
    finally:
        await reader.close()
    return 0
