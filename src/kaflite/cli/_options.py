"""Options shared by the commands: where the cluster is, and client properties."""

from __future__ import annotations

from typing import Annotated

import typer

from kaflite.cli._state import find_bootstrap, find_http

__all__ = ["FIND", "Bootstrap", "ClientProps", "HttpOption", "client_config", "client_props",
           "props_for"]

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


def client_props(items: list[str] | None) -> dict[str, str]:
    """``-X name=value`` options as a config dict (Kafka's property names)."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"expected name=value, got {item!r}", param_hint="-X")
        out[name.strip()] = value
    return out


def client_config(bootstrap: str, client_id: str, props: list[str] | None,
                  **defaults: object) -> dict[str, object]:
    """A client's config: the bootstrap, the command's client.id and ``defaults``, with
    the user's ``-X name=value`` properties over them (Kafka's names)."""
    return {"bootstrap.servers": bootstrap, "client.id": client_id, **defaults,
            **client_props(props)}


def props_for(role: str, items: list[str] | None) -> list[str]:
    """The ``-X`` items a client of ``role`` ("admin", "producer", "consumer") takes, for
    a command that runs several kinds of client: each gets its own kind's properties
    and the common ones (an unknown one goes to all, to be refused by name)."""
    from kaflite.config import COMMON, PROPERTIES

    def takes(item: str) -> bool:
        prop = PROPERTIES.get(item.partition("=")[0].strip())
        return prop is None or bool(prop.roles & {role, COMMON})

    return [item for item in items or [] if takes(item)]
