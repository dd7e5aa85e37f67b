"""``kaflite demo``: what is really inside poll(), live, on an embedded cluster.

The run: start a cluster (in its own thread), create ``events`` and
``results``, start the clickstream producer and a group of two consumers,
optionally the Spark pipeline, show the live view while the tour of failures
plays, then stop producing, let the consumers drain, and check:

* every acknowledged record was consumed (lost must be 0);
* the Spark aggregates match a plain computation over the same events;
* each client's connections and roles, from the brokers and from the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from kaflite._loop import run
from kaflite.cluster import Cluster
from kaflite.demo.spark_step import SparkStep
from kaflite.demo.tour import Tour
from kaflite.demo.view import plain_line, render, take_snapshot
from kaflite.demo.workload import Workload

__all__ = ["DemoOptions", "run_demo"]

EVENTS, RESULTS, GROUP = "events", "results", "demo-group"


@dataclass
class DemoOptions:
    brokers: int = 3
    duration: float = 60.0
    data_dir: Path | None = None
    spark: bool = True
    faults: bool = True
    json_out: bool = False
    rate: int = 400


async def _main(opts: DemoOptions, cluster: Cluster, console: Console) -> dict[str, Any]:
    bootstrap = cluster.bootstrap_servers
    await asyncio.to_thread(cluster.create_topic, EVENTS, 6, min(3, opts.brokers))
    await asyncio.to_thread(cluster.create_topic, RESULTS, 3, min(3, opts.brokers))
    workload = Workload(bootstrap, EVENTS, GROUP, rate=opts.rate)
    await workload.start(consumers=2)
    tour = Tour(cluster, workload, EVENTS, GROUP, victim=opts.brokers - 1) \
        if opts.faults and opts.brokers >= 3 else None
    spark = SparkStep(bootstrap, EVENTS, RESULTS, enabled=opts.spark)
    await asyncio.to_thread(spark.start)
    start = time.monotonic()
    tour_task = asyncio.create_task(tour.run(opts.duration, start)) if tour else None
    tty = console.is_terminal and not opts.json_out
    live = Live(console=console, refresh_per_second=2, transient=False) if tty else None
    try:
        if live is not None:
            live.start()
        last_line = 0.0
        while time.monotonic() - start < opts.duration:
            snap = await asyncio.to_thread(take_snapshot, cluster, workload, tour, EVENTS,
                                           spark.describe())
            if live is not None:
                live.update(render(snap))
            elif not opts.json_out and time.monotonic() - last_line >= 5:
                print(plain_line(snap), flush=True)
                last_line = time.monotonic()
            await asyncio.sleep(1.0)
        if tour_task is not None:
            await asyncio.wait_for(tour_task, 120)
        await workload.stop_producing()
        await workload.drain(timeout=90)
        spark_result = await asyncio.to_thread(spark.finish, workload.events)
        snap = await asyncio.to_thread(take_snapshot, cluster, workload, tour, EVENTS,
                                       spark.describe())
        if live is not None:
            live.update(render(snap))
    finally:
        if live is not None:
            live.stop()
        await workload.close()
        await asyncio.to_thread(spark.stop)
    return _summary(workload, tour, snap, spark_result, opts)


def _summary(workload: Workload, tour: Tour | None, snap: dict[str, Any],
             spark: dict[str, Any], opts: DemoOptions) -> dict[str, Any]:
    acked = workload.acked
    consumed = workload.consumed()
    total_seen = sum(c.records for c in workload.consumers)
    clients = {
        cid: {"connections": c.connections, "reported_by_client": snap["reported"].get(cid),
              "fan_out": {str(k): v for k, v in c.fan_out.items()}, "roles": c.roles,
              "heartbeat_interval_ms": c.heartbeat_interval_ms,
              "commit_interval_ms": c.commit_interval_ms, "fetch_rate": c.fetch_rate}
        for cid, c in snap["clients"].items()
    }
    steps = [{"step": s.title, "expect": s.expect, "status": s.status, "happened": s.outcome,
              "observed": s.observed} for s in (tour.steps if tour else [])]
    checks = {
        "no_loss": bool(acked) and not (acked - consumed),
        "no_failed_sends": not workload.failed,
        "spark": spark["ok"] if opts.spark else True,
        "tour_complete": all(s["status"] == "done" for s in steps),
        "consumers_seen_by_registry": all(
            f"consumer-{i + 1}" in clients for i in range(len(workload.consumers))),
    }
    return {
        "produced": len(acked),
        "consumed": len(consumed & acked),
        "lost": len(acked - consumed),
        "duplicates": total_seen - len(consumed),
        "failed_sends": workload.failed[:10],
        "spark": spark,
        "clients": clients,
        "tour": steps,
        "checks": checks,
        "ok": all(checks.values()),
    }


def _print_summary(console: Console, summary: dict[str, Any]) -> None:
    console.rule("summary")
    console.print(f"produced {summary['produced']}  consumed {summary['consumed']}  "
                  f"lost {summary['lost']}  duplicates {summary['duplicates']}")
    console.print(f"spark: {summary['spark']['detail']}")
    for cid, c in sorted(summary["clients"].items()):
        console.print(f"{cid}: {c['connections']} connections "
                      f"(client reports {c['reported_by_client']}), roles {c['roles']}")
    for step in summary["tour"]:
        console.print(f"tour: {step['step']}: {step['happened']}")
        for seen in step["observed"][-2:]:
            console.print(f"    seen: {seen}")
    for name, ok in summary["checks"].items():
        console.print(f"{'[green]✓' if ok else '[red]✗'}[/] {name}")


def run_demo(opts: DemoOptions) -> int:
    console = Console(stderr=opts.json_out)
    data_dir = opts.data_dir
    tmp = None
    if data_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kaflite-demo-")
        data_dir = Path(tmp.name)
    config = {"group.initial.rebalance.delay.ms": 500, "replica.lag.time.max.ms": 5000,
              "offsets.topic.num.partitions": 10, "min.insync.replicas": 1}
    try:
        with Cluster(brokers=opts.brokers, data_dir=data_dir, config=config) as cluster:
            if not opts.json_out:
                console.print(f"kaflite demo: {opts.brokers} brokers at "
                              f"{cluster.bootstrap_servers}, {opts.duration:.0f}s"
                              + ("" if opts.spark else " (Spark off: --no-spark)"))
            summary = run(_main(opts, cluster, console))
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.cleanup()
    if opts.json_out:
        json.dump(summary, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    else:
        _print_summary(console, summary)
    return 0 if summary["ok"] else 1
