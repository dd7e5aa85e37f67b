"""The ``kaflite`` command line: one module per command group."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from kaflite.cli import (
    acls,
    bench,
    certs,
    chaos,
    client_metrics,
    configs,
    connections,
    console,
    consume,
    delegation_tokens,
    demo,
    doctor,
    features,
    groups,
    pipeline,
    produce,
    proxy,
    quotas,
    requests,
    topics,
    transactions,
    up,
    users,
)
from kaflite.cli._errors import run_cli

app = typer.Typer(
    name="kaflite",
    rich_markup_mode=None,   # plain help, as Kafka's tools print it
    help="Kafka for Python users: an embedded cluster, a smart client, a Spark source.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("up")(up.up)
app.command("demo")(demo.demo)
app.command("connections")(connections.connections)
app.command("client-metrics")(client_metrics.client_metrics)
app.command("delegation-tokens")(delegation_tokens.delegation_tokens)
app.command("console")(console.console)
app.command("produce")(produce.produce)
app.command("proxy")(proxy.proxy)
app.command("consume")(consume.consume)
app.command("requests")(requests.requests)
app.command("doctor")(doctor.doctor)
app.command("bench")(bench.bench)
app.command("certs")(certs.certs)
app.add_typer(topics.app, name="topics")
app.add_typer(groups.app, name="groups")
app.add_typer(configs.app, name="configs")
app.add_typer(transactions.app, name="transactions")
app.add_typer(features.app, name="features")
app.add_typer(chaos.app, name="chaos")
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(users.app, name="users")
app.add_typer(acls.app, name="acls")
app.add_typer(quotas.app, name="quotas")


def _name_values(cmd: object) -> None:
    """Help shows a value's name (``--topic TOPIC``), never a Python type (``<str>``)."""
    for param in getattr(cmd, "params", []):
        if param.metavar is not None or getattr(param, "is_flag", False) or \
                getattr(param, "count", False):
            continue
        param.metavar = (param.name or "value").upper()
        if param.param_type_name == "argument":   # its name says it all: no "<list[str]>"
            param.display_type_rich = lambda ctx: None
    for sub in getattr(cmd, "commands", {}).values():
        _name_values(sub)


def command() -> TyperGroup:
    """The command line as ``main`` runs it, with value names in its help."""
    cmd = typer.main.get_command(app)
    assert isinstance(cmd, TyperGroup)
    _name_values(cmd)
    return cmd


def main() -> None:
    run_cli(command())
