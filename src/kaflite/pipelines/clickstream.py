"""The example pipeline: clickstream events in, windowed aggregates out, on Spark.

    kaflite pipeline clickstream -b localhost:9092 [--events clicks] \\
        [--results clicks-per-minute] [--master local[*]] [--window "1 minute"] \\
        [--watermark "1 minute"] [--parquet DIR] [--available-now] [--timeout SECONDS]

    python -m kaflite.pipelines.clickstream --bootstrap localhost:9092 ...   (the same)

It reads the events topic with Structured Streaming through the ``kaflite``
source. Each event is a JSON object (``kaflite.pipelines.events``, which
``kaflite produce --generate clickstream`` writes)::

    {"user": "user-017", "page": "/cart", "action": "click", "amount": 0.0,
     "ts": 1700000000123}

``ts`` is the event time (epoch milliseconds). The pipeline counts, per page
and per tumbling event-time window, the events, the views, the clicks and the
purchases, and sums the purchase amounts. A watermark bounds how late an
event may arrive; in append mode (the default) a window's row is written once,
when the watermark passes the window's end, so each result is final. Results
go to the results topic through the ``kaflite`` sink, keyed by
``page|window start``, as JSON::

    {"page": "/cart", "window_start": 1700000040000, "window_end": 1700000100000,
     "events": 12, "views": 7, "clicks": 4, "purchases": 1, "revenue": 19.99}

With ``--parquet DIR`` the same rows are also written as Parquet files (a
second streaming query over the same source, with its own checkpoint).

``--available-now`` processes what the topic holds at the start, emits every
window the watermark closes, then stops (Trigger.AvailableNow). Spark 4.0/4.1
run AvailableNow over a Python source as a single batch, after which no batch
runs to emit the windows its watermark closed; there the pipeline enables
Spark's AvailableNow wrapper for the session (``kaflite.spark
.enable_available_now``), which reads the same data and adds those batches,
so the results are those of Spark 4.2+.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflite.pipelines._streaming import StreamSettings, await_queries, streaming_session
from kaflite.pipelines.events import EVENT_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

__all__ = ["EVENT_SCHEMA", "Settings", "aggregates", "build_parser", "main", "run", "start"]



def aggregates(spark: SparkSession, bootstrap: str, events: str, *, window: str = "1 minute",
               watermark: str = "1 minute", starting_offsets: str = "earliest",
               max_offsets_per_trigger: int | None = None) -> DataFrame:
    """The streaming DataFrame of per-page window aggregates (columns ``key``, ``value``...)."""
    from pyspark.sql import functions as F

    reader = (spark.readStream.format("kaflite")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", events)
              .option("startingOffsets", starting_offsets))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    parsed = (reader.load()
              .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
              .select("e.*")
              .where(F.col("page").isNotNull() & F.col("ts").isNotNull())
              .withColumn("event_time", F.timestamp_millis("ts")))
    counted = (parsed.withWatermark("event_time", watermark)
               .groupBy(F.window("event_time", window).alias("w"), "page")
               .agg(F.count(F.lit(1)).alias("events"),
                    F.sum((F.col("action") == "view").cast("long")).alias("views"),
                    F.sum((F.col("action") == "click").cast("long")).alias("clicks"),
                    F.sum((F.col("action") == "purchase").cast("long")).alias("purchases"),
                    F.round(F.sum(F.when(F.col("action") == "purchase", F.col("amount"))
                                  .otherwise(0.0)), 2).alias("revenue")))
    out = counted.select(
        "page",
        F.unix_millis(F.col("w.start")).alias("window_start"),
        F.unix_millis(F.col("w.end")).alias("window_end"),
        "events", "views", "clicks", "purchases", "revenue")
    return out.select(
        F.concat_ws("|", "page", F.col("window_start").cast("string")).alias("key"),
        F.to_json(F.struct(*[c for c in out.columns])).alias("value"),
        *out.columns)


def start(spark: SparkSession, bootstrap: str, events: str, results: str, checkpoint: str, *,
          window: str = "1 minute", watermark: str = "1 minute",
          starting_offsets: str = "earliest", parquet: str | None = None,
          available_now: bool = False, trigger_interval: str = "10 seconds",
          max_offsets_per_trigger: int | None = None, output_mode: str = "append") -> list[StreamingQuery]:
    """Start the pipeline's streaming queries; returns them (the caller waits or stops).

    With ``available_now`` on Spark 4.0/4.1 this enables Spark's AvailableNow
    wrapper on ``spark``'s session (``kaflite.spark.enable_available_now``),
    and leaves it enabled: the engine reads the setting when a query starts
    running, after this function has returned.
    """
    if available_now:
        from kaflite.spark import enable_available_now

        enable_available_now(spark)
    df = aggregates(spark, bootstrap, events, window=window, watermark=watermark,
                    starting_offsets=starting_offsets,
                    max_offsets_per_trigger=max_offsets_per_trigger)

    def triggered(writer: DataStreamWriter) -> DataStreamWriter:
        if available_now:
            return writer.trigger(availableNow=True)
        return writer.trigger(processingTime=trigger_interval)

    queries = [
        triggered(df.select("key", "value").writeStream.format("kaflite")
        .queryName(f"clickstream-to-{results}")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", results)
        .option("checkpointLocation", os.path.join(checkpoint, "kafka"))
        .outputMode(output_mode)).start()
    ]
    if parquet:
        queries.append(triggered(
            df.drop("key", "value").writeStream.format("parquet")
            .queryName("clickstream-to-parquet")
            .option("path", parquet)
            .option("checkpointLocation", os.path.join(checkpoint, "parquet"))
            .outputMode("append")).start())
    return queries


@dataclass(frozen=True)
class Settings(StreamSettings):
    """What ``run`` runs: the command line's options (``kaflite pipeline clickstream``)."""

    events: str = "clicks"
    results: str = "clicks-per-minute"
    window: str = "1 minute"
    watermark: str = "1 minute"
    parquet: str | None = None


