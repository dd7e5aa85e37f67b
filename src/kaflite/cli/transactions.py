"""``kaflite transactions``: transactional ids, their producers and open transactions."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap

app = typer.Typer(rich_markup_mode=None, help="List and describe transactional ids (ListTransactions, "
                       "DescribeTransactions).", no_args_is_help=True)


@app.command("list")
def list_transactions(
    bootstrap: Bootstrap = FIND,
    state: Annotated[list[str] | None, typer.Option(
        "--state", "-s", help="only these states (Ongoing, CompleteCommit...)")] = None,
) -> None:
    """Every transactional id on every broker, with its producer id and state."""

    async def go() -> Any:
        from kaflite.client import Admin

        async with Admin({"bootstrap.servers": bootstrap,
                          "client.id": "kaflite-transactions"}) as a:
            return await a.list_transactions(states=state or ())

    table = Table("transactional id", "producer id", "state")
    for tid, pid, st in run(go()):
        table.add_row(tid, str(pid), st)
    Console().print(table)


@app.command("describe")
def describe(transactional_id: str, bootstrap: Bootstrap = FIND) -> None:
    """Producer id and epoch, state, timeout and the partitions of the open transaction."""

    async def go() -> Any:
        from kaflite.client import Admin

        async with Admin({"bootstrap.servers": bootstrap,
                          "client.id": "kaflite-transactions"}) as a:
            return (await a.describe_transactions([transactional_id]))[transactional_id]

    d = run(go())
    console = Console()
    console.print(f"{d.transactional_id}: {d.state}, producer id {d.producer_id} epoch "
                  f"{d.producer_epoch}, timeout {d.timeout_ms} ms")
    table = Table("topic", "partition")
    for tp in d.partitions:
        table.add_row(tp.topic, str(tp.partition))
    console.print(table)
