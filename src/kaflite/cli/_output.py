"""One home for what a command prints: a plain table (the default) or JSON (``--json``).

Every command that prints results takes ``as_json: JsonOption = False`` and hands its
rows to ``emit``: rows are dicts (JSON's objects, snake_case keys), ``columns`` say
which keys the table shows and under which header (Kafka's, where Kafka's tools have
one: ``CURRENT-OFFSET``, ``LOG-END-OFFSET``...). The table is a borderless rich table,
its lines stripped of trailing blanks, so ``awk``/``cut`` read it as they read
Kafka's; a missing value prints as ``-`` (Kafka's tools do the same) and is ``null``
in JSON. ``emit_json`` prints one JSON document (a summary, a nested description),
``json_line`` renders one JSON object as one line (``consume --json``, JSON Lines).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

__all__ = [
    "Column",
    "JsonOption",
    "Row",
    "cell",
    "emit",
    "emit_json",
    "emit_lines",
    "json_line",
    "table_lines",
    "terminal_console",
]

Row = Mapping[str, object]      # a JSON object: str, int, bool, None, lists and dicts

JsonOption = Annotated[bool, typer.Option(
    "--json", help="print JSON instead of a table")]

MISSING = "-"           # Kafka's tools print a value they do not have as "-"
WIDE = 1000             # the table's width when stdout is not a terminal: never fold


@dataclass(frozen=True)
class Column:
    key: str            # the row's key (and JSON's)
    header: str         # the table's header


def cell(value: object) -> str:
    """A value as a table shows it: ``-`` for none, lists joined with commas."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items())
    return str(value)


def terminal_console() -> Console:
    """A console as wide as the terminal, or never folding when stdout is not one."""
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else WIDE
    return Console(width=width, highlight=False, soft_wrap=False)


def table_lines(rows: Sequence[Row], columns: Sequence[Column]) -> list[str]:
    """The table's lines (header first), trailing blanks stripped."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for col in columns:
        table.add_column(col.header, overflow="fold")
    for row in rows:
        table.add_row(*(cell(row.get(col.key)) for col in columns))
    console = terminal_console()
    with console.capture() as captured:
        console.print(table)
    return [line.rstrip() for line in captured.get().splitlines()]


def emit(rows: Sequence[Row], columns: Sequence[Column], as_json: bool) -> None:
    """Print ``rows`` as a table of ``columns``, or (``as_json``) as a JSON array of
    the rows (every key, not only the table's columns)."""
    if as_json:
        emit_json(list(rows))
        return
    emit_lines(table_lines(rows, columns))


def emit_lines(lines: Sequence[str]) -> None:
    for line in lines:
        typer.echo(line)


def emit_json(document: object) -> None:
    typer.echo(json.dumps(document, indent=1, default=str))


def json_line(document: object) -> str:
    """One JSON object as one line (JSON Lines), for streams such as ``consume``."""
    return json.dumps(document, separators=(",", ":"), default=str) + "\n"
