"""``kaflite connections``: every client connection, the broker it goes to and why.

With ``--proxy URL`` it asks a ``kaflite proxy`` instead of a cluster: the same
rows, seen by the proxy for any upstream (the broker is the upstream node id).

The table fits the terminal, one line per connection: the name columns (client,
role, partitions...) are cut with an ellipsis, and on a narrow terminal the least
useful columns are hidden (the caption says which); piped, nothing is cut, and
``--json`` has every field. The security column shows the listener's protocol, the SASL mechanism, the
principal and when the connection last (re-)authenticated (KIP-368). The quota
column shows each client quota that applies (its limit and the rate the client
uses, per second; ``request_percentage`` in percent), the last throttle time the
broker gave, how many throttles, and requests that arrived while the connection
was muted (a client ignoring its throttle). The telemetry column shows the client
instance id a KIP-714 client asked for or pushed as, how many metrics it pushed (and
how many times), and a couple of their latest values.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich import box
from rich.cells import cell_len, set_cell_size
from rich.table import Table

from kaflite.cli._http import request
from kaflite.cli._options import FIND, HttpOption
from kaflite.cli._output import WIDE, JsonOption, emit_json, terminal_console


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


NAME_MIN = 12     # the narrowest a name column is cut to, before columns are hidden
MAIN_NAME = 24    # the main names (client, role...) are cut below this only as a last resort
LOW_VALUE = 3     # columns hidden (drop >= this) before the main names are cut below MAIN_NAME
GAP = 3           # what a column takes besides its text: padding and the divider


@dataclass(frozen=True)
class _Col:
    header: str
    text: Callable[[dict[str, Any], float], str]
    name: bool = False       # a name: cut with an ellipsis to fit, never folded
    drop: int = 0            # hidden to fit a narrow terminal: the highest first (0: never)
    optional: bool = False   # left out when no row has a value


def _one_line(text: str, sep: str = "; ") -> str:
    return sep.join(text.splitlines())


def _targets(c: dict[str, Any], _now: float) -> str:
    return _short(c["partitions"] + [f"group:{g}" for g in c["groups"]]
                  + [f"txn:{t}" for t in c["transactional_ids"]])


def _errors(c: dict[str, Any], _now: float) -> str:
    errs: dict[str, int] = {}
    for api in c["apis"].values():
        for name, n in api["errors"].items():
            errs[name] = errs.get(name, 0) + n
    return ", ".join(f"{k} x{v}" for k, v in errs.items())


CONNECTION_COLUMNS = (
    _Col("client", lambda c, _: c["client_id"] or "-", name=True),
    _Col("broker", lambda c, _: str(c["broker"])),
    _Col("role", lambda c, _: ", ".join(c["roles"]), name=True),
    _Col("partitions / groups", _targets, name=True),
    _Col("requests", lambda c, _: str(sum(a["count"] for a in c["apis"].values())), drop=3),
    _Col("errors", _errors, name=True, drop=2, optional=True),
    _Col("idle", lambda c, now: _idle(c, now)),
    _Col("peer", lambda c, _: c["peer"], drop=4),
    _Col("security", lambda c, now: _one_line(security_text(c, now), " "), name=True, drop=5),
    _Col("software", lambda c, _: f"{c.get('software_name') or ''} "
         f"{c.get('software_version') or ''}".strip(), name=True, drop=6, optional=True),
    _Col("quota", lambda c, _: "" if quota_text(c) == "-" else _one_line(quota_text(c)),
         name=True, drop=7, optional=True),
    _Col("telemetry", lambda c, _: "" if telemetry_text(c) == "-"
         else _one_line(telemetry_text(c)), name=True, drop=8, optional=True),
)


def _cut(text: str, width: int) -> str:
    return text if cell_len(text) <= width else set_cell_size(text, width - 1) + "…"


def _fitted(cols: Sequence[_Col], cells: list[list[str]], width: int
            ) -> tuple[list[int], list[int], list[str]]:
    """Which columns to show (indexes), their widths, and the headers hidden. Every row
    takes one line: the name columns share what the others leave, the widest cut first
    (with an ellipsis). Columns are hidden, the least useful first: the least useful
    ones (drop >= LOW_VALUE) while the main names would be cut below MAIN_NAME columns,
    the others only when no name could keep NAME_MIN columns."""
    shown = [i for i, col in enumerate(cols)
             if not (col.optional and not any(row[i] for row in cells))]
    natural = [max([cell_len(cols[i].header), *(cell_len(row[i]) for row in cells)])
               for i in range(len(cols))]

    def floor(i: int, main_name: int) -> int:
        if not cols[i].name:
            return natural[i]
        return min(natural[i], main_name if not cols[i].drop else NAME_MIN)

    hidden: list[str] = []
    for main_name, least in ((MAIN_NAME, LOW_VALUE), (NAME_MIN, 1)):
        while sum(floor(i, main_name) + GAP for i in shown) > width:
            droppable = [i for i in shown if cols[i].drop >= least]
            if not droppable:
                break
            victim = max(droppable, key=lambda i: cols[i].drop)
            shown.remove(victim)
            hidden.append(cols[victim].header)
    widths = {i: natural[i] for i in shown}
    names = [i for i in shown if cols[i].name]
    room = width - sum(natural[i] for i in shown if not cols[i].name) - GAP * len(shown)
    # a column at a time, until all fit: from the name furthest above its share (the main
    # names' is MAIN_NAME, the others' NAME_MIN), never below NAME_MIN
    for _ in range(sum(natural[i] for i in names)):
        cuttable = [i for i in names if widths[i] > NAME_MIN]
        if sum(widths[i] for i in names) <= room or not cuttable:
            break
        widest = max(cuttable, key=lambda i: widths[i] - (NAME_MIN if cols[i].drop else MAIN_NAME))
        widths[widest] -= 1
    return shown, [widths[i] for i in shown], hidden


# the registry's role names, shortened when the role column is too narrow for them
SHORT_ROLES = {"partition-leader": "leader", "group-coordinator": "coordinator",
               "txn-coordinator": "txn-coord", "share-coordinator": "share-coord",
               "share-partition-leader": "share-leader", "replica-fetcher": "replica",
               "txn-marker-sender": "txn-markers", "inter-broker": "broker"}


def _cut_short(cells: list[list[str]], shown: list[int], widths: list[int], col: int) -> bool:
    """When column ``col`` (roles) is too narrow for its names, shorten them; whether it was."""
    if col not in shown or widths[shown.index(col)] >= max(cell_len(r[col]) for r in cells):
        return False
    for row in cells:
        for name, short in SHORT_ROLES.items():
            row[col] = re.sub(rf"\b{name}\b", short, row[col])
    return True


def connections_table(rows: list[dict[str, Any]], width: int = WIDE) -> Table:
    """The connections, one line each, within ``width`` columns (see ``_fitted``)."""
    now = time.time()
    cells = [[col.text(c, now) for col in CONNECTION_COLUMNS] for c in rows]
    shown, widths, hidden = _fitted(CONNECTION_COLUMNS, cells, width)
    if _cut_short(cells, shown, widths, 2):     # (the role column)
        shown, widths, hidden = _fitted(CONNECTION_COLUMNS, cells, width)
    table = Table(title="client connections", box=box.SIMPLE_HEAD, show_edge=False)
    for i, w in zip(shown, widths, strict=True):
        table.add_column(CONNECTION_COLUMNS[i].header, no_wrap=True, width=w)
    for row in cells:
        table.add_row(*(_cut(row[i], w) for i, w in zip(shown, widths, strict=True)))
    notes = []
    closed = sum(1 for c in rows if c.get("closed_at") is not None)
    if closed:
        notes.append(f"{closed} closed (marked closed in the idle column)")
    if hidden:
        notes.append(f"hidden to fit {width} columns: {', '.join(hidden)} (--json has all)")
    if notes:
        table.caption = "; ".join(notes)
    return table


def _idle(c: dict[str, Any], now: float) -> str:
    closed_at = c.get("closed_at")
    if closed_at is not None:
        return f"closed {now - closed_at:.0f}s ago"
    return f"{now - c['last_activity']:.0f}s"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v / 1000:.1f}s"


CLIENT_COLUMNS = (
    _Col("client", lambda c, _: c["client_id"] or "-", name=True),
    _Col("host", lambda c, _: c["host"], drop=3),
    _Col("connections", lambda c, _: str(c["connections"])),
    _Col("fan-out (broker: n)", lambda c, _: " ".join(f"{b}:{n}" for b, n in
                                                       c["fan_out"].items()), name=True),
    _Col("roles", lambda c, _: ", ".join(f"{r} x{n}" for r, n in c["roles"].items()),
         name=True),
    _Col("heartbeat", lambda c, _: _ms(c["heartbeat_interval_ms"]), drop=2),
    _Col("commit", lambda c, _: _ms(c["commit_interval_ms"]), drop=2),
    _Col("fetch/s", lambda c, _: "-" if c["fetch_rate"] is None else f"{c['fetch_rate']:.1f}",
         drop=2),
)


def clients_table(rows: list[dict[str, Any]], width: int = WIDE) -> Table:
    cells = [[col.text(c, 0.0) for col in CLIENT_COLUMNS] for c in rows]
    shown, widths, hidden = _fitted(CLIENT_COLUMNS, cells, width)
    if _cut_short(cells, shown, widths, 4):     # (the roles column)
        shown, widths, hidden = _fitted(CLIENT_COLUMNS, cells, width)
    table = Table(title="clients (fan-out and cadences)", box=box.SIMPLE_HEAD, show_edge=False)
    for i, w in zip(shown, widths, strict=True):
        table.add_column(CLIENT_COLUMNS[i].header, no_wrap=True, width=w)
    for row in cells:
        table.add_row(*(_cut(row[i], w) for i, w in zip(shown, widths, strict=True)))
    if hidden:
        table.caption = f"hidden to fit {width} columns: {', '.join(hidden)} (--json has all)"
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
    console.print(connections_table(rows, console.width))
    if summary is not None:
        console.print(clients_table(summary, console.width))
