"""``kaflite chaos``: break the running cluster on purpose, through its HTTP API.

    kaflite chaos error Produce NOT_LEADER_OR_FOLLOWER --topic t --partition 0
    kaflite chaos error Heartbeat NOT_COORDINATOR --group g --count 3
    kaflite chaos delay Fetch 2000
    kaflite chaos throttle 500 --client-id my-app
    kaflite chaos drop --client-id my-app          (close its connections now)
    kaflite chaos kill 1 / restart 1 / stop 1
    kaflite chaos move-leader t 0 --to 2
    kaflite chaos move-coordinator my-group
    kaflite chaos bump-epoch my-group / fence-member my-group MEMBER_ID  (KIP-848)
    kaflite chaos replace-cluster [--hang]      (kaflite up --front-port)
    kaflite chaos list / clear [ID]

Each command prints one line saying what it did (``rule 3: answer Heartbeat with
ILLEGAL_GENERATION, group=g, next 3 requests``); ``--json`` prints the API's answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from kaflite.cli._http import request
from kaflite.cli._options import FIND, HttpOption
from kaflite.cli._output import Column, JsonOption, emit, emit_json

app = typer.Typer(rich_markup_mode=None, help="Inject faults into a running cluster (kaflite up --http-port).",
                  no_args_is_help=True)

Count = Annotated[int | None, typer.Option("--count", "-n", help="next N requests")]
Forever = Annotated[bool, typer.Option("--forever", help="until removed (ignores --count)")]
Topic = Annotated[str | None, typer.Option("--topic", "-t")]
Partition = Annotated[int | None, typer.Option("--partition", "-p")]
Group = Annotated[str | None, typer.Option("--group", "-g")]
ClientId = Annotated[str | None, typer.Option("--client-id")]
BrokerOpt = Annotated[int | None, typer.Option("--broker", "-b", help="only on this broker")]


SCOPE = ("broker", "topic", "partition", "group", "client_id", "level")
RULE_COLUMNS = [Column("id", "ID"), Column("kind", "KIND"), Column("api", "API"),
                Column("what", "WHAT"), Column("scope", "SCOPE"), Column("left", "LEFT"),
                Column("hits", "HITS")]


def _scope(rule: dict[str, Any]) -> str:
    return " ".join(f"{k}={rule[k]}" for k in SCOPE if rule.get(k) is not None)


def rule_summary(rule: dict[str, Any]) -> str:
    """One line for a fault rule, as the HTTP API returns it (no nulls)."""
    api = rule.get("api") or "every API"
    kind = rule["kind"]
    if kind == "error":
        what = f"answer {api} with {rule['error']}"
    elif kind == "delay":
        what = f"delay {api} by {rule['delay_ms']} ms"
    elif kind == "throttle":
        what = f"throttle {api} by {rule['delay_ms']} ms"
    else:
        what = f"drop {api} requests"
    parts = [f"rule {rule['id']}: {what}"]
    scope = _scope(rule)
    if scope:
        parts.append(scope.replace(" ", ", "))
    left = rule.get("remaining")
    parts.append("until cleared" if left is None else
                 f"next {left} request{'s' if left != 1 else ''}")
    return ", ".join(parts)


def _show(result: Any, as_json: bool,
          summary: Callable[[dict[str, Any]], str] = rule_summary) -> None:
    if as_json:
        emit_json(result)
    else:
        typer.echo(summary(result))


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
          = None, http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Answer the next N requests of API with ERROR, where Kafka would put it."""
    _show(request(http, "POST", "/faults/error", {
        "api": api, "error": error, **_count(count, forever, 1), "topic": topic,
        "partition": partition, "group": group, "client_id": client_id, "broker": broker,
        "level": level}), as_json)


