"""The demo's live view: rich panels on a terminal, plain periodic lines otherwise.

Everything shown is read, not assumed: the cluster panel from the controller,
the connections panel from the brokers' connection registry (with the
connection counts each client reports about itself beside it), cadences from
the registry's measured request gaps, and the event log from the clients.
Without a terminal the same snapshot is a few status lines of at most
``WIDTH`` columns (``status_lines``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, TypedDict

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kaflite.demo.story import WIDTH, fit, pack
from kaflite.demo.summary import client_name

if TYPE_CHECKING:
    from kaflite.cluster import Cluster
    from kaflite.cluster.observe import ClientSnapshot
    from kaflite.demo.tour import Tour
    from kaflite.demo.workload import Progress, Workload

__all__ = ["Snapshot", "render", "status_lines", "take_snapshot"]

class Snapshot(TypedDict):
    """What the view shows, taken at one moment."""

    time: float
    brokers: list[tuple[int, bool]]                     # (broker id, alive)
    partitions: list[tuple[int, int, list[int]]]        # (partition, leader, ISR)
    clients: dict[str, ClientSnapshot]                  # by client id, as the brokers see them
    reported: dict[str, int]                            # connections each own client counts
    lag: dict[int, int]
    acked: int
    consumed: int       # acknowledged records a consumer has read
    ahead: int          # records read before their acknowledgment reached the producer
    events: list[str]
    tour: Tour | None
    spark: str


def take_snapshot(cluster: Cluster, workload: Workload, progress: Progress, tour: Tour | None,
                  topic: str, spark: str) -> Snapshot:
    """The view's snapshot; ``progress`` is the workload's counts, taken on its loop
    (``Workload.progress``) so that acknowledged and consumed are of one moment."""
    controller = cluster.controller
    brokers = [(b.node_id, b.alive) for b in sorted(controller.brokers.values(),
                                                    key=lambda b: b.node_id)]
    t = controller.topics.get(topic)
    partitions = [(p.partition, p.leader, list(p.isr)) for p in t.partitions] if t else []
    clients = {c.client_id: c for c in cluster.clients() if c.client_id}
    own = {"producer": workload.producer, **{c.name: c.client for c in workload.consumers}}
    events = []
    for name, client in own.items():
        events += [(ev.timestamp, name, str(ev)) for ev in client.events()[-12:]]
    events.sort()
    return {
        "time": time.time(),
        "brokers": brokers,
        "partitions": partitions,
        "clients": clients,
        "reported": {name: len(client.connections()) for name, client in own.items()},
        "lag": workload.lag(),
        "acked": progress.acked,
        "consumed": progress.consumed,
        "ahead": progress.ahead,
        "events": [e[2] for e in events[-10:]],
        "tour": tour,
        "spark": spark,
    }


def _cluster_panel(s: Snapshot) -> Panel:
    table = Table(expand=True, box=None)
    table.add_column("partition")
    table.add_column("leader")
    table.add_column("ISR")
    for p, leader, isr in s["partitions"]:
        table.add_row(str(p), "-" if leader < 0 else str(leader), ",".join(map(str, isr)))
    up = " ".join(f"[green]{n}[/]" if alive else f"[red]{n}✗[/]" for n, alive in s["brokers"])
    return Panel(Group(Text.from_markup(f"brokers: {up}"), table), title="Cluster")


# the registry's role names, shortened to fit the live view's narrow column
SHORT_ROLES = {"group-coordinator": "coordinator", "partition-leader": "leader"}


def _connections_panel(s: Snapshot) -> Panel:
    table = Table(expand=True, box=None, pad_edge=False)
    longest = max((len(client_name(cid)) for cid in s["clients"]), default=6)
    table.add_column("client", overflow="fold", min_width=min(30, longest))
    table.add_column("brokers/self", no_wrap=True)
    table.add_column("fan-out")
    table.add_column("roles")
    table.add_column("principal", no_wrap=True)
    table.add_column("throttled", no_wrap=True)
    for cid, c in sorted(s["clients"].items()):
        fan = " ".join(f"b{b}:{n}" for b, n in sorted(c.fan_out.items()))
        roles = ", ".join(f"{SHORT_ROLES.get(r, r)} {n}" for r, n in sorted(c.roles.items()))
        reported = s["reported"].get(cid)
        throttled = f"{c.throttles}x {c.throttled_ms_total} ms" if c.throttles else "-"
        table.add_row(client_name(cid), f"{c.connections}/{reported if reported is not None else '-'}",
                      fan, roles, c.principal.removeprefix("User:"), throttled)
    return Panel(table, title="Connections: which connection is which")


def _cadence_panel(s: Snapshot) -> Panel:
    table = Table(expand=True, box=None, pad_edge=False)
    table.add_column("client", no_wrap=True, min_width=10)
    for col in ("heartbeat", "commit", "fetch/s"):
        table.add_column(col, no_wrap=True, min_width=len(col))

    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v / 1000:.1f}s"

    for cid, c in sorted(s["clients"].items()):
        if not cid.startswith("consumer"):
            continue
        rate = "-" if c.fetch_rate is None else f"{c.fetch_rate:.1f}"
        table.add_row(cid, ms(c.heartbeat_interval_ms), ms(c.commit_interval_ms), rate)
    lag = " ".join(f"p{p}:{v}" for p, v in sorted(s["lag"].items())) or "-"
    body = Group(table, Text(f"lag per partition: {lag}"),
                 Text(f"{counts(s)}  spark: {s['spark']}"))
    return Panel(body, title="Cadences")


def _tour_panel(s: Snapshot) -> Panel:
    tour: Tour | None = s["tour"]
    if tour is None:
        return Panel("faults disabled (--no-faults)", title="Tour of failures")
    lines = []
    for step in tour.steps:
        mark = {"pending": "·", "running": "▶", "done": "✓"}[step.status]
        lines.append(f"{mark} {step.title} — expect: {step.expect}")
        if step.outcome:
            lines.append(f"    happened: {step.outcome}")
        for obs in step.observed[-3:]:
            lines.append(f"    seen: {obs}")
    return Panel("\n".join(lines), title="Tour of failures")


def render(s: Snapshot, step: str) -> Group:
    """The live view: the step under way, then the panels (within the console's width)."""
    grid = Table.grid(expand=True)
    grid.add_column(ratio=1)
    grid.add_column(ratio=1)
    grid.add_row(_cluster_panel(s), _cadence_panel(s))
    events = Panel("\n".join(s["events"]) or "-", title="Event log")
    return Group(Text(step, style="bold"), grid, _connections_panel(s), events, _tour_panel(s))


def counts(s: Snapshot) -> str:
    """``acked A consumed C``: C of the A acknowledged records were read; records read
    before their acknowledgment reached the producer are counted apart, never in C."""
    text = f"acked {s['acked']} consumed {s['consumed']}"
    if s["ahead"]:
        text += f" (+{s['ahead']} read before their ack)"
    return text


def status_lines(s: Snapshot, step: str, width: int = WIDTH) -> list[str]:
    """The snapshot as plain lines of at most ``width`` columns: the phase and the counts,
    then brokers, leaders and Spark, then each client's connections."""
    clock = time.strftime("%H:%M:%S", time.localtime(s["time"]))
    lag = sum(s["lag"].values())
    lines = [fit(f"[{clock}] {step} | {counts(s)} lag {lag}", width)]
    brokers = " ".join(f"{n}" if alive else f"{n}(down)" for n, alive in s["brokers"])
    leaders = " ".join(f"p{p}:{'-' if leader < 0 else leader}"
                       for p, leader, _ in s["partitions"])
    lines += pack("   ", [f"brokers {brokers or '-'}", f"leaders {leaders or '-'}",
                          f"spark: {s['spark']}"], width, indent="    ", sep=" |")
    conns = [f"{client_name(cid)} {c.connections}" for cid, c in sorted(s["clients"].items())]
    lines += pack("    connections:", conns or ["none"], width, indent="      ")
    return lines
