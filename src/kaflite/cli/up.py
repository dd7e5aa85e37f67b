"""``kaflite up``: run an embedded cluster until Ctrl-C.

Broker settings come as Kafka's do: a ``server.properties`` file (the first
argument, as ``kafka-server-start.sh`` takes it) and ``--config name=value``
overrides. Listeners come as Kafka's ``listeners`` setting, or as ``--listener
NAME=PROTOCOL`` flags: the k-th flag's listener is on port base-port + 100 k + N
on broker N (any free port when base-port is 0). The cluster registers itself (``_state.py``) so that the other
commands find it, and a port another process holds is an error naming it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kaflite._loop import run
from kaflite.cli._ports import check_free
from kaflite.cli._serve import serve_until_interrupted
from kaflite.cli._state import DEFAULT_HTTP_PORT, ClusterState, Registration, how_found
from kaflite.config import ConfigError
from kaflite.properties import load_properties

if TYPE_CHECKING:
    from kaflite.cli._front import FrontedServe

# kaflite.cluster (0.5 s to import) comes in the functions that run or configure one:
# every other command of the CLI can do without it.

__all__ = ["broker_props", "up"]


def broker_props(properties: Path | None, config: list[str] | None) -> dict[str, str]:
    """A properties file's settings overridden by ``name=value`` items."""
    props: dict[str, str] = {}
    if properties is not None:
        try:
            props.update(load_properties(properties))
        except (OSError, ValueError) as exc:
            raise typer.BadParameter(f"cannot read {properties}: {exc}",
                                     param_hint="PROPERTIES") from None
    for item in config or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise typer.BadParameter(f"expected name=value, got {item!r}", param_hint="--config")
        props[name.strip()] = value.strip()
    return props


def up(
    properties: Annotated[Path | None, typer.Argument(
        help="broker settings in a Kafka server.properties file", show_default=False)] = None,
    brokers: Annotated[int, typer.Option("--brokers", "-b", help="number of brokers")] = 3,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", "-d",
        help="where brokers keep their logs; reused on the next start (default: temporary)",
    )] = None,
    host: Annotated[str, typer.Option(help="address every broker listens on")] = "127.0.0.1",
    base_port: Annotated[int, typer.Option(
        help="broker N listens on base-port + N (0: any free port)")] = 9092,
    config: Annotated[list[str] | None, typer.Option(
        "--config", "-c", "--override",
        help="a broker setting as name=value (repeatable; wins over the file)")] = None,
    http_port: Annotated[int, typer.Option(
        "--http-port", help="the web console and its HTTP API (connections, faults, "
        "/metrics) on loopback (0: any free port; -1: off; default: 9990, or any free "
        "port when 9990 is taken)")] = DEFAULT_HTTP_PORT,
    listener: Annotated[list[str] | None, typer.Option(
        "--listener", "-l", metavar="NAME=PROTOCOL",
        help="a listener, e.g. SASL_SSL=SASL_SSL or EXTERNAL=SASL_PLAINTEXT (repeatable; "
        "the k-th is on base-port + 100 k + N)")] = None,
    processes: Annotated[bool, typer.Option(
        "--processes", help="run each broker in its own OS process (uses every core); "
        "this process keeps the controller")] = False,
    front_port: Annotated[int | None, typer.Option(
        "--front-port", help="bootstrap through a TCP forwarder on this port (0: any free "
        "port), the brokers on any free ports, so that `kaflite chaos replace-cluster` can "
        "put a new cluster behind it", show_default=False)] = None,
) -> None:
    """Start an embedded Kafka-compatible cluster and print its bootstrap address."""
    props = broker_props(properties, config)
    if front_port is not None:
        if processes or data_dir is not None or listener or "listeners" in props:
            raise typer.BadParameter("goes with none of --processes, --data-dir and "
                                     "listeners (a replacement cluster starts empty)",
                                     param_hint="--front-port")
        if front_port:
            check_free("the front's", host, front_port)
        base_port = 0
    if listener:
        props.update(listener_props(listener, host, base_port))
    ports = _listener_ports(props, base_port)
    for node in range(brokers):
        for name, port in ports:
            if port:
                check_free(f"broker {node}'s{name}", host, port + node)
    if http_port > 0 and http_port != DEFAULT_HTTP_PORT:
        check_free("the HTTP API's", host, http_port)
    run(_serve(brokers, data_dir, host, base_port, props, http_port, processes, front_port))


