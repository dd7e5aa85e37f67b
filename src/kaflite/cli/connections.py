"""``kaflite connections``: every client connection, the broker it goes to and why.

With ``--proxy URL`` it asks a ``kaflite proxy`` instead of a cluster: the same
rows, seen by the proxy for any upstream (the broker is the upstream node id).

The security column shows the listener's protocol, the SASL mechanism, the
principal and when the connection last (re-)authenticated (KIP-368). The quota
column shows each client quota that applies (its limit and the rate the client
uses, per second; ``request_percentage`` in percent), the last throttle time the
broker gave, how many throttles, and requests that arrived while the connection
was muted (a client ignoring its throttle). The telemetry column shows the client
instance id a KIP-714 client asked for or pushed as, how many metrics it pushed (and
how many times), and a couple of their latest values.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.table import Table

from kaflite.cli._http import request
from kaflite.cli._options import FIND, HttpOption
from kaflite.cli._output import JsonOption, emit_json, terminal_console


def _short(items: list[str], limit: int = 6) -> str:
    if len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f" (+{len(items) - limit})"


def security_text(c: dict[str, Any], now: float) -> str:
    """``SASL_SSL/SCRAM-SHA-512``, the principal, and the last (re-)authentication."""
    protocol = c.get("security_protocol") or "PLAINTEXT"
    if c.get("sasl_mechanism"):
        protocol += f"/{c['sasl_mechanism']}"
    lines = [protocol, c.get("principal") or "User:ANONYMOUS"]
    if c.get("authenticated_at"):
        reauths = c.get("reauthentications") or 0
        lines.append(f"auth {now - c['authenticated_at']:.0f}s ago"
                     + (f", {reauths} re-auth" if reauths else ""))
    return "\n".join(lines)


QUOTA_NAMES = {"producer_byte_rate": "produce", "consumer_byte_rate": "fetch",
               "request_percentage": "request", "controller_mutation_rate": "mutations"}


def _amount(key: str, value: float) -> str:
    if key == "request_percentage":
        return f"{value:.0f}%"
    if key == "controller_mutation_rate":
        return f"{value:g}/s"
    for unit, size in (("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}/s"
    return f"{value:.0f}B/s"


def quota_text(c: dict[str, Any]) -> str:
    """``produce 1.0MB/s of 1.0MB/s``, one line per quota, then the throttles."""
    lines = [f"{QUOTA_NAMES.get(k, k)} {_amount(k, q.get('rate') or 0)} of {_amount(k, q['limit'])}"
             for k, q in sorted((c.get("quotas") or {}).items())]
    if c.get("throttles"):
        lines.append(f"throttled {c['throttle_time_ms']}ms (x{c['throttles']})")
    if c.get("requests_while_muted"):
        lines.append(f"{c['requests_while_muted']} sent while muted")
    return "\n".join(lines) or "-"


def telemetry_text(c: dict[str, Any], shown: int = 2) -> str:
    """``instance <id>``, ``N metrics (xP)`` and the first ``shown`` values."""
    instance = c.get("client_instance_id")
    if not instance:
        return "-"
    metrics: dict[str, float] = c.get("telemetry") or {}
    lines = [f"instance {instance}"]
    if c.get("telemetry_pushes"):
        lines.append(f"{len(metrics)} metrics (x{c['telemetry_pushes']})")
        lines += [f"{name.removeprefix('org.apache.kafka.')}={value:g}"
                  for name, value in list(metrics.items())[:shown]]
    return "\n".join(lines)


def connections_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="client connections", show_lines=False)
    for name in ("client", "broker", "peer", "security", "role", "partitions / groups",
                 "requests", "errors", "quota", "telemetry", "idle"):
        table.add_column(name, overflow="fold")
    now = time.time()
    closed = sum(1 for c in rows if c.get("closed_at") is not None)
    if closed:
        table.caption = f"{closed} closed (marked closed in the idle column)"
    for c in rows:
        targets = c["partitions"] + [f"group:{g}" for g in c["groups"]] \
            + [f"txn:{t}" for t in c["transactional_ids"]]
        software = c.get("software_name") or ""
        client = c["client_id"] or "-"
        if software:
            client += f"\n[dim]{software} {c.get('software_version') or ''}[/dim]"
        errs: dict[str, int] = {}
        for api in c["apis"].values():
            for name, n in api["errors"].items():
                errs[name] = errs.get(name, 0) + n
        table.add_row(
            client, str(c["broker"]), c["peer"], security_text(c, now), ", ".join(c["roles"]),
            _short(targets),
            str(sum(a["count"] for a in c["apis"].values())),
            ", ".join(f"{k} x{v}" for k, v in errs.items()),
            quota_text(c),
            telemetry_text(c),
            _idle(c, now),
        )
    return table


def _idle(c: dict[str, Any], now: float) -> str:
    closed_at = c.get("closed_at")
    if closed_at is not None:
        return f"closed {now - closed_at:.0f}s ago"
    return f"{now - c['last_activity']:.0f}s"


def clients_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="clients (fan-out and cadences)")
    for name in ("client", "host", "connections", "fan-out (broker: n)", "roles",
                 "heartbeat", "commit", "fetch/s"):
        table.add_column(name, overflow="fold")

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v / 1000:.1f}s"

    for c in rows:
        table.add_row(
            c["client_id"] or "-", c["host"], str(c["connections"]),
            " ".join(f"{b}:{n}" for b, n in c["fan_out"].items()),
            ", ".join(f"{r} x{n}" for r, n in c["roles"].items()),
            ms(c["heartbeat_interval_ms"]), ms(c["commit_interval_ms"]),
            "-" if c["fetch_rate"] is None else f"{c['fetch_rate']:.1f}",
        )
    return table


def connections(
    http: HttpOption = FIND,
    client_id: Annotated[str | None, typer.Option("--client-id", help="only this client")] = None,
    replicas: Annotated[bool, typer.Option(help="include replica fetchers")] = False,
    closed: Annotated[bool, typer.Option(
        "--closed", help="also connections the clients have closed")] = False,
    clients: Annotated[bool, typer.Option("--clients", help="also per-client cadences")] = False,
    proxy: Annotated[str | None, typer.Option(
        "--proxy", metavar="URL",
        help="a `kaflite proxy`'s HTTP API: its client connections (broker -1: bootstrap)")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show every client connection: client, broker, role and partitions or groups."""
    if proxy:
        http = proxy
    query = []
    if client_id:
        query.append(f"client_id={client_id}")
    if replicas:
        query.append("replicas=1")
    if closed:
        query.append("closed=1")
    rows = request(http, "GET", "/connections" + ("?" + "&".join(query) if query else ""))
    summary = request(http, "GET", "/clients") if clients else None
    if as_json:
        emit_json({"connections": rows, "clients": summary} if clients else rows)
        return
    console = terminal_console()
    console.print(connections_table(rows))
    if summary is not None:
        console.print(clients_table(summary))
