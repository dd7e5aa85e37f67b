"""``kaflite topics``: list, describe, create and delete topics on any cluster."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap

app = typer.Typer(rich_markup_mode=None, help="List, describe, create and delete topics (kaflite or any Kafka).",
                  no_args_is_help=True)


async def _admin_call(bootstrap: str, method: str, *args: Any) -> Any:
    from kaflite.client import Admin

    async with Admin({"bootstrap.servers": bootstrap, "client.id": "kaflite-topics"}) as admin:
        return await getattr(admin, method)(*args)


@app.command("list")
def list_topics(bootstrap: Bootstrap = FIND,
                internal: Annotated[bool, typer.Option(help="include internal topics")] = False
                ) -> None:
    """Print every topic name."""
    for name in sorted(run(_admin_call(bootstrap, "list_topics", internal))):
        typer.echo(name)


@app.command("describe")
def describe(topics: Annotated[list[str], typer.Argument(help="topic names")],
             bootstrap: Bootstrap = FIND) -> None:
    """Partitions with leader, leader epoch, replicas and ISR."""
    described = run(_admin_call(bootstrap, "describe_topics", topics))
    table = Table("topic", "partition", "leader", "epoch", "replicas", "isr")
    for name, md in sorted(described.items()):
        for p in sorted(md.partitions, key=lambda p: p.partition):
            table.add_row(name, str(p.partition), str(p.leader), str(p.leader_epoch),
                          ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)))
    Console().print(table)


@app.command("create")
def create(name: str, bootstrap: Bootstrap = FIND,
           partitions: Annotated[int, typer.Option("--partitions", "-p")] = 1,
           replication_factor: Annotated[int, typer.Option("--replication-factor", "-r")] = 1,
           config: Annotated[list[str] | None, typer.Option(
               "--config", "-c", help="topic config as name=value (repeatable)")] = None
           ) -> None:
    """Create a topic."""
    from kaflite.client import NewTopic

    configs = dict(item.split("=", 1) for item in (config or []))
    run(_admin_call(bootstrap, "create_topics",
                    [NewTopic(name, partitions, replication_factor, configs)]))
    typer.echo(f"created {name} ({partitions} partitions, replication factor "
               f"{replication_factor})")


@app.command("delete")
def delete(names: list[str], bootstrap: Bootstrap = FIND) -> None:
    """Delete topics."""
    run(_admin_call(bootstrap, "delete_topics", names))
    typer.echo(f"deleted {', '.join(names)}")