@app.command("delay")
def delay(api: str, ms: int, count: Count = None, topic: Topic = None, group: Group = None,
          client_id: ClientId = None, broker: BrokerOpt = None,
          http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Hold the responses of API for MS milliseconds (every request, or the next N)."""
    _show(request(http, "POST", "/faults/delay", {
        "api": api, "ms": ms, "count": count, "topic": topic, "group": group,
        "client_id": client_id, "broker": broker}), as_json)


@app.command("throttle")
def throttle(ms: int, api: Annotated[str | None, typer.Option("--api")] = None,
             count: Count = None, client_id: ClientId = None, broker: BrokerOpt = None,
             http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Throttle as a quota does: throttle_time_ms=MS, then mute the connection."""
    _show(request(http, "POST", "/faults/throttle", {
        "ms": ms, "api": api, "count": count, "client_id": client_id, "broker": broker}),
        as_json)


@app.command("drop")
def drop(api: Annotated[str | None, typer.Option("--api", help="drop the next requests of API")]
         = None, count: Count = None, client_id: ClientId = None, broker: BrokerOpt = None,
         http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Close connections now, or (with --api) instead of answering the next N requests."""
    _show(request(http, "POST", "/faults/drop", {
        "api": api, "count": count if api else None, "client_id": client_id,
        "broker": broker}), as_json,
        lambda r: f"closed {r['dropped']} connections" if "dropped" in r else rule_summary(r))


@app.command("deny-topic")
def deny_topic(topic: str, client_id: ClientId = None, http: HttpOption = FIND,
               as_json: JsonOption = False) -> None:
    """An ACL denial: TOPIC_AUTHORIZATION_FAILED for TOPIC until cleared."""
    _show(request(http, "POST", "/faults/deny-topic", {"topic": topic, "client_id": client_id}),
          as_json)


@app.command("list")
def list_rules(http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """The active fault rules."""
    rules = request(http, "GET", "/faults")
    if as_json:
        emit_json(rules)
        return
    if not rules:      # (a bare header said nothing)
        typer.echo("no fault rules are active (kaflite chaos --help lists the faults)")
        return
    rows = [{"id": r["id"], "kind": r["kind"], "api": r["api"] or "*",
             "what": r["error"] or (f"{r['delay_ms']} ms" if r["delay_ms"] else None),
             "scope": _scope(r) or None,
             "left": "until cleared" if r["remaining"] is None else r["remaining"],
             "hits": r["hits"]} for r in rules]
    emit(rows, RULE_COLUMNS, False)


@app.command("clear")
def clear(rule_id: Annotated[int | None, typer.Argument(help="one rule (default: all)")] = None,
          http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Remove one fault rule, or all of them."""
    _show(request(http, "POST", "/faults/clear", {"id": rule_id}), as_json,
          lambda r: f"removed {r['removed']} rule{'s' if r['removed'] != 1 else ''}")


def _broker_action(action: str) -> Any:
    def command(broker_id: int, http: HttpOption = FIND, as_json: JsonOption = False) -> None:
        _show(request(http, "POST", f"/brokers/{broker_id}/{action}", {}), as_json,
              lambda r: f"broker {r['broker']}: {r['action']} done, "
                        f"{'running' if r['running'] else 'not running'}")

    command.__doc__ = {"stop": "Stop a broker gracefully (leadership moves first).",
                       "kill": "Kill a broker as a crash would.",
                       "restart": "Restart a broker on its data directory."}[action]
    return command


for _action in ("stop", "kill", "restart"):
    app.command(_action)(_broker_action(_action))


@app.command("isolate")
def isolate(broker_id: int, heal: Annotated[bool, typer.Option("--heal", help="undo")] = False,
            http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Cut a broker off replication (followers stop fetching; ISRs shrink)."""
    _show(request(http, "POST", f"/brokers/{broker_id}/isolate", {"isolated": not heal}),
          as_json, lambda r: f"broker {r['broker']}: "
                             + ("cut off replication" if r["isolated"] else "replicating again"))


@app.command("move-leader")
def move_leader(topic: str, partition: int,
                to: Annotated[int | None, typer.Option("--to", help="an ISR member")] = None,
                http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Move a partition's leadership (to --to, or to any other ISR member)."""
    _show(request(http, "POST", "/leaders/move",
                  {"topic": topic, "partition": partition, "to": to}), as_json,
          lambda r: f"{r['topic']}-{r['partition']}: leader is now broker {r['leader']}")


@app.command("move-coordinator")
def move_coordinator(key: Annotated[str, typer.Argument(help="group id (or transactional id)")],
                     to: Annotated[int | None, typer.Option("--to")] = None,
                     transaction: Annotated[bool, typer.Option(
                         "--transaction", help="KEY is a transactional.id")] = False,
                     http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Move a coordinator by moving the leadership of its internal-topic partition."""
    _show(request(http, "POST", "/coordinators/move", {
        "key": key, "to": to, "type": "transaction" if transaction else "group"}), as_json,
        lambda r: f"coordinator of {r['key']} ({r['topic']}-{r['partition']}) is now broker "
                  f"{r['coordinator']}")


@app.command("forget-member")
def forget_member(group: str, member_id: str, http: HttpOption = FIND,
                  as_json: JsonOption = False) -> None:
    """Make the group's coordinator forget a member (it gets UNKNOWN_MEMBER_ID next)."""
    _show(request(http, "POST", f"/groups/{group}/forget", {"member_id": member_id}), as_json,
          lambda r: f"group {r['group']}: member {r['member_id']} forgotten")


@app.command("bump-epoch")
def bump_epoch(group: str, http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Bump a consumer group's epoch (KIP-848): its members' next commit with the old
    epoch gets STALE_MEMBER_EPOCH, their next heartbeat learns the new one."""
    _show(request(http, "POST", f"/groups/{group}/bump-epoch", {}), as_json,
          lambda r: f"group {r['group']}: epoch bumped, {r['members_moved']} member(s) moved")


@app.command("fence-member")
def fence_member(group: str, member_id: str, http: HttpOption = FIND,
                 as_json: JsonOption = False) -> None:
    """Put a consumer-group member's epoch ahead on the coordinator (KIP-848): its next
    heartbeat gets FENCED_MEMBER_EPOCH and it rejoins with epoch 0."""
    _show(request(http, "POST", f"/groups/{group}/fence-member", {"member_id": member_id}),
          as_json, lambda r: f"group {r['group']}: member {r['member_id']} fenced")


@app.command("delete-records")
def delete_records(topic: str, partition: int,
                   offset: Annotated[int, typer.Argument(help="-1: the high watermark")] = -1,
                   http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Move a partition's log start (consumers behind it get OFFSET_OUT_OF_RANGE)."""
    _show(request(http, "POST", "/records/delete",
                  {"topic": topic, "partition": partition, "offset": offset}), as_json,
          lambda r: f"{r['topic']}-{r['partition']}: log start offset is now "
                    f"{r['log_start_offset']}")


@app.command("replace-cluster")
def replace_cluster(
        hang: Annotated[bool, typer.Option(
            "--hang", help="the old brokers keep their ports but never answer (default: "
                           "they stop)")] = False,
        http: HttpOption = FIND, as_json: JsonOption = False) -> None:
    """Put a whole new cluster (new id, new ports, the same topics, empty) behind the
    bootstrap address of a `kaflite up --front-port`; the old brokers go."""
    result = request(http, "POST", "/cluster/replace", {"retire": "hang" if hang else "stop"})
    _await_console(http, str(result["new_cluster_id"]))
    _show(result, as_json,
          lambda r: f"cluster {r['old_cluster_id']} replaced by {r['new_cluster_id']} "
                    f"(brokers {r['new_bootstrap']}; topics created again: "
                    f"{', '.join(r['topics']) or 'none'}; the old brokers "
                    f"{'hang' if r['retire'] == 'hang' else 'are stopped'})")


def _await_console(http: str, cluster_id: str, attempts: int = 100) -> None:
    """The console restarts on the new cluster: wait (bounded) until it answers for it."""
    import json
    import time
    import urllib.request

    for _ in range(attempts):
        try:
            with urllib.request.urlopen(http.rstrip("/") + "/cluster", timeout=5) as resp:
                if json.loads(resp.read()).get("cluster_id") == cluster_id:
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    typer.echo(f"(the HTTP API does not answer for cluster {cluster_id} yet)", err=True)
