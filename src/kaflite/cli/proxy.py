"""``kaflite proxy``: a protocol-aware proxy in front of any Kafka-compatible cluster.

    kaflite proxy --upstream kafka-1:9092 --listen 127.0.0.1:19092 --http-port 9991
    kaflite proxy --upstream ... --listen ... --filter 'chaos:rate=0.1' --filter audit
    kaflite proxy --upstream ... --listen ... --naive      # the shared VIP, to be shown
    kaflite proxy --upstream ... --tls-cert proxy.pem --tls-key proxy-key.pem --upstream-ca ca.pem
    kaflite proxy --upstream ... --sasl-users alice:secret \
        --upstream-sasl-mechanism SCRAM-SHA-512 --upstream-sasl-username proxy-svc
        (the password from KAFLITE_PROXY_UPSTREAM_PASSWORD, or --upstream-sasl-password)
    kaflite proxy --upstream ... --listen 0.0.0.0:9092 --tls-cert ... --tls-key ... \
        --sni-suffix kafka.example.com        # broker-<id>.kafka.example.com:9092, by SNI

Clients bootstrap from the ``--listen`` address; each upstream broker gets a
port of its own (``--listen`` port + 1 + node id when the port is fixed).
``kaflite connections --proxy http://HOST:HTTP_PORT`` shows which connection is
which. Ctrl-C stops it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from kaflite.proxy import Proxy

__all__ = ["proxy"]


def proxy(
    upstream: Annotated[str, typer.Option(
        "--upstream", metavar="HOST:PORT,...", help="bootstrap.servers of the upstream cluster")],
    listen: Annotated[str, typer.Option(
        "--listen", metavar="HOST:PORT", help="the proxy's bootstrap address")
    ] = "127.0.0.1:19092",
    naive: Annotated[bool, typer.Option(
        "--naive", help="a round-robin TCP forwarder that advertises one address for every "
                        "broker (the shared VIP); to be compared, not used")] = False,
    filters: Annotated[list[str] | None, typer.Option(
        "--filter", metavar="NAME[:KEY=VALUE,...]",
        help="a filter, in chain order (repeatable): chaos, audit, topic-prefix")] = None,
    http_port: Annotated[int | None, typer.Option(
        "--http-port", metavar="N", help="serve the JSON API and /metrics on this port")] = None,
    advertised_host: Annotated[str | None, typer.Option(
        "--advertised-host", metavar="HOST",
        help="the host name given to clients (default: the --listen host)")] = None,
    tls_cert: Annotated[Path | None, typer.Option(
        "--tls-cert", metavar="FILE", help="serve clients over TLS with this certificate "
                                          "chain (PEM)")] = None,
    tls_key: Annotated[Path | None, typer.Option(
        "--tls-key", metavar="FILE", help="the private key of --tls-cert (PEM)")] = None,
    upstream_tls: Annotated[bool, typer.Option(
        "--upstream-tls", help="speak TLS to the upstream brokers")] = False,
    upstream_ca: Annotated[Path | None, typer.Option(
        "--upstream-ca", metavar="FILE",
        help="the CA the upstream brokers' certificates chain to (implies --upstream-tls; "
             "default: the system's CAs)")] = None,
    sni_suffix: Annotated[str | None, typer.Option(
        "--sni-suffix", metavar="DOMAIN",
        help="route by TLS SNI on the one --listen port: broker n is advertised as "
             "broker-<n>.DOMAIN (needs --tls-cert covering *.DOMAIN)")] = None,
    sasl_users: Annotated[str | None, typer.Option(
        "--sasl-users", metavar="USER:PASSWORD,...", envvar="KAFLITE_PROXY_SASL_USERS",
        help="end SASL at the proxy: authenticate clients against these users")] = None,
    sasl_mechanisms: Annotated[str, typer.Option(
        "--sasl-mechanisms", metavar="MECH,...",
        help="the mechanisms offered to clients with --sasl-users")
    ] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    upstream_sasl_mechanism: Annotated[str | None, typer.Option(
        "--upstream-sasl-mechanism", metavar="MECH",
        help="log in to the upstream with SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
    ] = None,
    upstream_sasl_username: Annotated[str | None, typer.Option(
        "--upstream-sasl-username", metavar="USER")] = None,
    upstream_sasl_password: Annotated[str | None, typer.Option(
        "--upstream-sasl-password", metavar="PASSWORD",
        envvar="KAFLITE_PROXY_UPSTREAM_PASSWORD")] = None,
    request_log: Annotated[bool, typer.Option(
        "--request-log", help="write a record of every request carried to __kaflite_requests "
        "on the upstream cluster (read it with `kaflite requests`)")] = False,
    request_log_to: Annotated[str | None, typer.Option(
        "--request-log-to", metavar="HOST:PORT,...",
        help="write the request log to this cluster instead (implies --request-log)")] = None,
) -> None:
    """Run a Kafka proxy that maps each upstream broker to a port of its own."""
    # imported here: the proxy brings the broker's request handling (0.5 s), which
    # every other command of the CLI can do without
    from kaflite._loop import run
    from kaflite.proxy import Proxy, ProxySasl, UpstreamSasl, load_filter
    from kaflite.proxy.filters import known_filters
    from kaflite.proxy.filters.base import Filter
    from kaflite.proxy.sasl import parse_users
    from kaflite.security.tls import client_context, server_context

    if (tls_cert is None) != (tls_key is None):
        raise typer.BadParameter("--tls-cert and --tls-key go together", param_hint="--tls-key")
    server_ssl = server_context(str(tls_cert), str(tls_key)) if tls_cert and tls_key else None
    upstream_ssl = client_context({"ssl.ca.location": str(upstream_ca)} if upstream_ca else {}) \
        if upstream_tls or upstream_ca is not None else None
    try:
        chain: list[Filter] = [load_filter(spec) for spec in filters or []]
    except ValueError as exc:
        raise typer.BadParameter(f"{exc} (known: {', '.join(known_filters())})",
                                 param_hint="--filter") from exc
    try:
        sasl = ProxySasl(parse_users(sasl_users), sasl_mechanisms.split(",")) \
            if sasl_users else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--sasl-users") from exc
    upstream_sasl = None
    if upstream_sasl_mechanism is not None:
        if upstream_sasl_username is None or upstream_sasl_password is None:
            raise typer.BadParameter("--upstream-sasl-mechanism needs a username and password",
                                     param_hint="--upstream-sasl-username")
        try:
            upstream_sasl = UpstreamSasl(upstream_sasl_mechanism.upper(),
                                         upstream_sasl_username, upstream_sasl_password)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--upstream-sasl-mechanism") from exc
    try:
        p = Proxy(upstream, listen, naive=naive, filters=chain, http_port=http_port,
                  advertised_host=advertised_host, ssl_context=server_ssl,
                  upstream_ssl=upstream_ssl, sasl=sasl, upstream_sasl=upstream_sasl,
                  sni_suffix=sni_suffix,
                  request_log=request_log_to or request_log)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    run(_serve(p))


async def _serve(p: Proxy) -> None:
    from kaflite.cli._serve import serve_until_interrupted

    await p.start()
    try:
        mode = "naive (round-robin, one address for every broker)" if p.naive else "aware"
        typer.echo(f"kaflite proxy ({mode}) for {','.join(f'{h}:{n}' for h, n in p.bootstrap)}")
        typer.echo(f"bootstrap.servers={p.bootstrap_servers}")
        if p.http_url is not None:
            typer.echo(f"HTTP API on {p.http_url} (kaflite connections --proxy {p.http_url})")
            typer.echo(f"Prometheus metrics on {p.http_url}/metrics")
        await serve_until_interrupted("the proxy")
        typer.echo("stopping...")
    finally:
        await p.stop()
