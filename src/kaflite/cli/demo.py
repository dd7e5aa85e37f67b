"""``kaflite demo``: what is really inside poll(), live, on the embedded cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def demo(
    brokers: Annotated[int, typer.Option(help="brokers in the embedded cluster")] = 3,
    duration: Annotated[float, typer.Option(help="seconds of traffic and faults")] = 60.0,
    data_dir: Annotated[Path | None, typer.Option(
        help="keep the cluster's data here (default: a temporary directory)")] = None,
    spark: Annotated[bool, typer.Option(
        "--spark/--no-spark", help="run the Spark pipeline (needs Java 17+)")] = True,
    faults: Annotated[bool, typer.Option(
        "--faults/--no-faults", help="play the scripted tour of failures")] = True,
    json_out: Annotated[bool, typer.Option(
        "--json", help="print a machine-readable summary on stdout (the story goes to stderr)")
    ] = False,
    group_protocol: Annotated[str, typer.Option(
        help="the consumers' group.protocol: classic (JoinGroup/SyncGroup) or consumer "
             "(KIP-848)")] = "classic",
    log_file: Annotated[Path | None, typer.Option(
        help="where Spark's and Java's logs go (default: <data-dir>/logs/demo.log, or a new "
             "temporary directory)")] = None,
    proxy: Annotated[bool, typer.Option(
        "--proxy", help="instead: a producer behind a shared VIP (a naive proxy) and its "
                        "NOT_LEADER_OR_FOLLOWER storm, kaflite doctor naming it from the "
                        "request log, then the same producer through kaflite proxy and "
                        "the doctor finding nothing (about 15 s; no Spark)")] = False,
) -> None:
    """Run the main job: a cluster, a producer, a consumer group, Spark, and a tour of faults."""
    if proxy:
        from kaflite.demo.vip_story import run_vip_story

        story = run_vip_story(say=typer.echo)
        raise typer.Exit(0 if story.ok else 1)
    from kaflite.demo import DemoOptions, run_demo

    if group_protocol not in ("classic", "consumer"):
        raise typer.BadParameter("classic or consumer", param_hint="--group-protocol")

    raise typer.Exit(run_demo(DemoOptions(
        brokers=brokers, duration=duration, data_dir=data_dir, spark=spark, faults=faults,
        json_out=json_out, log_file=log_file, group_protocol=group_protocol)))
