"""``kaflite demo``: what is really inside poll(), live, on an embedded cluster.

The run: start a cluster (in its own thread), create ``events`` and
``results``, start the clickstream producer and a group of two consumers,
optionally the Spark pipeline; then the records flow (from the "traffic flows"
phase on, not while Spark starts) and the live view shows them while the tour
of failures plays; then stop producing, let the consumers drain, and check:

* every acknowledged record was consumed (lost must be 0);
* the Spark aggregates match a plain computation over the same events;
* each client's connections and roles, from the brokers and from the client.

It tells its story as it goes: a plan first (what it starts, breaks and
checks), then each phase by name as it starts, then the summary, in lines of
at most 100 columns (``kaflite.demo.story``). Spark's and Java's logs go to a
file the plan and the summary name (``kaflite.demo.logs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.text import Text

from kaflite._loop import run
from kaflite.cluster import Cluster
from kaflite.demo.logs import capture_python_logging, choose_log_file
from kaflite.demo.spark_step import SparkStep
from kaflite.demo.story import WIDTH, Phases, fit, plan_lines, wrap
from kaflite.demo.summary import Summary, build_summary, summary_lines
from kaflite.demo.tour import Step, Tour, tour_steps
from kaflite.demo.view import Snapshot, render, status_lines, take_snapshot
from kaflite.demo.workload import Workload

if TYPE_CHECKING:
    from kaflite.cluster.http import HttpApi

__all__ = ["DemoOptions", "phase_titles", "run_demo"]

EVENTS, RESULTS, GROUP = "events", "results", "demo-group"
STATUS_EVERY = 5.0  # seconds between status lines without a terminal


@dataclass
class DemoOptions:
    brokers: int = 3
    duration: float = 60.0
    data_dir: Path | None = None
    spark: bool = True
    faults: bool = True
    json_out: bool = False
    rate: int = 400
    log_file: Path | None = None
    group_protocol: str = "classic"   # or "consumer" (KIP-848)

    @property
    def tour(self) -> bool:
        return self.faults and self.brokers >= 3

    @property
    def victim(self) -> int:
        return self.brokers - 1


def phase_titles(opts: DemoOptions) -> list[str]:
    """Every phase of the run, in order (the tour's steps among them)."""
    titles = [f"start a {opts.brokers}-broker cluster", "create the topics events and results",
              "start the producer and two consumers"]
    if opts.spark:
        titles.append("start the Spark streaming job")
    titles.append("traffic flows")
    if opts.tour:
        titles += [step.title for step in tour_steps(opts.victim)]
    titles.append("stop producing, let the consumers drain")
    if opts.spark:
        titles.append("check Spark's windows")
    titles.append("stop the clients" + (" and Spark" if opts.spark else ""))
    return titles


Say = Callable[[str], None]


def _tour_listener(phases: Phases, say: Say) -> Callable[[Step], None]:
    def tell(step: Step) -> None:
        if step.status == "running":
            phases.begin(step.title, f"expect: {step.expect}")
        else:
            for line in wrap(f"happened: {step.outcome}", indent="    ", subsequent="  "):
                say(line)
    return tell


async def _snapshot(cluster: Cluster, workload: Workload, tour: Tour | None,
                    spark: SparkStep) -> Snapshot:
    """The view's snapshot: the workload's counts here, on its loop, in one go (its
    callbacks run on this loop); Spark's status and the cluster's state in a thread."""
    progress = workload.progress()
    spark_text = await asyncio.to_thread(spark.describe)
    return await asyncio.to_thread(take_snapshot, cluster, workload, progress, tour, EVENTS,
                                   spark_text)


async def _main(opts: DemoOptions, cluster: Cluster, console: Console, phases: Phases,
                log_file: Path) -> Summary:
    say = phases.say
    bootstrap = cluster.bootstrap_servers
    phases.begin(phases.titles[1], "events: 6 partitions, results: 3, replication factor "
                 f"{min(3, opts.brokers)}")
    await asyncio.to_thread(cluster.create_topic, EVENTS, 6, min(3, opts.brokers))
    await asyncio.to_thread(cluster.create_topic, RESULTS, 3, min(3, opts.brokers))
    phases.begin(phases.titles[2], f"keyed clickstream events at {opts.rate}/s; consumers "
                 f"in group {GROUP} (group.protocol={opts.group_protocol})")
    workload = Workload(bootstrap, EVENTS, GROUP, rate=opts.rate,
                        group_protocol=opts.group_protocol)
    await workload.start(consumers=2)     # (the records flow from "traffic flows" on)
    tour = Tour(cluster, workload, EVENTS, GROUP, victim=opts.victim,
                listener=_tour_listener(phases, say)) if opts.tour else None
    spark = SparkStep(bootstrap, EVENTS, RESULTS, enabled=opts.spark, log_file=log_file)
    if opts.spark:
        phases.begin("start the Spark streaming job", "local[2]: events through the kaflite "
                     "source, per-page counts in 10s windows, into results")
    await asyncio.to_thread(spark.start)
    start = time.monotonic()
    phases.begin("traffic flows", f"{opts.rate} records/s for {opts.duration:.0f}s; status "
                 + ("live below" if console.is_terminal and not opts.json_out
                    else f"every {STATUS_EVERY:.0f}s"))
    workload.start_producing()
    tour_task = asyncio.create_task(tour.run(opts.duration, start)) if tour else None
    tty = console.is_terminal and not opts.json_out
    live = Live(console=console, refresh_per_second=2, transient=False) if tty else None
    try:
        if live is not None:
            live.start()
        last_line = 0.0
        while time.monotonic() - start < opts.duration:
            snap = await _snapshot(cluster, workload, tour, spark)
            if live is not None:
                live.update(render(snap, phases.current))
            elif time.monotonic() - last_line >= STATUS_EVERY:
                for line in status_lines(snap, phases.current):
                    say(line)
                last_line = time.monotonic()
            await asyncio.sleep(1.0)
        if tour_task is not None:
            await asyncio.wait_for(tour_task, 120)
        phases.begin("stop producing, let the consumers drain",
                     "then every acknowledged record must have been consumed")
        await workload.stop_producing()
        await workload.drain(timeout=90)
        if opts.spark:
            phases.begin("check Spark's windows",
                         "every window the watermark closed, against a plain count of the events")
        spark_result = await asyncio.to_thread(spark.finish, workload.events)
        snap = await _snapshot(cluster, workload, tour, spark)
        if live is not None:
            live.update(render(snap, phases.current))
    finally:
        if live is not None:
            live.stop()
        phases.begin(phases.titles[-1])
        await workload.close()
        await asyncio.to_thread(spark.stop)
    return build_summary(workload, tour, snap, spark_result, opts.spark, phases.started,
                         str(log_file))


async def _start_console(cluster: Cluster) -> tuple[HttpApi, str]:
    """The web console on loopback: port 9990 when free, else any free port; and why it
    is not on 9990 ("" when it is)."""
    from kaflite.cluster.http import HttpApi

    try:
        return await HttpApi(cluster, "127.0.0.1", 9990).start(), ""
    except OSError as exc:
        api = await HttpApi(cluster, "127.0.0.1", 0).start()
        why = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        return api, f" (port 9990 is {why})"     # (the line stays within 100 columns)


def run_demo(opts: DemoOptions) -> int:
    console = Console(stderr=opts.json_out, highlight=False)
    console.width = min(console.width, WIDTH)

    def say(line: str, style: str = "") -> None:
        console.print(Text(line, style=style), soft_wrap=True)

    log_file = choose_log_file(opts.log_file, opts.data_dir)
    handler = capture_python_logging(log_file)
    faults = [(step.at * opts.duration, step.title) for step in tour_steps(opts.victim)]
    for line in plan_lines(brokers=opts.brokers, duration=opts.duration, rate=opts.rate,
                           spark=opts.spark, faults=faults if opts.tour else [],
                           log_file=str(log_file)):
        say(line)
    phases = Phases(phase_titles(opts), say)
    data_dir = opts.data_dir
    tmp = None
    if data_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="kaflite-demo-")
        data_dir = Path(tmp.name)
    config = {"group.initial.rebalance.delay.ms": 500, "replica.lag.time.max.ms": 5000,
              "offsets.topic.num.partitions": 10, "min.insync.replicas": 1,
              # KIP-848 members heartbeat as often as the classic ones below do
              "group.consumer.heartbeat.interval.ms": 1000,
              "group.consumer.min.heartbeat.interval.ms": 1000,
              "group.consumer.session.timeout.ms": 10000,
              "group.consumer.min.session.timeout.ms": 10000}
    try:
        phases.begin(phases.titles[0])
        with Cluster(brokers=opts.brokers, data_dir=data_dir, config=config) as cluster:
            for line in wrap(f"brokers at {cluster.bootstrap_servers}", indent="    ",
                             subsequent="  "):
                say(line)
            api, moved = cluster.call(_start_console(cluster))
            say(fit(f"    console: {api.console_url}{moved}"))
            say("      open it to watch brokers, leaders, the group's lag, the client log and "
                "each fault live")
            try:
                summary = run(_main(opts, cluster, console, phases, log_file))
            finally:
                cluster.call(api.stop())
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.cleanup()
    console.rule("summary")
    for line, style in summary_lines(summary):
        say(line, style)
    if opts.json_out:
        json.dump(summary, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    return 0 if summary["ok"] else 1