def listener_props(flags: list[str], host: str, base_port: int) -> dict[str, str]:
    """``--listener NAME=PROTOCOL`` flags -> ``listeners`` and its protocol map."""
    from kaflite.cluster.listeners import DEFAULT_PROTOCOL_MAP, SECURITY_PROTOCOLS

    urls, protocols = [], []
    for k, item in enumerate(flags):
        name, sep, protocol = item.partition("=")
        name, protocol = name.strip().upper(), (protocol if sep else name).strip().upper()
        if not name or protocol not in SECURITY_PROTOCOLS:
            raise typer.BadParameter(
                f"expected NAME=PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}, "
                f"got {item!r}", param_hint="--listener")
        urls.append(f"{name}://{host}:{base_port + 100 * k if base_port else 0}")
        protocols.append(f"{name}:{protocol}")
    return {"listeners": ",".join(urls),
            "listener.security.protocol.map": ",".join([DEFAULT_PROTOCOL_MAP, *protocols])}


def _listener_ports(props: dict[str, str], base_port: int) -> list[tuple[str, int]]:
    from kaflite.cluster.listeners import parse_listeners, parse_protocol_map

    if "listeners" not in props:
        return [("", base_port)]
    try:
        protocol_map = parse_protocol_map(props.get("listener.security.protocol.map"))
        specs = parse_listeners(props["listeners"], protocol_map, "")
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--config") from None
    return [(f" {s.name} listener", s.port) for s in specs]


async def _serve(brokers: int, data_dir: Path | None, host: str, base_port: int,
                 props: dict[str, str], http_port: int = -1, processes: bool = False,
                 front_port: int | None = None) -> None:
    from kaflite.cluster import Cluster, gc_policy
    from kaflite.cluster.replace import FrontedCluster

    gc_policy.install()     # this process runs the cluster: full collections walk what is new
    fronted = None if front_port is None else FrontedCluster(
        brokers, host=host, front_port=front_port, config=props)
    cluster = fronted.cluster if fronted is not None else Cluster(
        brokers=brokers, data_dir=data_dir, host=host, base_port=base_port, config=props,
        processes=processes)
    unused = cluster.config.unused()
    await (fronted.start() if fronted is not None else cluster.start())
    api = None
    registration = None
    serve: FrontedServe | None = None
    moved = ""     # why the HTTP API is not on the port asked for
    try:
        if http_port >= 0:
            from kaflite.cluster.http import HttpApi

            try:
                api = await HttpApi(cluster, host, http_port).start()
            except OSError as exc:
                if http_port != DEFAULT_HTTP_PORT:
                    raise
                api = await HttpApi(cluster, host, 0).start()   # 9990 is taken: any port
                moved = (f" (port {DEFAULT_HTTP_PORT} is taken: {exc.strerror or exc}; "
                         f"--http-port chooses one)")
        bootstrap = fronted.bootstrap_servers if fronted else cluster.bootstrap_servers
        state = ClusterState(cluster.cluster_id, bootstrap,
                             api.url if api else None, os.getpid(),
                             str(data_dir.resolve()) if data_dir is not None else None,
                             api.token if api else None)
        registration = Registration(state).write()
        if fronted is not None:
            from kaflite.cli._front import FrontedServe

            serve = FrontedServe(fronted, api, registration)
        typer.echo(f"kaflite cluster {cluster.cluster_id}: {brokers} broker(s)"
                   + (", one process each (pids "
                      f"{', '.join(str(p.pid) for p in cluster.processes.values())})"
                      if processes else ""))
        typer.echo(f"bootstrap.servers={bootstrap}")
        if fronted is not None:
            typer.echo(f"(a forwarder in front of brokers {cluster.bootstrap_servers}; "
                       "kaflite chaos replace-cluster puts a new cluster behind it)")
        for spec in cluster.listeners[1:]:
            typer.echo(f"{spec.name} ({spec.security_protocol}): "
                       f"bootstrap.servers={cluster.bootstrap(spec.name)}")
        if data_dir is not None:
            typer.echo(f"data in {data_dir.resolve()}")
        if unused:
            typer.echo(f"not used by kaflite (ignored): {', '.join(unused)}")
        if api is not None:
            typer.echo(f"console: {api.console_url}{moved}")
            typer.echo(f"HTTP API on {api.url} (kaflite connections, kaflite chaos; "
                       f"{api.url}/docs); console token {api.token} (state changes need it)")
            typer.echo(f"Prometheus metrics on {api.url}/metrics")
        typer.echo(f"{how_found(state, Path.cwd())}; from elsewhere: "
                   f"KAFLITE_CLUSTER={registration.paths[-1]}")
        await serve_until_interrupted("the cluster gracefully")
        typer.echo("stopping...")
    finally:
        if serve is not None:
            api, registration = await serve.settle()
        if registration is not None:
            registration.remove()
        if api is not None:
            await api.stop()
        await (fronted.stop() if fronted is not None else cluster.stop())