def run(settings: Settings, say: Callable[[str], None] = print) -> int:
    """Run the pipeline on a new SparkSession until its queries end, ``timeout``
    seconds pass, or Ctrl-C; then stop it (``streaming_session``). Returns 0, or 1 if
    a query failed."""
    s = settings
    with streaming_session("kaflite-clickstream", s) as (spark, checkpoint):
        queries = start(spark, s.bootstrap, s.events, s.results, checkpoint,
                        window=s.window, watermark=s.watermark,
                        starting_offsets=s.starting_offsets, parquet=s.parquet,
                        available_now=s.available_now, trigger_interval=s.trigger_interval,
                        max_offsets_per_trigger=s.max_offsets_per_trigger)
        say(f"clickstream: {s.events} → {s.results}"
            + (f" and {s.parquet}" if s.parquet else "") + f" (checkpoint {checkpoint})")
        failed, timed_out = await_queries(queries, s.timeout)
        progress = queries[0].recentProgress
        say(f"clickstream: read {sum(int(p['numInputRows']) for p in progress)} events in "
            f"{len(progress)} batches" + (f", stopped after {s.timeout:g} s" if timed_out else ""))
    for line in failed:
        say(f"clickstream: query failed: {line}")
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kaflite.pipelines.clickstream",
                                description="Windowed clickstream aggregates on Spark, "
                                            "from one Kafka topic to another.")
    p.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers (host:port,...)")
    p.add_argument("--events", default="clicks", help="topic of JSON events")
    p.add_argument("--results", default="clicks-per-minute", help="topic for the aggregates")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    p.add_argument("--window", default="1 minute", help="tumbling window length")
    p.add_argument("--watermark", default="1 minute", help="how late an event may be")
    p.add_argument("--starting-offsets", default="earliest", choices=["earliest", "latest"])
    p.add_argument("--max-offsets-per-trigger", type=int, default=None)
    p.add_argument("--checkpoint", default=None, help="checkpoint directory (default: temp)")
    p.add_argument("--parquet", default=None, help="also write the aggregates here as Parquet")
    p.add_argument("--available-now", action="store_true",
                   help="process what is in the topic now, then stop (Trigger.AvailableNow)")
    p.add_argument("--trigger-interval", default="10 seconds")
    p.add_argument("--timeout", type=float, default=None,
                   help="stop after this many seconds (default: when the queries end)")
    p.add_argument("--log-file", default=None,
                   help="send Spark's logs to this file, not to the terminal")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(Settings(
            bootstrap=args.bootstrap, events=args.events, results=args.results,
            master=args.master, window=args.window, watermark=args.watermark,
            starting_offsets=args.starting_offsets,
            max_offsets_per_trigger=args.max_offsets_per_trigger, checkpoint=args.checkpoint,
            parquet=args.parquet, available_now=args.available_now,
            trigger_interval=args.trigger_interval, timeout=args.timeout,
            log_file=args.log_file))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
