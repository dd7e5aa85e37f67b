"""Streaming reads as a share group, accepted at Spark's commit.

    q = (spark.readStream.format("kaflite")
         .option("kafka.bootstrap.servers", servers)
         .option("subscribe", "jobs")
         .option("shareGroup", "spark-workers")
         .option("maxOffsetsPerTrigger", 10_000)
         .load()
         .writeStream.foreachBatch(handle).option("checkpointLocation", ck).start())

Theory of operation
-------------------
The stream reader lives on the driver, in the one Python process PySpark keeps
for the query's source (``python_streaming_source_runner``), and it is the
group's only member there: a ``ShareConsumer`` in explicit acknowledgement
mode, made at the first ``latestOffset``. Per micro-batch:

1. ``latestOffset(start, limit)`` first accepts the batches up to ``start``:
   Spark asks for the next batch's end only after the previous batch ran and
   its commit log entry was written. Then it acquires records (polls of
   ``ACQUIRE_POLL_MS`` until one brings nothing, ``maxOffsetsPerTrigger``
   records are held, or ``ACQUIRE_MAX_MS`` have passed), renews them, and
   keeps them (the first call waits for the member's assignment, up to
   ``JOIN_TIMEOUT_MS``). Its answer, which Spark writes to the offset log, is the batch
   number and the offset ranges of the records it holds:
   ``{"shareGroup": G, "batch": 7, "ranges": {"jobs": {"0": [[120, 180]]}}}``
   (``[from, until)`` runs of consecutive offsets). Only offsets the share
   fetch delivered are in a run: control records and, under
   ``share.isolation.level=read_committed``, aborted transactions' records are
   archived by the broker and split the runs. Nothing new: the answer is
   ``start`` and Spark runs no batch.
2. ``partitions(start, end)`` turns ``end``'s runs into tasks: one per
   partition (all its runs), or with ``minPartitions`` one per run, large runs
   split (``offsets.plan_ranges``).
3. The executors read the runs with ordinary Fetch (``_fetch.read_range``,
   read_uncommitted: every offset of a run was delivered, so the rows are
   exactly the records the group handed out).
4. ``commit(end)`` accepts the batches up to ``end`` if the next
   ``latestOffset`` has not yet (Spark calls it only when it plans the batch
   after, so usually it finds nothing left). A partition whose acceptance fails
   (INVALID_RECORD_STATE: its locks were lost) is logged; the group delivers
   those records again.

Meanwhile a thread renews the locks of every record held (RENEW, KIP-1222)
each half lock duration, so a batch may run longer than
``share.record.lock.duration.ms``. Records polled beyond ``maxOffsetsPerTrigger``
are held (and renewed) for the next batch.

Failures. ``stop()`` closes the consumer: the brokers release what it holds,
and the group delivers it again (to this query when it restarts, or to any
member). PySpark ends the source's process with SIGTERM when a query stops or
fails, without calling ``stop()``, so the reader calls it from a SIGTERM
handler (set from the process's main thread, where PySpark runs it). A process
that dies before the close is done keeps its records until their locks expire,
and its member stays in the group until ``share.session.timeout.ms`` (45 s):
until then a restarted query's member shares the partitions with it (the
``simple`` assignor gives each member some) and reads only its part. A
query restarted with a batch uncommitted runs that batch again from the offset
log, reading the same ranges: those records are seen twice (once replayed, once
redelivered), which at-least-once allows; none is lost unless the log lost it
(retention: ``failOnDataLoss``).

Costs: the data crosses the network twice (share fetch to the driver, Fetch to
the executors); acquisition goes through one member; a batch holds at most
``group.share.partition.max.record.locks`` records of a partition (2000 by
default); and the member must poll (a ``latestOffset``) at least every
``max.poll.interval.ms`` (``kafka.max.poll.interval.ms``, 5 minutes), else it
leaves the group and its records go back. Trigger.AvailableNow runs batches
until a trigger acquires nothing for ``AVAILABLE_NOW_IDLE_MS`` (a queue has no
end offsets to fix at the start; a topic fed faster than it is read keeps the
run going); that last trigger accepts the last batch. Trigger.Once runs one
batch and stops before any later trigger could accept it: its records go back
to the group and are delivered again.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import FrameType
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from kaflite.client.consumer import IllegalStateError
from kaflite.client.share import AcknowledgeType, ShareRecord
from kaflite.protocol import errors
from kaflite.spark._fetch import ExecutorParams, read_range
from kaflite.spark.offsets import OffsetRange, plan_ranges
from kaflite.spark.share import ShareOptions
from kaflite.spark.stream import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

if TYPE_CHECKING:
    from kaflite.client.sync import ShareConsumer as SyncShareConsumer

__all__ = ["ShareRangesPartition", "ShareStreamReader", "batch_offset", "delivered_runs",
           "offset_ranges"]

log = logging.getLogger("kaflite.spark")

ACQUIRE_POLL_MS = 200        # one poll of latestOffset; an empty one ends the acquiring
ACQUIRE_MAX_MS = 1000        # latestOffset acquires for at most this long
JOIN_TIMEOUT_MS = 30_000     # the first latestOffset waits this long for an assignment
AVAILABLE_NOW_IDLE_MS = 2000   # Trigger.AvailableNow: a poll this long and empty ends it
RENEW_CHECK_S = 0.25         # how often the renewal thread looks at the clock
DEFAULT_LOCK_MS = 30_000     # group.share.record.lock.duration.ms, until a broker says
STOP_TIMEOUT_S = 10.0

# Spark's offset-log entry of a share-group micro-batch: {"shareGroup": str, "batch": int,
# "ranges": {topic: {partition: [[from, until], ...]}}} (PySpark's methods take a dict)
ShareOffset = dict[str, object]
Records = list[ShareRecord[bytes, bytes]]
SigHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


def delivered_runs(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """``[from, until)`` runs of consecutive offsets."""
    runs: list[tuple[int, int]] = []
    for o in sorted(set(offsets)):
        if runs and runs[-1][1] == o:
            runs[-1] = (runs[-1][0], o + 1)
        else:
            runs.append((o, o + 1))
    return runs


def batch_offset(group: str, batch: int, records: Iterable[ShareRecord[bytes, bytes]]
                 ) -> ShareOffset:
    """The offset-log entry of batch ``batch`` holding ``records`` (sorted: the same
    batch always serializes to the same string)."""
    by_tp: dict[str, dict[int, list[int]]] = {}
    for r in records:
        by_tp.setdefault(r.topic, {}).setdefault(r.partition, []).append(r.offset)
    ranges = {topic: {str(p): [[a, b] for a, b in delivered_runs(offs)]
                      for p, offs in sorted(parts.items())}
              for topic, parts in sorted(by_tp.items())}
    return {"shareGroup": group, "batch": batch, "ranges": ranges}


def batch_of(offset: Mapping[str, object]) -> int:
    batch = offset.get("batch")
    if not isinstance(batch, int) or "ranges" not in offset:
        raise ValueError(f"not the offsets of a share-group read (shareGroup): {offset!r}; "
                         "was the checkpoint written by another kind of query?")
    return batch


def offset_ranges(offset: Mapping[str, object]) -> list[OffsetRange]:
    """The runs of an offset-log entry, as offset ranges."""
    batch_of(offset)
    ranges = offset["ranges"]
    out: list[OffsetRange] = []
    if not isinstance(ranges, Mapping):
        raise ValueError(f"malformed share-group offsets: {offset!r}")
    for topic, parts in sorted(ranges.items()):
        for p, runs in sorted(parts.items(), key=lambda kv: int(kv[0])):
            out += [OffsetRange(topic, int(p), int(a), int(b)) for a, b in runs]
    return out


class ShareRangesPartition(InputPartition):
    """One Spark task: runs of acquired offsets, read with Fetch."""

    def __init__(self, index: int, ranges: tuple[OffsetRange, ...],
                 params: ExecutorParams) -> None:
        super().__init__(index)
        self.ranges = ranges
        self.params = params

    def __repr__(self) -> str:
        return f"ShareRangesPartition({', '.join(map(str, self.ranges))})"


def _read(partition: ShareRangesPartition) -> Iterator[pa.RecordBatch]:
    for r in partition.ranges:
        yield from read_range(r, partition.params)


class ShareStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ShareOptions) -> None:
        self.opts = opts
        self.params = ExecutorParams(
            config=opts.executor_config, group_id=f"share group {opts.group}",
            include_headers=opts.include_headers, fail_on_data_loss=opts.fail_on_data_loss,
            poll_timeout_ms=opts.poll_timeout_ms, isolation_level=0)
        self._consumer: SyncShareConsumer[bytes, bytes] | None = None
        self._lock = threading.RLock()       # the consumer is used by one thread at a time
        self._stopping = threading.Event()
        self._terminating = False            # stop() begun (read by the SIGTERM handler)
        self._renewer: threading.Thread | None = None
        self._held: dict[int, Records] = {}  # batch -> its records, acquired, not accepted
        self._spare: Records = []            # acquired past a batch's limit: the next one's
        self._batch = 0                      # the newest batch answered or seen
        self._planned: ShareOffset | None = None   # the newest end partitions() planned
        self._joined = False                 # the first acquisition is over
        self._available_now = False
        self._sigterm: tuple[SigHandler, SigHandler] | None = None   # (ours, the one before)

    # Spark pickles the reader for the executors: they get a fresh one (no consumer).
    def __reduce__(self) -> tuple[type[ShareStreamReader], tuple[ShareOptions]]:
        return (ShareStreamReader, (self.opts,))

    def _client(self) -> SyncShareConsumer[bytes, bytes]:
        if self._consumer is None:
            from kaflite.client.sync import ShareConsumer as SyncShareConsumer

            config = dict(self.opts.config)
            config["client.id"] = f"{config.get('client.id', 'spark-share')}-driver"
            consumer: SyncShareConsumer[bytes, bytes] = SyncShareConsumer(config)
            consumer.subscribe(self.opts.topics)
            self._consumer = consumer
            self._renewer = threading.Thread(target=self._renew_loop, daemon=True,
                                             name=f"kaflite-share-renew-{self.opts.group}")
            self._renewer.start()
            self._on_sigterm_stop()
        return self._consumer

    def _on_sigterm_stop(self) -> None:
        """Stop (release the records) when the process is terminated: Spark ends the
        source's Python process with SIGTERM when the query stops, without calling
        ``stop()``. Only the main thread may set a handler; elsewhere the records come
        back when their locks expire."""
        if threading.current_thread() is not threading.main_thread():
            return
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum: int, frame: FrameType | None) -> None:
            # A plain flag, not the ``_stopping`` Event: Spark sends SIGTERM again while
            # the first one's stop() may hold that Event's (non-reentrant) lock in this
            # same thread, and a second stop() waiting for it would hang the process,
            # its member heartbeating for ever (seen in CI).
            if self._terminating:
                return     # stopping already (this handler, or stop()): let it finish
            self._terminating = True
            self.stop()
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:   # then die of it, as without this handler
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_term)
        self._sigterm = (on_term, previous)

    # -- positions ---------------------------------------------------------------------------
    def initialOffset(self) -> ShareOffset:
        return batch_offset(self.opts.group, 0, ())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_per_trigger is not None:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: batches until a trigger acquires nothing in
        ``AVAILABLE_NOW_IDLE_MS`` (longer than a ShareFetch waits on the broker). A queue
        has no end offsets to fix; that last, empty trigger accepts the last batch."""
        self._available_now = True

    def latestOffset(self, start: ShareOffset | None = None,
                     limit: ReadLimit | None = None) -> ShareOffset:
        if start is None:    # Spark 4.0/4.1: the last batch Spark planned is the start
            start = self._planned if self._planned is not None else self.initialOffset()
            limit = self.getDefaultReadLimit()
        done = batch_of(start)
        with self._lock:
            # Spark asks for the next batch only once the batches up to start have run
            # and are in its commit log: accept them.
            self._accept(done)
            # Answers after start were never run (the query stopped before planning
            # them): their records go into this answer.
            for n in sorted(b for b in self._held if b > done):
                self._spare[:0] = self._held.pop(n)
            cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
            records = self._acquire(cap)
            if not records:
                return start
            self._batch = max(self._batch, done) + 1
            self._held[self._batch] = records
            answer = batch_offset(self.opts.group, self._batch, records)
        log.info("share group %s: batch %d holds %d records: %s", self.opts.group,
                 self._batch, len(records), answer["ranges"])
        return answer

    def _acquire(self, cap: int | None) -> Records:
        consumer = self._client()
        limit = cap if cap is not None else 2**62
        out, self._spare = self._spare[:limit], self._spare[limit:]
        now = time.monotonic()
        deadline = now + ACQUIRE_MAX_MS / 1000
        # the first acquisition waits for the member to join (no records before that)
        joining = now + JOIN_TIMEOUT_MS / 1000 if not self._joined else now
        idle_ms = AVAILABLE_NOW_IDLE_MS if self._available_now else ACQUIRE_POLL_MS
        while len(out) < limit:
            got = consumer.poll(ACQUIRE_POLL_MS if out else idle_ms)
            if not got:
                if consumer.assignment() or time.monotonic() >= joining:
                    break   # the group's partitions have nothing more for now
                continue
            # kept (and every record of a poll acknowledged, as explicit mode wants)
            self._ack(got, AcknowledgeType.RENEW)
            # the payload is the executors' to read: keep where the records are
            got = [r._replace(key=None, value=None, headers=()) for r in got]
            room = limit - len(out)
            out += got[:room]
            self._spare += got[room:]
            if time.monotonic() >= deadline:
                break
        self._joined = True
        return out

    def _ack(self, records: Iterable[ShareRecord[bytes, bytes]], kind: AcknowledgeType) -> int:
        """Acknowledge ``records`` (under the lock); how many could be. One the consumer
        no longer holds as delivered (accepted already: a record lost and delivered
        again sits in two batches) is skipped."""
        assert self._consumer is not None
        n = 0
        for r in records:
            try:
                self._consumer.acknowledge(r, kind)
                n += 1
            except IllegalStateError:
                log.debug("share group %s: %s-%d offset %d is acknowledged already",
                          self.opts.group, r.topic, r.partition, r.offset)
        return n

    def _accept(self, upto: int) -> None:
        """ACCEPT the records of every batch up to ``upto`` (under the lock)."""
        batches = sorted(b for b in self._held if b <= upto)
        if not batches or self._consumer is None:
            return
        records = [r for b in batches for r in self._held.pop(b)]
        n = self._ack(records, AcknowledgeType.ACCEPT)
        self._report("accepting batches " + ",".join(map(str, batches)), n)

    def _report(self, what: str, count: int) -> None:
        """Send the acknowledgements now; log the partitions that failed (their records
        were no longer the member's: the group delivers them again)."""
        assert self._consumer is not None
        try:
            results = self._consumer.commit_sync()
        except errors.KafkaError as exc:
            log.warning("share group %s: %s (%d records) failed: %r; the group delivers "
                        "them again", self.opts.group, what, count, exc)
            return
        failed = {tp: e for tp, e in results.items() if e is not None}
        if failed:
            log.warning("share group %s: %s: failed for %s; the group delivers those records "
                        "again (at-least-once)", self.opts.group, what,
                        ", ".join(f"{tp} ({e})" for tp, e in sorted(failed.items())))
        else:
            log.debug("share group %s: %s: %d records", self.opts.group, what, count)

    def _renew_loop(self) -> None:
        """RENEW every record held, each half lock duration, until ``stop()``."""
        renewed = time.monotonic()
        while not self._stopping.wait(RENEW_CHECK_S):
            consumer = self._consumer
            if consumer is None:
                return
            lock_ms = consumer.acquisition_lock_timeout_ms() or DEFAULT_LOCK_MS
            if time.monotonic() - renewed < lock_ms / 2000:
                continue
            with self._lock:
                if self._consumer is None or self._stopping.is_set():
                    return
                held = [r for b in sorted(self._held) for r in self._held[b]] + self._spare
                renewed = time.monotonic()
                if not held:
                    continue
                try:
                    self._report("renewing locks", self._ack(held, AcknowledgeType.RENEW))
                except Exception:   # never let the thread die silently
                    log.exception("share group %s: renewing locks failed", self.opts.group)

    # -- planning ---------------------------------------------------------------------------------
    def partitions(self, start: ShareOffset, end: ShareOffset) -> list[ShareRangesPartition]:
        batch = batch_of(end)
        with self._lock:
            self._planned = end
            self._batch = max(self._batch, batch)
        if start == end:
            return []
        ranges = offset_ranges(end)
        tasks: list[tuple[OffsetRange, ...]]
        if self.opts.min_partitions is not None:
            tasks = [(r,) for r in plan_ranges(ranges, self.opts.min_partitions)]
        else:
            by_tp: dict[tuple[str, int], list[OffsetRange]] = {}
            for r in ranges:
                by_tp.setdefault((r.topic, r.partition), []).append(r)
            tasks = [tuple(rs) for _, rs in sorted(by_tp.items())]
        log.info("share group %s: batch %d: %d tasks for %s", self.opts.group, batch,
                 len(tasks), ", ".join(map(str, ranges)))
        return [ShareRangesPartition(i, t, self.params) for i, t in enumerate(tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ShareRangesPartition):
            return iter(())   # PySpark plans one empty InputPartition(None) instead of none
        return _read(partition)

    def commit(self, end: ShareOffset) -> None:
        with self._lock:
            self._accept(batch_of(end))

    def stop(self) -> None:
        """Close the consumer: the brokers release every record it still holds."""
        self._terminating = True      # (first: a SIGTERM from here on leaves it to this)
        self._stopping.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join(STOP_TIMEOUT_S)
        with self._lock:
            consumer, self._consumer = self._consumer, None
            self._held.clear()
            self._spare.clear()
        try:
            if consumer is not None:
                consumer.close()
        finally:
            # (restored only now: Spark may send SIGTERM again while this closes)
            if self._sigterm is not None and \
                    threading.current_thread() is threading.main_thread():
                (ours, previous), self._sigterm = self._sigterm, None
                if signal.getsignal(signal.SIGTERM) is ours:
                    signal.signal(signal.SIGTERM,
                                  signal.SIG_DFL if previous is None else previous)
