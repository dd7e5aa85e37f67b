"""Progress bars for long runs (produce, consume, bench): on stderr, and only when
stderr is a terminal, so pipes, files and tests' captured output never see them.

``consume`` also asks that stdout is not that terminal (``quiet_on=sys.stdout``):
records printed on the screen are their own progress, and a bar redrawn between them
would garble them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["Bar", "bar", "shows_progress"]


def shows_progress(stderr: TextIO, quiet_on: TextIO | None = None) -> bool:
    """Whether to draw a bar: stderr is a terminal (and ``quiet_on`` is not one)."""
    if not stderr.isatty():
        return False
    return quiet_on is None or not quiet_on.isatty()


class Bar:
    """One task's bar; a no-op when progress is not shown."""

    def __init__(self, progress: Progress | None, task: TaskID | None) -> None:
        self._progress, self._task = progress, task

    @property
    def shown(self) -> bool:
        return self._progress is not None

    def advance(self, n: int = 1) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.advance(self._task, n)

    def update(self, completed: int, total: int | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=completed, total=total)

    def describe(self, description: str, total: int | None = None) -> None:
        """Start the bar over for the next phase (bench: produce, then consume)."""
        if self._progress is not None and self._task is not None:
            self._progress.reset(self._task, total=total, description=description)


@contextmanager
def bar(description: str, total: int | None, stderr: TextIO,
        quiet_on: TextIO | None = None) -> Iterator[Bar]:
    """A progress bar on ``stderr`` while the block runs (nothing if not shown)."""
    if not shows_progress(stderr, quiet_on):
        yield Bar(None, None)
        return
    console = Console(file=stderr, stderr=True)
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=True,
                        redirect_stdout=False, redirect_stderr=False)
    with progress:
        yield Bar(progress, progress.add_task(description, total=total))
