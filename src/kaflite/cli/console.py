"""``kaflite console``: the web console for any Kafka cluster.

It serves the console page and its JSON API (``docs/console.md``) on loopback,
and answers them through kaflite's own clients: topics, partitions and configs,
the message browser, produce with a trace, consumer groups with lag. What only
a kaflite cluster knows (its connection registry, chaos) answers "not
available"; ``kaflite up`` serves the whole console for its own cluster.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap, ClientProps, CommandConfig, client_props
from kaflite.cli._ports import check_free
from kaflite.cli._serve import serve_until_interrupted

__all__ = ["DEFAULT_CONSOLE_PORT", "console"]

DEFAULT_CONSOLE_PORT = 9991


def console(
    bootstrap: Bootstrap = FIND,
    host: Annotated[str, typer.Option(
        help="the address the console listens on (keep it loopback unless you mean it)")]
        = "127.0.0.1",
    port: Annotated[int, typer.Option(
        "--port", "-p", help="the console's port (0: any free port; default: 9991, or any "
        "free port when 9991 is taken)")] = DEFAULT_CONSOLE_PORT,
    props: ClientProps = None,
    command_config: CommandConfig = None,
) -> None:
    """Serve the web console for a Kafka cluster (Tansu, Apache Kafka, kaflite)."""
    if port > 0 and port != DEFAULT_CONSOLE_PORT:
        check_free("the console's", host, port)
    run(_serve(bootstrap, host, port, client_props(props)))


async def _serve(bootstrap: str, host: str, port: int, props: dict[str, str]) -> None:
    from kaflite.console import ClientBackend, ConsoleServer

    backend = ClientBackend(bootstrap, props)
    moved = ""     # why the console is not on the port asked for
    try:
        server = await ConsoleServer(backend, host, port).start()
    except OSError as exc:
        if port != DEFAULT_CONSOLE_PORT:
            raise
        server = await ConsoleServer(backend, host, 0).start()
        moved = (f" (port {DEFAULT_CONSOLE_PORT} is taken: {exc.strerror or exc}; "
                 "--port chooses one)")
    try:
        try:
            cluster_id = (await asyncio.wait_for(backend.info(), 10))["cluster_id"]
            typer.echo(f"kaflite console for {bootstrap} (cluster {cluster_id})")
        except Exception as exc:  # the console still serves, and shows the error
            typer.echo(f"kaflite console for {bootstrap}: the cluster does not answer yet "
                       f"({type(exc).__name__}: {exc})", err=True)
        typer.echo(f"console: {server.console_url}{moved}")
        typer.echo(f"API: {server.url}/docs; console token {server.token} "
                   "(state changes need it)")
        await serve_until_interrupted("the console")
    finally:
        await server.stop()
