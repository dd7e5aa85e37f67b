"""A check result as Jepsen-style tables (rich), and as plain text for logs."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from kaflite.verify.checker import DESCRIPTIONS, CheckResult

__all__ = ["render", "render_text", "replay_command"]


def replay_command(config: dict[str, Any]) -> str:
    """The command line that runs the same configuration with the same seed."""
    parts = ["python -m kaflite.verify"]
    for name in ("client", "workload", "nemesis", "seconds", "seed"):
        if config.get(name) is not None:
            parts.append(f"--{name} {config[name]}")
    return " ".join(parts)


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
    for kind, why in result.config.get("excluded_faults", {}).items():
        console.print(f"note: fault {kind!r} left out of this client's run: {why}",
                      markup=False)
    verdict = "[bold green]valid[/]" if result.valid else "[bold red]INVALID[/]"
    console.print(f"{verdict}: {result.summary()}")
    if result.config.get("seed") is not None:
        console.print(f"seed {result.config['seed']}; replay with:", markup=False)
        console.print(f"  {replay_command(result.config)}", markup=False)


def render_text(result: CheckResult, width: int = 140) -> str:
    buf = io.StringIO()
    render(result, Console(file=buf, width=width, force_terminal=False, color_system=None))
    return buf.getvalue()
