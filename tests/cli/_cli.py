"""Running ``kaflite`` commands in-process, as the CLI tests do."""

from __future__ import annotations

from typer.testing import CliRunner, Result

from kaflite.cli import app

runner = CliRunner()


def cli(*args: str) -> Result:
    """The command's result; it must have succeeded."""
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def table(out: str) -> list[list[str]]:
    """A table's non-blank lines, split into cells."""
    return [line.split() for line in out.splitlines() if line.strip()]
