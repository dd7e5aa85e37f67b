"""``kaflite groups``: consumer groups, their members, committed offsets and lag."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from kaflite._loop import run
from kaflite.cli._options import FIND, Bootstrap

app = typer.Typer(rich_markup_mode=None, help="List and describe consumer groups, with lag.", no_args_is_help=True)


@app.command("list")
def list_groups(bootstrap: Bootstrap = FIND) -> None:
    """Every group with its state and protocol type."""

    async def go() -> Any:
        from kaflite.client import Admin

        async with Admin({"bootstrap.servers": bootstrap, "client.id": "kaflite-groups"}) as a:
            return await a.list_groups()

    table = Table("group", "protocol type", "state")
    for row in sorted(run(go())):
        table.add_row(*map(str, row))
    Console().print(table)


@app.command("describe")
def describe(group: str, bootstrap: Bootstrap = FIND) -> None:
    """Members and assignments, then per partition: committed offset, end and lag."""

    async def go() -> Any:
        from kaflite.client import Admin

        async with Admin({"bootstrap.servers": bootstrap, "client.id": "kaflite-groups"}) as a:
            desc = (await a.describe_groups([group]))[group]
            committed = await a.list_group_offsets(group)
            ends = await a.list_offsets({tp: "latest" for tp in committed}) if committed else {}
            return desc, committed, ends

    desc, committed, ends = run(go())
    console = Console()
    console.print(f"group {group}: {desc.state}, protocol {desc.protocol or '-'}")
    members = Table("member", "client", "host", "assignment")
    for m in desc.members:
        members.add_row(m.member_id, getattr(m, "client_id", ""), getattr(m, "client_host", ""),
                        ", ".join(f"{tp.topic}-{tp.partition}"
                                  for tp in getattr(m, "assignment", []) or []))
    console.print(members)
    lag = Table("topic", "partition", "committed", "end", "lag")
    for tp, om in sorted(committed.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        end = ends.get(tp)
        end_offset = getattr(end, "offset", end)
        lag_value = "-" if end_offset is None else str(max(0, end_offset - om.offset))
        lag.add_row(tp.topic, str(tp.partition), str(om.offset), str(end_offset), lag_value)
    console.print(lag)
