"""``--help`` names values (``--topic TOPIC``) and never shows a Python type."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from kaflite.cli import command

TYPE_LABEL = re.compile(r"<(?:str|int|float|bool|path|list\[[^\]]*\]|[a-z_]+ range)>")


def _paths(cmd: object, path: list[str]) -> Iterator[list[str]]:
    yield path
    for name, sub in sorted(getattr(cmd, "commands", {}).items()):
        yield from _paths(sub, [*path, name])


def test_no_help_shows_a_type_name(capsys: pytest.CaptureFixture[str]) -> None:
    cli = command()
    paths = list(_paths(cli, []))
    assert ["topics", "describe"] in paths and ["up"] in paths and len(paths) > 30
    for path in paths:
        assert cli.main(args=[*path, "--help"], prog_name="kaflite",
                        standalone_mode=False) in (0, None)
        out = capsys.readouterr().out
        assert out.startswith("Usage: kaflite"), (path, out)
        assert not TYPE_LABEL.findall(out), (path, out)
    help_text = (cli.main(args=["topics", "describe", "--help"],
                          prog_name="kaflite", standalone_mode=False), capsys.readouterr().out)
    assert "-b, --bootstrap HOST:PORT,..." in help_text[1]
    assert "-X NAME=VALUE" in help_text[1]
