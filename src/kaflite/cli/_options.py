"""Options shared by the commands: where the cluster is, and client properties."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Annotated

import typer

from kaflite.cli._state import find_bootstrap, find_http
from kaflite.properties import load_properties

__all__ = ["FIND", "Bootstrap", "ClientProps", "CommandConfig", "HttpOption", "client_config",
           "client_props", "props_for"]

FIND = ""   # the default of Bootstrap and HttpOption: find the running cluster (_state.py)


def _bootstrap(value: str | None) -> str:
    return find_bootstrap(value)


def _http(value: str | None) -> str:
    return find_http(value)


Bootstrap = Annotated[str, typer.Option(
    "--bootstrap", "-b", envvar="KAFLITE_BOOTSTRAP", callback=_bootstrap, show_default=False,
    metavar="HOST:PORT,...",
    help="bootstrap.servers of any Kafka cluster (default: the running `kaflite up`, "
         "else 127.0.0.1:9092)")]
HttpOption = Annotated[str, typer.Option(
    "--http", envvar="KAFLITE_HTTP", callback=_http, show_default=False, metavar="URL",
    help="the cluster's HTTP API (default: the running `kaflite up`'s)")]
ClientProps = Annotated[list[str] | None, typer.Option(
    "-X", metavar="NAME=VALUE", help="a client property as name=value (repeatable), as kcat's -X")]


# the running command's --command-config properties (set by the option's callback, which
# runs for every invocation, given or not)
_FILE_PROPS: ContextVar[dict[str, str]] = ContextVar("command_config", default={})  # noqa: B039


def _command_config(value: Path | None) -> Path | None:
    props: dict[str, str] = {}
    if value is not None:
        try:
            props = load_properties(value)
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(str(exc), param_hint="--command-config") from exc
    _FILE_PROPS.set(props)
    return value


# Every command that takes -X takes this too, as Kafka's scripts take --command-config. The
# commands need not pass it on: client_props and props_for read it from the running
# command's parameters, under its -X properties (-X wins).
CommandConfig = Annotated[Path | None, typer.Option(
    "--command-config", metavar="FILE", callback=_command_config, show_default=False,
    help="client properties from a Java .properties file (security settings, say); "
         "-X wins over it")]


class _Merged(list[str]):
    """-X items that already hold the --command-config file's properties."""


def _file_items() -> list[str]:
    """The running command's --command-config properties as name=value items."""
    return [f"{name}={value}" for name, value in _FILE_PROPS.get().items()]


def client_props(items: list[str] | None) -> dict[str, str]:
    """``--command-config`` and ``-X name=value`` options as a config dict (Kafka's
    property names; -X wins)."""
    out: dict[str, str] = {}
    merged = items if isinstance(items, _Merged) else [*_file_items(), *(items or [])]
    for item in merged:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected name=value, got {item!r}", param_hint="-X")
        out[name.strip()] = value
    return out


def client_config(bootstrap: str, client_id: str, props: list[str] | None,
                  **defaults: object) -> dict[str, object]:
    """A client's config: the bootstrap, the command's client.id and ``defaults``, with
    the user's ``--command-config`` and ``-X name=value`` properties over them (Kafka's
    names)."""
    return {"bootstrap.servers": bootstrap, "client.id": client_id, **defaults,
            **client_props(props)}


def props_for(role: str, items: list[str] | None) -> list[str]:
    """The ``--command-config`` and ``-X`` items a client of ``role`` ("admin",
    "producer", "consumer") takes, for a command that runs several kinds of client: each gets its own kind's properties
    and the common ones (an unknown one goes to all, to be refused by name)."""
    from kaflite.config import COMMON, PROPERTIES

    def takes(item: str) -> bool:
        prop = PROPERTIES.get(item.partition("=")[0].strip())
        return prop is None or bool(prop.roles & {role, COMMON})

    return _Merged(item for item in [*_file_items(), *(items or [])] if takes(item))
