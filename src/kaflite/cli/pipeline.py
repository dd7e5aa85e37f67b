"""``kaflite pipeline``: the example Spark pipelines, from one topic to another.

    kaflite produce -t clicks --create --generate clickstream --count 5000
    kaflite pipeline clickstream -b 127.0.0.1:9092 --create --available-now
    kaflite pipeline control-plane -b 127.0.0.1:9092 --available-now

``clickstream`` runs ``kaflite.pipelines.clickstream``: windowed per-page
aggregates of the events topic, written to the results topic. ``control-plane``
runs ``kaflite.pipelines.control_plane``: the doctor's analyzer over the request
log (``__kaflite_requests``), its findings written to ``__kaflite_findings``
(``docs/doctor.md``). Each needs the
``spark`` extra and Java 17+. Spark's logs go to a file (``--log-file``; named at the
start), as the demo's do: the terminal shows the pipeline's own lines.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from kaflite._loop import run as run_async
from kaflite.cli._errors import UnknownTopic
from kaflite.cli._options import FIND, Bootstrap
from kaflite.cli._topics import topic_partitions

app = typer.Typer(help="Run an example pipeline on Spark (needs pyspark and Java 17+).",
                  no_args_is_help=True, rich_markup_mode=None)

# the options every streaming pipeline takes (kaflite.pipelines._streaming.StreamSettings)
Master = Annotated[str, typer.Option(help="Spark master")]
StartingOffsets = Annotated[str, typer.Option(
    help="earliest or latest, when there is no checkpoint")]
MaxOffsetsPerTrigger = Annotated[int | None, typer.Option(
    help="cap on the records of one micro-batch")]
Checkpoint = Annotated[str | None, typer.Option(
    help="checkpoint directory, to resume from (default: a temporary one, removed)")]
AvailableNow = Annotated[bool, typer.Option(
    "--available-now", help="process what the input topic holds now, then stop")]
TriggerInterval = Annotated[str, typer.Option(
    help="micro-batch interval without --available-now")]
Timeout = Annotated[float | None, typer.Option(
    help="stop after this many seconds (default: when the queries end, or Ctrl-C)")]
Conf = Annotated[list[str] | None, typer.Option(
    "--conf", help="a Spark setting as key=value (repeatable), as spark-submit's")]
LogFile = Annotated[Path | None, typer.Option(
    "--log-file", help="Spark's logs (default: pipeline.log in a new temporary "
    "directory, named at the start)", show_default=False)]


def spark_conf(items: list[str] | None) -> dict[str, str]:
    """``--conf key=value`` options (as spark-submit's) as a dict."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected key=value, got {item!r}", param_hint="--conf")
        out[key.strip()] = value
    return out


@app.command("clickstream")
def clickstream(
    bootstrap: Bootstrap = FIND,
    events: Annotated[str, typer.Option(help="topic of JSON click events")] = "clicks",
    results: Annotated[str, typer.Option(help="topic for the aggregates")] = "clicks-per-minute",
    create: Annotated[bool, typer.Option(
        "--create", help="create the results topic if it does not exist")] = False,
    master: Master = "local[*]",
    window: Annotated[str, typer.Option(help="tumbling event-time window")] = "1 minute",
    watermark: Annotated[str, typer.Option(help="how late an event may be")] = "1 minute",
    starting_offsets: StartingOffsets = "earliest",
    max_offsets_per_trigger: MaxOffsetsPerTrigger = None,
    checkpoint: Checkpoint = None,
    parquet: Annotated[str | None, typer.Option(
        help="also write the aggregates here as Parquet")] = None,
    available_now: AvailableNow = False,
    trigger_interval: TriggerInterval = "10 seconds",
    timeout: Timeout = None,
    conf: Conf = None,
    log_file: LogFile = None,
) -> None:
    """Per-page counts and revenue in event-time windows, from --events to --results."""
    if starting_offsets not in ("earliest", "latest"):
        raise typer.BadParameter("earliest or latest", param_hint="--starting-offsets")
    settings = spark_conf(conf)
    try:
        run_async(topic_partitions(bootstrap, events, False))
    except UnknownTopic:
        typer.echo(f"kaflite: Unknown topic or partition: {events}", err=True)
        typer.echo(f"hint: write events to it first: kaflite produce -t {events} --create "
                   "--generate clickstream", err=True)
        raise typer.Exit(1) from None
    run_async(topic_partitions(bootstrap, results, create))

    def load() -> Callable[[str], int]:
        from kaflite.pipelines.clickstream import Settings, run

        return lambda logs: run(Settings(
            bootstrap=bootstrap, events=events, results=results, master=master, window=window,
            watermark=watermark, starting_offsets=starting_offsets,
            max_offsets_per_trigger=max_offsets_per_trigger, checkpoint=checkpoint,
            parquet=parquet, available_now=available_now, trigger_interval=trigger_interval,
            timeout=timeout, conf=settings, log_file=logs), say=typer.echo)

    run_pipeline("clickstream", log_file, load)


@app.command("control-plane")
def control_plane(
    bootstrap: Bootstrap = FIND,
    findings: Annotated[str, typer.Option(
        help="topic for the findings (created if it does not exist)")] = "__kaflite_findings",
    requests: Annotated[str, typer.Option(
        help="the request log's topic")] = "__kaflite_requests",
    master: Master = "local[*]",
    starting_offsets: StartingOffsets = "earliest",
    max_offsets_per_trigger: MaxOffsetsPerTrigger = None,
    checkpoint: Checkpoint = None,
    available_now: AvailableNow = False,
    trigger_interval: TriggerInterval = "10 seconds",
    timeout: Timeout = None,
    conf: Conf = None,
    log_file: LogFile = None,
) -> None:
    """The doctor's findings from the request log, per micro-batch, to --findings."""
    if starting_offsets not in ("earliest", "latest"):
        raise typer.BadParameter("earliest or latest", param_hint="--starting-offsets")
    settings = spark_conf(conf)
    try:
        run_async(topic_partitions(bootstrap, requests, False))
    except UnknownTopic:
        from kaflite.doctor.reader import how_to_enable

        typer.echo(f"kaflite: the request log topic {requests} does not exist on "
                   f"{bootstrap}", err=True)
        typer.echo(f"hint: {how_to_enable()}", err=True)
        raise typer.Exit(1) from None
    run_async(topic_partitions(bootstrap, findings, True))

    def load() -> Callable[[str], int]:
        from kaflite.pipelines.control_plane import Settings, run

        return lambda logs: run(Settings(
            bootstrap=bootstrap, requests=requests, findings=findings, master=master,
            starting_offsets=starting_offsets, max_offsets_per_trigger=max_offsets_per_trigger,
            checkpoint=checkpoint, available_now=available_now,
            trigger_interval=trigger_interval, timeout=timeout, conf=settings,
            log_file=logs), say=typer.echo)

    run_pipeline("control-plane", log_file, load)


def run_pipeline(name: str, log_file: Path | None,
                 load: Callable[[], Callable[[str], int]]) -> NoReturn:
    """Run a pipeline: ``load`` imports it (PySpark missing: exit 1 with a hint) and gives
    the function that runs it with the path of Spark's log file; Spark's and Python's
    logging go to that file (named on the terminal). Exits with the pipeline's code."""
    try:
        start = load()
        from kaflite.spark import NoJavaError
    except ImportError as exc:   # no pyspark or pyarrow
        typer.echo(f"kaflite: the pipeline needs PySpark ({exc})", err=True)
        typer.echo("hint: pip install 'kaflite[spark]'", err=True)
        raise typer.Exit(1) from None
    from kaflite.demo.logs import capture_python_logging, choose_log_file

    logs = choose_log_file(log_file, None, name="pipeline")
    typer.echo(f"{name}: Spark's logs go to {logs}")
    handler = capture_python_logging(logs)   # py4j's and pyspark's warnings too
    try:
        code = start(str(logs))
    except NoJavaError as exc:
        typer.echo(f"kaflite: {exc}", err=True)
        typer.echo("hint: install a JDK 17+ (e.g. apt-get install openjdk-17-jre-headless) "
                   "or set JAVA_HOME", err=True)
        raise typer.Exit(1) from None
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    raise typer.Exit(code)
