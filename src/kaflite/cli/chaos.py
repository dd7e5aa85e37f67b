"""``kaflite chaos``: break the running cluster on purpose, through its HTTP API.

    kaflite chaos error Produce NOT_LEADER_OR_FOLLOWER --topic t --partition 0
    kaflite chaos error Heartbeat NOT_COORDINATOR --group g --count 3
    kaflite chaos delay Fetch 2000
    kaflite chaos throttle 500 --client-id my-app
    kaflite chaos drop --client-id my-app          (close its connections now)
    kaflite chaos kill 1 / restart 1 / stop 1
    kaflite chaos move-leader t 0 --to 2
    kaflite chaos move-coordinator my-group
    kaflite chaos list / clear [ID]
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kaflite.cli._http import request
from kaflite.cli._options import FIND, HttpOption

app = typer.Typer(rich_markup_mode=None, help="Inject faults into a running cluster (kaflite up --http-port).",
                  no_args_is_help=True)

Count = Annotated[int | None, typer.Option("--count", "-n", help="next N requests")]
Forever = Annotated[bool, typer.Option("--forever", help="until removed (ignores --count)")]
Topic = Annotated[str | None, typer.Option("--topic", "-t")]
Partition = Annotated[int | None, typer.Option("--partition", "-p")]
Group = Annotated[str | None, typer.Option("--group", "-g")]
ClientId = Annotated[str | None, typer.Option("--client-id")]
BrokerOpt = Annotated[int | None, typer.Option("--broker", "-b", help="only on this broker")]


def _show(result: Any) -> None:
    typer.echo(json.dumps(result, indent=1, default=str))


def _count(count: int | None, forever: bool, default: int | None) -> dict[str, Any]:
    if forever:
        return {"count": None}
    return {"count": count if count is not None else default}


@app.command("error")
def error(api: Annotated[str, typer.Argument(help="API name or key, e.g. Produce")],
          error: Annotated[str, typer.Argument(help="error name or code")],
          count: Count = None, forever: Forever = False, topic: Topic = None,
          partition: Partition = None, group: Group = None, client_id: ClientId = None,
          broker: BrokerOpt = None,
          level: Annotated[str | None, typer.Option(help="top, group, topic or partition")]
          = None, http: HttpOption = FIND) -> None:
    """Answer the next N requests of API with ERROR, where Kafka would put it."""
    _show(request(http, "POST", "/faults/error", {
        "api": api, "error": error, **_count(count, forever, 1), "topic": topic,
        "partition": partition, "group": group, "client_id": client_id, "broker": broker,
        "level": level}))


@app.command("delay")
def delay(api: str, ms: int, count: Count = None, topic: Topic = None, group: Group = None,
          client_id: ClientId = None, broker: BrokerOpt = None,
          http: HttpOption = FIND) -> None:
    """Hold the responses of API for MS milliseconds (every request, or the next N)."""
    _show(request(http, "POST", "/faults/delay", {
        "api": api, "ms": ms, "count": count, "topic": topic, "group": group,
        "client_id": client_id, "broker": broker}))


@app.command("throttle")
def throttle(ms: int, api: Annotated[str | None, typer.Option("--api")] = None,
             count: Count = None, client_id: ClientId = None, broker: BrokerOpt = None,
             http: HttpOption = FIND) -> None:
    """Throttle as a quota does: throttle_time_ms=MS, then mute the connection."""
    _show(request(http, "POST", "/faults/throttle", {
        "ms": ms, "api": api, "count": count, "client_id": client_id, "broker": broker}))


@app.command("drop")
def drop(api: Annotated[str | None, typer.Option("--api", help="drop the next requests of API")]
         = None, count: Count = None, client_id: ClientId = None, broker: BrokerOpt = None,
         http: HttpOption = FIND) -> None:
    """Close connections now, or (with --api) instead of answering the next N requests."""
    _show(request(http, "POST", "/faults/drop", {
        "api": api, "count": count if api else None, "client_id": client_id,
        "broker": broker}))


@app.command("deny-topic")
def deny_topic(topic: str, client_id: ClientId = None, http: HttpOption = FIND) -> None:
    """An ACL denial: TOPIC_AUTHORIZATION_FAILED for TOPIC until cleared."""
    _show(request(http, "POST", "/faults/deny-topic", {"topic": topic, "client_id": client_id}))


@app.command("list")
def list_rules(http: HttpOption = FIND) -> None:
    """The active fault rules."""
    rules = request(http, "GET", "/faults")
    table = Table(title="fault rules")
    for name in ("id", "kind", "api", "what", "scope", "left", "hits"):
        table.add_column(name)
    for r in rules:
        what = r["error"] or (f"{r['delay_ms']} ms" if r["delay_ms"] else "")
        scope = " ".join(f"{k}={r[k]}" for k in ("broker", "topic", "partition", "group",
                                                  "client_id", "level") if r[k] is not None)
        left = "∞" if r["remaining"] is None else str(r["remaining"])
        table.add_row(str(r["id"]), r["kind"], r["api"] or "*", str(what), scope, left,
                      str(r["hits"]))
    Console(width=140).print(table)


@app.command("clear")
def clear(rule_id: Annotated[int | None, typer.Argument(help="one rule (default: all)")] = None,
          http: HttpOption = FIND) -> None:
    """Remove one fault rule, or all of them."""
    _show(request(http, "POST", "/faults/clear", {"id": rule_id}))


def _broker_action(action: str) -> Any:
    def command(broker_id: int, http: HttpOption = FIND) -> None:
        _show(request(http, "POST", f"/brokers/{broker_id}/{action}", {}))

    command.__doc__ = {"stop": "Stop a broker gracefully (leadership moves first).",
                       "kill": "Kill a broker as a crash would.",
                       "restart": "Restart a broker on its data directory."}[action]
    return command


for _action in ("stop", "kill", "restart"):
    app.command(_action)(_broker_action(_action))


@app.command("isolate")
def isolate(broker_id: int, heal: Annotated[bool, typer.Option("--heal", help="undo")] = False,
            http: HttpOption = FIND) -> None:
    """Cut a broker off replication (followers stop fetching; ISRs shrink)."""
    _show(request(http, "POST", f"/brokers/{broker_id}/isolate", {"isolated": not heal}))


@app.command("move-leader")
def move_leader(topic: str, partition: int,
                to: Annotated[int | None, typer.Option("--to", help="an ISR member")] = None,
                http: HttpOption = FIND) -> None:
    """Move a partition's leadership (to --to, or to any other ISR member)."""
    _show(request(http, "POST", "/leaders/move",
                  {"topic": topic, "partition": partition, "to": to}))


