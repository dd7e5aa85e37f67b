"""kaflite's Spark source in a Structured Streaming query, as a consumer under test.

What is Spark and what is not
-----------------------------
* The **consumer** is a streaming query, ``spark.readStream.format("kaflite")``
  (``subscribe``, ``startingOffsets=earliest``, ``failOnDataLoss=true``), with a
  checkpoint directory and a short processing-time trigger, written with
  ``foreachBatch``: each micro-batch's rows (topic, partition, offset, value)
  are collected on the driver and handed to the workload's ``poll()``. Spark
  plans the batches (``latestOffset``/``partitions`` on the driver) and its
  Python workers read the offset ranges from the leaders: that is what is under
  test, with its checkpoint, its restarts and its error handling.
* The **producer** is kaflite's blocking producer (``kaflite.client.sync``),
  exactly as in the ``kaflite-sync`` client: the Spark *sink* is not tested here.
* Only the queue workload: the reader has no consumer group and no transactions.

How a query maps onto the checker's consumer
--------------------------------------------
Spark uses no consumer group: its position is the checkpoint. A group read by
two queries would be read twice, and the two queries' commits would interleave
(one group's committed offsets would seem to go back), so this client runs
**one reader per group** (``readers_per_group = 1``): its query is the group.

* ``subscribe`` starts the query; the first batch names the topic's partitions,
  reported as the consumer's assignment (the whole topic, never revoked).
* ``poll`` hands over one micro-batch, as Spark collected it (not re-sorted).
  ``foreachBatch`` returns only once a poll has taken its batch, so Spark commits
  a batch to its checkpoint only after the consumer has it (at-least-once
  delivery into the workload, as a sink would get).
* ``commit(offsets)`` waits until the checkpoint's commit log holds the batch
  the last poll returned, and checks that the batch's end offsets (the offset
  log) cover ``offsets``; it raises if they do not, or if the query died first.
* The query is **restarted from its checkpoint** every ``RESTART_EVERY`` seconds
  once it has delivered a batch since it started (and after it fails), with no revoke or assign in the history: the checker
  therefore sees one continuous assignment across restarts, so a record skipped
  or read twice by a restart shows as a poll-skip or a non-monotonic poll. A
  stop between a poll and the checkpoint's commit makes Spark run that batch
  again (``foreachBatch`` is at-least-once); the adapter drops the repeat by its
  batch id, as Spark's documentation asks of a sink, but only when it holds
  exactly the records already delivered (a different repeat is delivered, for
  the checker to judge). The checkpoint and the last delivered batch are kept
  per group in the factory, so a new consumer of the group resumes there too.

The SparkSession (``local[2]``, as in ``tests/spark``) is started by the
factory's ``start()`` before the cluster, so that the 15-20 s JVM start does not
eat into the faults, and stopped by ``close()`` unless it was already running.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kaflite.verify.clients._base import (
    TP,
    ClientFactory,
    ConsumerClient,
    Context,
    Listener,
    ProducerClient,
    Record,
    decode,
)
from kaflite.verify.clients._kaflite import KafliteSync

__all__ = ["RESTART_EVERY", "SparkStream", "local_session"]

TRIGGER = "250 milliseconds"
RESTART_EVERY = 6.0        # seconds between restarts of a query from its checkpoint
COMMIT_TIMEOUT = 60.0      # seconds commit() waits for Spark's commit log


def local_session() -> Any:
    """A small local SparkSession with the ``kaflite`` format (the tests' settings)."""
    import kaflite.spark

    return kaflite.spark.local_session("kaflite-verify")


@dataclass
class _GroupState:
    """What outlives one consumer of a group: its checkpoint and last delivered batch."""

    checkpoint: str
    last_batch: int = -1
    last_rows: tuple[Record, ...] = ()
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handoff:
    """One micro-batch at a time from ``foreachBatch`` (Spark's thread) to ``poll``."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.slot: tuple[int, list[Record]] | None = None
        self.stopping = False

    def offer(self, batch_id: int, rows: list[Record]) -> None:
        """Wait until a poll takes the batch; raise if the query is being stopped."""
        with self.cond:
            if self.stopping:
                raise RuntimeError("query stopping")
            self.slot = (batch_id, rows)
            self.cond.notify_all()
            while self.slot is not None:
                if self.stopping:
                    self.slot = None
                    raise RuntimeError(f"query stopping: batch {batch_id} not handed over")
                self.cond.wait(0.1)

    def take(self, timeout: float) -> tuple[int, list[Record]] | None:
        with self.cond:
            if self.slot is None:
                self.cond.wait(timeout)
            got, self.slot = self.slot, None
            self.cond.notify_all()
            return got

    def stop(self, stopping: bool) -> None:
        with self.cond:
            self.stopping = stopping
            self.cond.notify_all()


def _read_log(checkpoint: str, log: str, batch: int) -> dict[str, Any] | None:
    """The last line (the source's offsets) of ``checkpoint/log/batch``, if written."""
    try:
        with open(os.path.join(checkpoint, log, str(batch))) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    return dict(json.loads(lines[-1])) if lines and lines[-1].startswith("{") else {}


class _StreamConsumer(ConsumerClient):
    def __init__(self, factory: SparkStream, servers: str, client_id: str, group: str,
                 listener: Listener | None) -> None:
        self.factory, self.servers, self.client_id = factory, servers, client_id
        self.group = factory.group_state(group)
        self.listener = listener
        self.handoff = _Handoff()
        self.topic: str | None = None
        self.query: Any = None
        self.started = 0.0
        self.runs = 0
        self.assigned = False
        self.polled_batch = -1
        self.first_batch_of_run = 0      # a batch id this run's query delivers at the earliest
        self._events: list[tuple[float, str]] = []

    def _event(self, text: str) -> None:
        self._events.append((time.time(), text))

    # -- the query ------------------------------------------------------------------------
    def _on_batch(self, df: Any, batch_id: int) -> None:
        rows = tuple((r.topic, r.partition, r.offset, decode(None if r.value is None else bytes(r.value)))
                     for r in df.select("topic", "partition", "offset", "value").collect())
        g = self.group
        with g.lock:
            if batch_id <= g.last_batch:
                if batch_id == g.last_batch and rows == g.last_rows:
                    self._event(f"batch {batch_id} run again after a stop: the same "
                                f"{len(rows)} records, dropped")
                    return
                self._event(f"batch {batch_id} run again, with other records than were "
                            f"delivered (last batch delivered: {g.last_batch}); delivered")
        self.handoff.offer(batch_id, list(rows))

    def _start(self) -> None:
        assert self.topic is not None
        spark = self.factory.session()
        self.handoff.stop(False)
        self.runs += 1
        self.query = (spark.readStream.format("kaflite")
                      .option("kafka.bootstrap.servers", self.servers)
                      .option("kafka.client.id", self.client_id)
                      .option("subscribe", self.topic)
                      .option("startingOffsets", "earliest")
                      .option("failOnDataLoss", "true")
                      .load()
                      .writeStream.foreachBatch(self._on_batch)
                      .option("checkpointLocation", self.group.checkpoint)
                      .trigger(processingTime=TRIGGER)
                      .queryName(f"{self.client_id}-{self.runs}")
                      .start())
        self.started = time.monotonic()
        self.first_batch_of_run = self.polled_batch + 1
        self._event(f"query started (run {self.runs}) from checkpoint "
                    f"{self.group.checkpoint}")

    def _stop(self, why: str) -> None:
        q, self.query = self.query, None
        if q is None:
            return
        self.handoff.stop(True)
        try:
            q.stop()
        except Exception as exc:
            self._event(f"query stop ({why}) failed: {exc!r}")
        else:
            self._event(f"query stopped ({why})")

    def _failure(self) -> str | None:
        """Why the query ended by itself, if it did."""
        if self.query is None or self.query.isActive:
            return None
        exc = self.query.exception()
        if exc is None:
            return "query ended"
        text = str(exc)          # a Python traceback: its head and its last lines matter
        return f"query failed: {text if len(text) < 6000 else text[:500] + ' ... ' + text[-5000:]}"

    # -- ConsumerClient -----------------------------------------------------------------------
    def subscribe(self, topics: list[str]) -> None:
        if len(topics) != 1:
            raise ValueError("the spark client reads one topic")
        self.topic = topics[0]
        self._start()

    def assign(self, tps: list[TP]) -> None:
        raise NotImplementedError("the spark client reads through a streaming query only")

    def seek(self, tp: TP, offset: int) -> None:
        raise NotImplementedError("the spark client reads through a streaming query only")

    def poll(self, timeout: float) -> list[Record]:
        if self.query is None:
            self._start()
        failure = self._failure()
        if failure is not None:
            self._event(failure)
            self._stop("restart after a failure")
            raise RuntimeError(failure)
        # Not before this run delivered a batch: on a loaded machine a query's first
        # batch (its Python workers starting, its first read) took longer than the
        # period, and each restart interrupted it (collectToPython's
        # InterruptedException) before anything was delivered, run after run.
        if time.monotonic() - self.started > RESTART_EVERY \
                and self.polled_batch >= self.first_batch_of_run:
            self._stop("periodic restart from the checkpoint")
            self._start()
        got = self.handoff.take(timeout)
        if got is None:
            return []
        batch_id, rows = got
        with self.group.lock:
            self.group.last_batch = batch_id
            self.group.last_rows = tuple(rows)
        self.polled_batch = batch_id
        if not self.assigned:
            self._report_assignment(batch_id)
        return rows

    def _report_assignment(self, batch_id: int) -> None:
        ends = _read_log(self.group.checkpoint, "offsets", batch_id) or {}
        tps = sorted((t, int(p)) for t, parts in ends.items() for p in parts)
        if tps:
            self.assigned = True
            if self.listener is not None:
                self.listener.assigned(tps)

    def commit(self, offsets: dict[TP, int]) -> None:
        """Wait for the checkpoint to commit the batch the last poll returned."""
        batch = self.polled_batch
        deadline = time.monotonic() + COMMIT_TIMEOUT
        while _read_log(self.group.checkpoint, "commits", batch) is None:
            failure = self._failure()
            if failure is not None:
                raise RuntimeError(f"batch {batch} not committed: {failure}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"batch {batch} not committed in {COMMIT_TIMEOUT:.0f} s")
            time.sleep(0.01)
        ends = _read_log(self.group.checkpoint, "offsets", batch) or {}
        short = {f"{t}-{p}": (o, ends.get(t, {}).get(str(p))) for (t, p), o in offsets.items()
                 if ends.get(t, {}).get(str(p), -1) < o}
        if short:
            raise RuntimeError(f"batch {batch} committed, but its end offsets are below the "
                               f"polled ones (polled next, checkpoint): {short}")

    def close(self) -> None:
        self._stop("close")

    def events(self) -> list[tuple[float, str]]:
        return list(self._events)


class SparkStream(ClientFactory):
    name = "spark"
    readers_per_group = 1

    def __init__(self) -> None:
        self._session: Any = None
        self._owned = False
        self._lock = threading.Lock()
        self._dir: str | None = None
        self._groups: dict[str, _GroupState] = {}
        self._producers = KafliteSync()

    def session(self) -> Any:
        with self._lock:
            if self._session is None:
                from pyspark.sql import SparkSession

                self._owned = SparkSession.getActiveSession() is None
                self._session = local_session()
            return self._session

    def group_state(self, group: str) -> _GroupState:
        with self._lock:
            if self._dir is None:
                self._dir = tempfile.mkdtemp(prefix="kaflite-verify-spark-")
            if group not in self._groups:
                self._groups[group] = _GroupState(os.path.join(self._dir, group))
            return self._groups[group]

    def start(self) -> None:
        self.session()

    def close(self) -> None:
        with self._lock:
            session, self._session = self._session, None
            if session is not None and self._owned:
                session.stop()
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None
            self._groups.clear()

    def context(self) -> Context:
        return Context()

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        return self._producers.producer(ctx, servers, client_id, txn_id)

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient:
        if group is None:
            raise ValueError("the spark client reads as a group (a checkpoint per group)")
        if isolation != "read_uncommitted":
            raise ValueError("the spark client runs the queue workload only")
        return _StreamConsumer(self, servers, client_id, group, listener)
