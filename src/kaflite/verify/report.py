"""A check result as Jepsen-style tables (rich), and as plain text for logs."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from kaflite.verify.checker import DESCRIPTIONS, CheckResult

__all__ = ["exclusions", "render", "render_text", "replay_command"]


def replay_command(config: dict[str, Any]) -> str:
    """The command line that runs the same configuration with the same seed."""
    parts = ["python -m kaflite.verify"]
    for name in ("client", "workload", "nemesis", "seconds", "seed"):
        if config.get(name) is not None:
            parts.append(f"--{name} {config[name]}")
    if config.get("group_protocol", "classic") != "classic":
        parts.append(f"--group-protocol {config['group_protocol']}")
    if config.get("churn"):
        parts.append("--churn")
    for name, default in (("partitions", 4), ("producers", 2), ("consumers", 2)):
        if config.get(name, default) != default:
            parts.append(f"--{name} {config[name]}")
    if config.get("filler_partitions"):
        parts.append(f"--filler-partitions {config['filler_partitions']}")
    if config.get("processes"):
        parts.append("--processes")
    if config.get("target", "kaflite") != "kaflite":
        parts.append(f"--target {config['target']} --kafka-libs {config.get('kafka_libs')}")
    if config.get("via_proxy"):
        parts.append("--via-proxy")
    if config.get("request_log"):
        parts.append("--request-log")
    return " ".join(parts)


def exclusions(config: dict[str, Any]) -> list[tuple[str, str]]:
    """What a run left out for a known client bug, and why: faults that share one
    reason are named together."""
    by_reason: dict[str, list[str]] = {}
    for kind, why in config.get("excluded_faults", {}).items():
        by_reason.setdefault(why, []).append(f"fault {kind!r}")
    for shot, why in config.get("excluded_errors", {}).items():
        by_reason.setdefault(why, []).append(f"injected {shot}")
    return [(", ".join(what), why) for why, what in by_reason.items()]


def _short(example: dict[str, Any]) -> str:
    return json.dumps(example, default=str, separators=(", ", "="))[1:-1].replace('"', "")


def tables(result: CheckResult) -> list[Table]:
    anomalies = Table(title="anomalies (Jepsen's kafka workload terms)", title_justify="left")
    anomalies.add_column("anomaly")
    anomalies.add_column("count", justify="right")
    anomalies.add_column("meaning")
    anomalies.add_column("first example", overflow="fold")
    for kind, n in result.counts.items():
        example = result.examples.get(kind, [])
        style = "bold red" if n else "green"
        anomalies.add_row(kind, f"[{style}]{n}[/]", DESCRIPTIONS[kind],
                          _short(example[0]) if example else "")
    ops = Table(title="operations", title_justify="left")
    ops.add_column("operation")
    ops.add_column("count", justify="right")
    for name, n in result.stats.items():
        ops.add_row(name, str(n))
    faults = Table(title="faults injected", title_justify="left")
    faults.add_column("fault")
    faults.add_column("count", justify="right")
    for name, n in result.faults.items():
        faults.add_row(name, str(n))
    if not result.faults:
        faults.add_row("(none)", "0")
    return [ops, faults, anomalies]


def render(result: CheckResult, console: Console | None = None) -> None:
    """Print the tables, every example of each anomaly, the verdict and the replay line."""
    console = console or Console()
    for table in tables(result):
        console.print(table)
    for kind, examples in result.examples.items():
        console.print(f"[bold]{kind}[/] ({result.counts.get(kind, 0)}):")
        for example in examples:
            console.print(f"  {_short(example)}", markup=False)
    for what, why in exclusions(result.config):
        console.print(f"note: {what} left out of this client's run: {why}", markup=False)
    if result.valid:
        console.print("[bold green]valid[/]")
    else:
        console.print(f"[bold red]{result.summary()}[/]", highlight=False)
    if result.config.get("seed") is not None:
        console.print(f"seed {result.config['seed']}; replay with:", markup=False)
        console.print(f"  {replay_command(result.config)}", markup=False)


def render_text(result: CheckResult, width: int = 140) -> str:
    buf = io.StringIO()
    render(result, Console(file=buf, width=width, force_terminal=False, color_system=None))
    return buf.getvalue()
