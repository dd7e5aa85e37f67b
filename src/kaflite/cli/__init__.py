"""The ``kaflite`` command line: one module per command group."""

from __future__ import annotations

import typer

from kaflite.cli import (
    bench,
    chaos,
    configs,
    connections,
    consume,
    demo,
    groups,
    pipeline,
    produce,
    topics,
    transactions,
    up,
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
app.command("produce")(produce.produce)
app.command("consume")(consume.consume)
app.command("bench")(bench.bench)
app.add_typer(topics.app, name="topics")
app.add_typer(groups.app, name="groups")
app.add_typer(configs.app, name="configs")
app.add_typer(transactions.app, name="transactions")
app.add_typer(chaos.app, name="chaos")
app.add_typer(pipeline.app, name="pipeline")


def main() -> None:
    run_cli(app)
