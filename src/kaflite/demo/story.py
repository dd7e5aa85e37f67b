"""How the demo tells its story: the opening plan, numbered phases, lines that fit.

Every line the demo prints (the plan, each phase as it starts, the status
lines, the summary) is built to fit in ``WIDTH`` columns: long values are
wrapped onto indented continuation lines, or cut with an ellipsis where one
line is all there is room for.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len

__all__ = ["WIDTH", "Phases", "fit", "pack", "plan_lines", "wrap"]

WIDTH = 100


def fit(text: str, width: int = WIDTH) -> str:
    """``text`` on one line of at most ``width`` columns (cut with an ellipsis)."""
    if cell_len(text) <= width:
        return text
    out = text
    while out and cell_len(out) > width - 1:
        out = out[:-1]
    return out + "…"


def wrap(text: str, width: int = WIDTH, indent: str = "", subsequent: str = "    ") -> list[str]:
    """``text`` as lines of at most ``width`` columns, continuation lines indented."""
    lines = textwrap.wrap(text, width=width, initial_indent=indent,
                          subsequent_indent=indent + subsequent, break_on_hyphens=False)
    return [fit(line, width) for line in lines] or [indent.rstrip()]


def pack(head: str, items: Sequence[str], width: int = WIDTH, indent: str = "    ",
         sep: str = ", ") -> list[str]:
    """``head`` then ``items`` joined by ``sep``, broken between items (never inside one)."""
    lines: list[str] = []
    line = head
    for i, item in enumerate(items):
        piece = item + (sep.rstrip() if i < len(items) - 1 else "")
        candidate = f"{line} {piece}" if line.strip() else line + piece
        if cell_len(candidate) <= width or not line.strip():
            line = candidate
        else:
            lines.append(line)
            line = indent + piece
    lines.append(line)
    return [fit(x, width) for x in lines]


def plan_lines(*, brokers: int, duration: float, rate: int, spark: bool,
               faults: list[tuple[float, str]], log_file: str,
               width: int = WIDTH) -> list[str]:
    """The opening plan: what the run starts, what it breaks and when, what it checks."""
    start = (f"a {brokers}-broker cluster in this process; topics events (6 partitions) and "
             f"results (3); a producer ({rate} records/s, acks=all) and a group of two "
             "consumers")
    if spark:
        start += ("; a Spark streaming job that counts events per page in 10-second "
                  "windows, from events to results")
    if faults:
        brk = "; ".join(f"at {at:.0f}s {title}" for at, title in faults)
    elif brokers < 3:
        brk = "nothing (the tour of failures needs 3 brokers or more)"
    else:
        brk = "nothing (--no-faults)"
    check = ("every acknowledged record was consumed (lost 0); each client's connections and "
             "roles, as the brokers see them and as the client reports them")
    if spark:
        check += "; Spark's windows against a plain count of the same events"
    lines = [f"kaflite demo: the plan ({duration:.0f}s of traffic, then a drain and checks)"]
    for label, text in (("start:", start), ("break:", brk), ("check:", check),
                        ("logs:", f"Spark's, Java's and Python's logs go to {log_file}")):
        lines += wrap(f"{label:<7}{text}", width, indent="  ", subsequent="       ")
    return lines


@dataclass
class Phases:
    """The run's phases in order; ``begin`` announces one as it starts."""

    titles: list[str]
    say: Callable[[str], None]
    started: list[str] = field(default_factory=list)

    def begin(self, title: str, detail: str = "") -> None:
        """Announce ``title`` (one of ``titles``), with an optional line of detail."""
        self.started.append(title)
        self.say(fit(f"step {self.titles.index(title) + 1}/{len(self.titles)}: {title}"))
        if detail:
            for line in wrap(detail, indent="    ", subsequent="  "):
                self.say(line)

    @property
    def current(self) -> str:
        """The phase under way, as ``step 6/12 kill broker 2`` (before any: ``starting``)."""
        if not self.started:
            return "starting"
        title = self.started[-1]
        return f"step {self.titles.index(title) + 1}/{len(self.titles)} {title}"
