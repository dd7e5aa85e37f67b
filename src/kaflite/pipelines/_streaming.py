"""What every streaming pipeline of ``kaflite pipeline`` shares: its settings and its run.

``StreamSettings`` holds the options each pipeline takes (the bootstrap, Spark's
master and settings, where to start, the trigger, the checkpoint, a deadline, Spark's
log file); a pipeline's own settings add its topics. ``streaming_session`` opens the
pipeline's SparkSession with the ``kaflite`` format registered and a checkpoint
directory, and closes both however the run ends. ``await_queries`` waits for queries
until they end or the deadline passes, and stops those the deadline left running.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

__all__ = ["StreamSettings", "await_queries", "streaming_session"]

#: a pipeline's Spark settings, before the user's ``--conf``
BASE_CONF = {"spark.sql.shuffle.partitions": "4", "spark.ui.showConsoleProgress": "false"}


@dataclass(frozen=True)
class StreamSettings:
    """The options of every streaming pipeline (``kaflite pipeline ...``)."""

    bootstrap: str
    master: str = "local[*]"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    checkpoint: str | None = None      # None: a temporary one, removed at the end
    available_now: bool = False
    trigger_interval: str = "10 seconds"
    timeout: float | None = None       # None: until the queries end, or Ctrl-C
    conf: dict[str, str] = field(default_factory=dict)
    log_file: str | None = None        # Spark's logs go there, not to the terminal


@contextmanager
def streaming_session(app_name: str, settings: StreamSettings
                      ) -> Iterator[tuple[SparkSession, str]]:
    """A new SparkSession for the pipeline ``app_name`` (Java checked first, the
    ``kaflite`` format registered) and its checkpoint directory. On the way out, by
    an end, an error or Ctrl-C, every query still active is stopped, the session
    too, and a checkpoint directory made here is removed: the next run starts again
    from ``starting_offsets``."""
    import kaflite.spark
    from kaflite.pipelines.spark_logs import pipeline_session
    from kaflite.spark._session import require_java

    require_java()
    s = settings
    spark = pipeline_session(app_name, s.master, {**BASE_CONF, **s.conf},
                             None if s.log_file is None else Path(s.log_file))
    kaflite.spark.register(spark)
    checkpoint = s.checkpoint or tempfile.mkdtemp(prefix=f"{app_name}-checkpoint-")
    try:
        yield spark, checkpoint
    finally:
        for q in spark.streams.active:
            q.stop()
        spark.stop()
        if s.checkpoint is None:
            shutil.rmtree(checkpoint, ignore_errors=True)


def await_queries(queries: Sequence[StreamingQuery], timeout: float | None
                  ) -> tuple[list[str], bool]:
    """Wait for each query to end, for ``timeout`` seconds in all (None: no limit).
    Returns the failures (``name: error``) and whether the deadline stopped any."""
    from pyspark.errors import StreamingQueryException

    failed: list[str] = []
    deadline = None if timeout is None else time.monotonic() + timeout
    for q in queries:
        try:
            if deadline is None:
                q.awaitTermination()
            elif (left := deadline - time.monotonic()) > 0:
                q.awaitTermination(max(1, math.ceil(left)))   # whole seconds, as its hint says
        except StreamingQueryException as exc:
            failed.append(f"{q.name}: {exc}")
    timed_out = [q for q in queries if q.isActive]   # only a deadline leaves one running
    for q in timed_out:
        q.stop()
    return failed, bool(timed_out)