@app.command("move-coordinator")
def move_coordinator(key: Annotated[str, typer.Argument(help="group id (or transactional id)")],
                     to: Annotated[int | None, typer.Option("--to")] = None,
                     transaction: Annotated[bool, typer.Option(
                         "--transaction", help="KEY is a transactional.id")] = False,
                     http: HttpOption = FIND) -> None:
    """Move a coordinator by moving the leadership of its internal-topic partition."""
    _show(request(http, "POST", "/coordinators/move", {
        "key": key, "to": to, "type": "transaction" if transaction else "group"}))


@app.command("forget-member")
def forget_member(group: str, member_id: str, http: HttpOption = FIND) -> None:
    """Make the group's coordinator forget a member (it gets UNKNOWN_MEMBER_ID next)."""
    _show(request(http, "POST", f"/groups/{group}/forget", {"member_id": member_id}))


@app.command("delete-records")
def delete_records(topic: str, partition: int,
                   offset: Annotated[int, typer.Argument(help="-1: the high watermark")] = -1,
                   http: HttpOption = FIND) -> None:
    """Move a partition's log start (consumers behind it get OFFSET_OUT_OF_RANGE)."""
    _show(request(http, "POST", "/records/delete",
                  {"topic": topic, "partition": partition, "offset": offset}))
