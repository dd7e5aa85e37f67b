"""The demo's summary: what was produced, consumed, checked and seen.

``build_summary`` makes the dictionary ``kaflite demo --json`` prints;
``summary_lines`` the same for people, in lines of at most ``WIDTH`` columns.
A value nobody measured is left out (never ``None``): Spark's clients live in
Spark's Python workers, and the web console's in its server, so only the
brokers' side of their connections is known.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

from kaflite.console.backend import is_console
from kaflite.demo.story import WIDTH, fit, pack, wrap

if TYPE_CHECKING:
    from kaflite.cluster.observe import ClientSnapshot
    from kaflite.demo.spark_step import SparkCheck
    from kaflite.demo.tour import Tour
    from kaflite.demo.view import Snapshot
    from kaflite.demo.workload import Workload

__all__ = ["Summary", "build_summary", "client_name", "summary_lines"]


class ClientSummary(TypedDict):
    """One client as the brokers saw it; a value nobody measured is left out."""

    connections: int
    fan_out: dict[str, int]
    roles: dict[str, int]
    reported_by_client: NotRequired[int]
    heartbeat_interval_ms: NotRequired[float]
    commit_interval_ms: NotRequired[float]
    fetch_rate: NotRequired[float]


class StepSummary(TypedDict):
    step: str
    expect: str
    status: str
    happened: str
    observed: list[str]


class Summary(TypedDict):
    """What ``kaflite demo --json`` prints."""

    produced: int
    producing_s: float      # how long the producer sent records
    rate: int               # the records per second it was asked for
    consumed: int
    lost: int
    duplicates: int
    failed_sends: list[str]
    spark: SparkCheck
    clients: dict[str, ClientSummary]
    tour: list[StepSummary]
    phases: list[str]
    log_file: str
    checks: dict[str, bool]
    ok: bool


def _client(c: ClientSnapshot, reported: int | None) -> ClientSummary:
    out: ClientSummary = {
        "connections": c.connections,
        "fan_out": {str(k): v for k, v in c.fan_out.items()},
        "roles": dict(c.roles),
    }
    if reported is not None:
        out["reported_by_client"] = reported
    if c.heartbeat_interval_ms is not None:
        out["heartbeat_interval_ms"] = c.heartbeat_interval_ms
    if c.commit_interval_ms is not None:
        out["commit_interval_ms"] = c.commit_interval_ms
    if c.fetch_rate is not None:
        out["fetch_rate"] = c.fetch_rate
    return out


def build_summary(workload: Workload, tour: Tour | None, snap: Snapshot,
                  spark: SparkCheck, spark_on: bool, phases: list[str],
                  log_file: str) -> Summary:
    acked = workload.acked
    consumed = workload.consumed()
    total_seen = sum(c.records for c in workload.consumers)
    clients = {cid: _client(c, snap["reported"].get(cid))
               for cid, c in snap["clients"].items()}
    steps: list[StepSummary] = [{"step": s.title, "expect": s.expect, "status": s.status, "happened": s.outcome,
              "observed": s.observed} for s in (tour.steps if tour else [])]
    checks = {
        "no_loss": bool(acked) and not (acked - consumed),
        "no_failed_sends": not workload.failed,
        "spark": bool(spark["ok"]) if spark_on else True,
        "tour_complete": all(s["status"] == "done" for s in steps),
        "consumers_seen_by_registry": all(
            f"consumer-{i + 1}" in clients for i in range(len(workload.consumers))),
    }
    return {
        "produced": len(acked),
        "producing_s": round(workload.producing_s, 1),
        "rate": workload.rate,
        "consumed": len(consumed & acked),
        "lost": len(acked - consumed),
        "duplicates": total_seen - len(consumed),
        "failed_sends": workload.failed[:10],
        "spark": spark,
        "clients": clients,
        "tour": steps,
        "phases": phases,
        "log_file": log_file,
        "checks": checks,
        "ok": all(checks.values()),
    }


def client_name(client_id: str) -> str:
    """A client id as the demo shows it: the web console's own clients say so."""
    return f"{client_id} (web console)" if is_console(client_id) else client_id


def _roles(roles: dict[str, int]) -> str:
    return ", ".join(f"{r} x{n}" for r, n in sorted(roles.items())) or "no role yet"


def summary_lines(summary: Summary, width: int = WIDTH) -> list[tuple[str, str]]:
    """The summary as ``(line, style)`` pairs; every line at most ``width`` columns."""
    out: list[tuple[str, str]] = []

    def add(lines: list[str], style: str = "") -> None:
        out.extend((line, style) for line in lines)

    took = summary["producing_s"]
    rate = f"{summary['produced'] / took:.0f}/s" if took else "-"
    add(wrap(f"produced {summary['produced']} in {took:.1f}s ({rate}; asked for "
             f"{summary['rate']}/s)  consumed {summary['consumed']}  lost {summary['lost']}  "
             f"duplicates {summary['duplicates']}", width))
    add(wrap(f"spark: {summary['spark']['detail']}", width))
    clients = summary["clients"]
    if clients:
        add(["connections (the brokers' count / the client's own count) and roles:"])
        names = {cid: client_name(cid) for cid in clients}
        name_width = min(32, max(len(name) for name in names.values()))
        unreported: set[str] = set()
        for cid, c in sorted(clients.items()):
            own = c.get("reported_by_client")
            if own is None:
                unreported.add("console" if is_console(cid) else "spark")
            head = f"  {fit(names[cid], name_width):<{name_width}}  {c['connections']} / "
            head += ("-" if own is None else str(own)) + " "
            add(pack(head, [_roles(c["roles"])], width, indent=" " * (name_width + 4)))
        if unreported:
            where = {"spark": "Spark's clients run in Spark's Python workers",
                     "console": "the web console's in the console's server"}
            add(wrap("  (- : a client the demo cannot ask: "
                     + ", ".join(where[w] for w in sorted(unreported, reverse=True))
                     + "; the brokers' count is the only one)", width, subsequent="  "), "dim")
    for step in summary["tour"]:
        add(wrap(f"tour: {step['step']}: {step['happened']}", width))
        for seen in step["observed"][-2:]:
            add(wrap(f"    seen: {seen}", width, subsequent="      "), "dim")
    for name, ok in summary["checks"].items():
        out.append((f"{'✓' if ok else '✗'} {name}", "green" if ok else "red"))
    add(wrap(f"Spark's, Java's and Python's logs: {summary['log_file']}", width))
    return out
