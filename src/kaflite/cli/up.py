"""``kaflite up``: run an embedded cluster until Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Annotated

import typer

from kaflite._loop import run
from kaflite.cluster import Cluster

DEFAULT_HTTP_PORT = 9990  # where `kaflite connections` and `kaflite chaos` look by default


def up(
    brokers: Annotated[int, typer.Option("--brokers", "-b", help="number of brokers")] = 3,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", "-d",
        help="where brokers keep their logs; reused on the next start (default: temporary)",
    )] = None,
    host: Annotated[str, typer.Option(help="address every broker listens on")] = "127.0.0.1",
    base_port: Annotated[int, typer.Option(
        help="broker N listens on base-port + N (0: any free port)")] = 9092,
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", help="broker config as name=value (repeatable)")] = None,
    http_port: Annotated[int | None, typer.Option(
        "--http-port", help="serve the HTTP JSON API (connections, faults) on this port "
        "(default: 9990 when free; 0: any free port; -1: off)")] = None,
) -> None:
    """Start an embedded Kafka-compatible cluster and print its bootstrap address."""
    props = {}
    for item in config or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"expected name=value, got {item!r}", param_hint="--config")
        props[name.strip()] = value.strip()
    run(_serve(brokers, data_dir, host, base_port, props, http_port))


async def _serve(brokers: int, data_dir: Path | None, host: str, base_port: int,
                 props: dict[str, str], http_port: int | None = -1) -> None:
    cluster = Cluster(brokers=brokers, data_dir=data_dir, host=host, base_port=base_port,
                      config=props)
    await cluster.start()
    typer.echo(f"kaflite cluster {cluster.cluster_id}: {brokers} broker(s)")
    typer.echo(f"bootstrap.servers={cluster.bootstrap_servers}")
    if data_dir is not None:
        typer.echo(f"data in {data_dir.resolve()}")
    api = None
    if http_port is None or http_port >= 0:
        from kaflite.cluster.http import HttpApi

        try:
            api = await HttpApi(cluster, host, DEFAULT_HTTP_PORT if http_port is None
                                else http_port).start()
            typer.echo(f"HTTP API on {api.url} (kaflite connections / kaflite chaos)")
            typer.echo(f"Prometheus metrics on {api.url}/metrics")
        except OSError as exc:
            if http_port is not None:
                await cluster.stop()
                raise
            typer.echo(f"HTTP API not started: {exc} (pass --http-port)")
    typer.echo("Ctrl-C stops the cluster gracefully.")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    typer.echo("stopping...")
    if api is not None:
        await api.stop()
    await cluster.stop()
