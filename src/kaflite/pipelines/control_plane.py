"""The control-plane pipeline: the request log in, the doctor's findings out, on Spark.

    kaflite pipeline control-plane -b localhost:9092 [--findings __kaflite_findings] \\
        [--master local[*]] [--checkpoint DIR] [--available-now] [--timeout SECONDS]

A Structured Streaming query reads ``__kaflite_requests`` (one record per request a
broker or kaflite's proxy served: ``kaflite.cluster.request_log``) through the
``kaflite`` source. Each micro-batch goes, through ``foreachBatch``, to the driver,
where one ``kaflite.doctor.Analyzer`` lives for the whole query: the batch's records
are decoded, sorted by time and fed to it, and the findings it then supports (all of
them, not only the batch's: the analyzer's answer for everything read so far) are
written to the findings topic, one JSON record per finding, keyed by its subject
(``client app-1 @ 10.0.0.7``, or ``group orders`` for a group's findings)::

    {"report_time": 1700000000123, "log_time": 1700000000.05, "batch": 3,
     "name": "vip-bootstrap", "subject": "client app-1 @ 10.0.0.7",
     "client_id": "app-1", "group": null, "explanation": "...",
     "counts": {"not_leader_or_follower": 41, ...}, "records": [...]}

The checks are the doctor's own (``kaflite.doctor``): this module only carries
records to the analyzer and findings out of it, so ``kaflite doctor``, the console's
Health view and this pipeline agree on every finding.

Where the state lives. The analyzer's state (connections, refreshes, recoveries,
generations per client and group) is held in the driver's memory, not in Spark's
state store: a finding is a judgement over a client's whole history (its first
metadata request, the broker that refused it before), which is one Python object,
not a keyed aggregate. The checkpoint (``--checkpoint``) keeps only the offsets the
query has read. So a query restarted from its checkpoint starts with an empty
analyzer; to have its findings cover what came before, ``start`` first rebuilds the
state with a batch read of the log from its earliest retained offsets up to the
offsets the checkpoint had committed (``committed_offsets``). What the log's
retention has deleted by then is gone from the rebuilt state too.

Both reads run with ``failOnDataLoss=false``: the request log keeps a day by default,
and a pipeline that was down longer than that should go on with what is left (Spark
logs a warning for the records it could not read), not fail.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kaflite.cluster.request_log import REQUEST_LOG_TOPIC
from kaflite.doctor import DEFAULT, Analyzer, Finding, Thresholds
from kaflite.doctor.reader import DOCTOR_CLIENT_ID, decode
from kaflite.pipelines._streaming import StreamSettings, await_queries, streaming_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["CLIENT_ID", "FINDINGS_TOPIC", "ControlPlane", "Settings", "Started",
           "committed_offsets", "finding_record", "run", "start"]

FINDINGS_TOPIC = "__kaflite_findings"
CLIENT_ID = "kaflite-control-plane"     # the pipeline's own clients (source and sink)


def finding_record(finding: Finding, report_time_ms: int, log_time: float | None,
                   batch: int) -> tuple[str, str]:
    """The key and JSON value a finding is written as."""
    value = {"report_time": report_time_ms, "log_time": log_time, "batch": batch,
             **finding.to_dict()}
    return finding.subject, json.dumps(value, separators=(",", ":"), default=str)


class ControlPlane:
    """The driver's side of the pipeline: one analyzer, fed batch after batch.

    It does no I/O: ``feed`` takes the request log values of one micro-batch and
    returns the findings for everything fed so far; ``new`` tells which of them were
    not reported before (a finding is known by its name and subject).
    """

    def __init__(self, thresholds: Thresholds = DEFAULT) -> None:
        self.analyzer = Analyzer(thresholds, ignore_clients={CLIENT_ID, DOCTOR_CLIENT_ID})
        self.batches = 0
        self.values = 0
        self._reported: set[tuple[str, str]] = set()

    def feed(self, values: Iterable[bytes | bytearray | memoryview | None]) -> list[Finding]:
        got = list(values)
        self.values += len(got)
        self.batches += 1
        self.analyzer.feed(decode(got))
        return self.analyzer.findings()

    def new(self, findings: Iterable[Finding]) -> list[Finding]:
        fresh = [f for f in findings if (f.name, f.subject) not in self._reported]
        self._reported.update((f.name, f.subject) for f in fresh)
        return fresh

    def records(self, findings: Iterable[Finding], batch: int,
                now_ms: int | None = None) -> list[tuple[str, str]]:
        report_time = int(time.time() * 1000) if now_ms is None else now_ms
        return [finding_record(f, report_time, self.analyzer.last, batch) for f in findings]


def committed_offsets(checkpoint: str | Path) -> dict[str, dict[str, int]] | None:
    """The source offsets a checkpoint's last committed micro-batch read up to, as
    ``{topic: {partition: offset}}`` (the ``endingOffsets`` option's form), or None
    when it has committed none.

    Spark writes ``offsets/<batch>`` when it plans a batch (a version line, the
    batch's metadata, then each source's end offsets as JSON, one line per source) and
    ``commits/<batch>`` when the batch's sink is done; the kaflite source's offsets
    are ``{topic: {partition: offset}}``, as Spark's Kafka source's.
    """
    root = Path(checkpoint)
    commits = [int(p.name) for p in (root / "commits").glob("*") if p.name.isdigit()]
    if not commits:
        return None
    lines = (root / "offsets" / str(max(commits))).read_text().splitlines()
    if len(lines) < 3:
        return None
    parsed: Any = json.loads(lines[2])
    if not isinstance(parsed, dict):
        return None
    return {str(t): {str(p): int(o) for p, o in parts.items()}
            for t, parts in parsed.items() if isinstance(parts, dict)}


def _write(spark: SparkSession, bootstrap: str, topic: str,
           rows: list[tuple[str, str]]) -> None:
    (spark.createDataFrame(rows, "key string, value string").write.format("kaflite")
     .mode("append")
     .option("kafka.bootstrap.servers", bootstrap).option("kafka.client.id", CLIENT_ID)
     .option("topic", topic).save())


def _rebuild(spark: SparkSession, plane: ControlPlane, bootstrap: str, requests: str,
             upto: dict[str, dict[str, int]]) -> int:
    """Feed ``plane`` the log from its earliest offsets up to ``upto`` (a batch read)."""
    ending = {requests: upto.get(requests, {})}
    if not ending[requests]:
        return 0
    values = [row.value for row in spark.read.format("kaflite")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("kafka.client.id", CLIENT_ID).option("subscribe", requests)
              .option("startingOffsets", "earliest").option("failOnDataLoss", "false")
              .option("endingOffsets", json.dumps(ending)).load().select("value").collect()]
    plane.analyzer.feed(decode(values))
    plane.values += len(values)
    return len(values)


@dataclass(frozen=True)
class Started:
    query: StreamingQuery
    plane: ControlPlane
    rebuilt: int            # request log records read again from before the checkpoint


def start(spark: SparkSession, bootstrap: str, checkpoint: str, *,
          requests: str = REQUEST_LOG_TOPIC, findings: str = FINDINGS_TOPIC,
          starting_offsets: str = "earliest", available_now: bool = False,
          trigger_interval: str = "10 seconds", max_offsets_per_trigger: int | None = None,
          thresholds: Thresholds = DEFAULT, say: Callable[[str], None] = print) -> Started:
    """Start the query; the caller waits for it or stops it. ``say`` gets one line per
    finding the first time it is reported.

    With ``available_now`` on Spark 4.0/4.1 this enables Spark's AvailableNow wrapper on
    ``spark``'s session (``kaflite.spark.enable_available_now``), as the clickstream
    pipeline does, and leaves it enabled: without it a run after a stop that left a
    batch uncommitted would repeat that batch and read nothing newer.
    """
    if available_now:
        from kaflite.spark import enable_available_now

        enable_available_now(spark)
    plane = ControlPlane(thresholds)
    upto = committed_offsets(checkpoint)
    rebuilt = _rebuild(spark, plane, bootstrap, requests, upto) if upto else 0
    if rebuilt:
        plane.new(plane.analyzer.findings())   # reported before the restart

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        current = plane.feed(row.value for row in batch.select("value").collect())
        for f in plane.new(current):
            say(f"control-plane: {f.name} {f.subject}: {f.explanation}")
        if current:
            _write(batch.sparkSession, bootstrap, findings, plane.records(current, batch_id))

    reader = (spark.readStream.format("kaflite")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("kafka.client.id", CLIENT_ID)
              .option("subscribe", requests)
              .option("startingOffsets", starting_offsets)
              .option("failOnDataLoss", "false"))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    writer = (reader.load().writeStream.queryName(f"control-plane-to-{findings}")
              .foreachBatch(each_batch).option("checkpointLocation", checkpoint))
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=trigger_interval))
    return Started(writer.start(), plane, rebuilt)


@dataclass(frozen=True)
class Settings(StreamSettings):
    """What ``run`` runs: ``kaflite pipeline control-plane``'s options."""

    requests: str = REQUEST_LOG_TOPIC
    findings: str = FINDINGS_TOPIC


def run(settings: Settings, say: Callable[[str], None] = print) -> int:
    """Run the query on a new SparkSession until it ends (``available_now``),
    ``timeout`` seconds pass, or Ctrl-C; then stop it (``streaming_session``).
    Returns 0, or 1 if it failed."""
    s = settings
    with streaming_session("kaflite-control-plane", s) as (spark, checkpoint):
        started = start(spark, s.bootstrap, checkpoint, requests=s.requests,
                        findings=s.findings, starting_offsets=s.starting_offsets,
                        available_now=s.available_now, trigger_interval=s.trigger_interval,
                        max_offsets_per_trigger=s.max_offsets_per_trigger, say=say)
        say(f"control-plane: {s.requests} → {s.findings} (checkpoint {checkpoint})"
            + (f"; state rebuilt from {started.rebuilt} earlier requests"
               if started.rebuilt else ""))
        failed, timed_out = await_queries([started.query], s.timeout)
        plane = started.plane
        names = sorted({f.name for f in plane.analyzer.findings()})
        say(f"control-plane: read {plane.values} requests in {plane.batches} batches; "
            + (f"findings: {', '.join(names)}" if names else "no findings")
            + (f"; stopped after {s.timeout:g} s" if timed_out and s.timeout else ""))
    for line in failed:
        say(f"control-plane: query failed: {line}")
    return 1 if failed else 0
