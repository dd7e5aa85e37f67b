"""Structured Streaming reads: ``spark.readStream.format("kaflite")``.

Theory of operation
-------------------
Spark drives the reader on the driver, once per micro-batch:

1. ``latestOffset(start, limit)``: discover the partitions (a new one is
   picked up here), ask their leaders for the latest offsets and cap them by
   the read limit. The result is the batch's end; Spark writes it to the
   checkpoint's offset log as Spark-style JSON (``offsets.to_json``) before
   the batch runs.
2. ``partitions(start, end)``: turn the two positions into offset ranges. A
   partition in ``end`` but not in ``start`` was added since; it is read from
   its earliest offset (Spark's rule, which also reports data loss if that is
   not 0). A partition that vanished, or whose offsets went backwards, is data
   loss too: the query fails with ``failOnDataLoss=true`` and warns otherwise.
3. The executors read the ranges (``read``), exactly as a batch query does.
4. ``commit(end)`` once the sink has the batch. kaflite never commits offsets
   to Kafka, as Spark does not: the checkpoint is the only position.

A query restarted from its checkpoint gets the last end offset as its next
``start``, so every record is read exactly once by the source.

Admission control. On Spark 4.2+ the engine calls ``latestOffset(start,
limit)`` with the limit from ``getDefaultReadLimit()``:
``ReadMaxRows(maxOffsetsPerTrigger)`` when that is set (shared among
partitions in proportion to their backlog), else ``ReadMinRows
(minOffsetsPerTrigger)``; ``minOffsetsPerTrigger`` holds a batch back until
that many records wait or ``maxTriggerDelay`` has passed, as in Spark. A
``ReadAllAvailable`` limit from the engine (Trigger.Once, say) wins over the
options.

Trigger.AvailableNow: ``prepareForTriggerAvailableNow`` makes the first
``latestOffset`` fix the target (the latest offsets at that moment); later
calls never go past it, so the query stops once it is reached, in as many
batches as the limits ask for.

Spark 4.0 and 4.1
-----------------
Their Python streaming API has neither admission control nor
``SupportsTriggerAvailableNow`` (``HAS_ADMISSION_CONTROL`` is False): the
engine calls ``latestOffset()`` with no start and no limit, and uses the
answer as the end of the next batch. The reader learns where Spark stands
only from the other calls, which come in this order (seen on 4.0.1):

* a new query: ``latestOffset()``, then ``initialOffset()`` for the start
  of batch 0, then ``partitions(initial, end)``;
* a query restarted from its checkpoint: first ``partitions(L, L)``, where
  ``L`` is the newest end in the offset log (Spark's
  ``setLatestSeenOffset``), then (after re-running an uncommitted batch, if
  any) ``latestOffset()``;
* Trigger.AvailableNow with ``spark.sql.streaming.triggerAvailableNowWrapper
  .enabled``: the same, except that a new query gets an ``initialOffset()``
  first; the wrapper asks ``latestOffset()`` once for the end of the run and
  ends *every* batch of the run there (it asks again after each batch only
  for the progress report's ``latestOffset``).

None of this says which trigger runs the query: at its first
``latestOffset()`` a processing-time query looks exactly like a
Trigger.Once or Trigger.AvailableNow one, for which that answer is the end
of the whole run. So the reader answers its first ``latestOffset()`` with
everything available, and caps later answers by the options, counting from
its previous answer: a processing-time query has planned that as the end of
its last batch (Spark plans each new answer before it asks again), and the
wrapper's questions for the progress report get answers at or past the end
of the run. The consequences, Spark 4.0/4.1 only:

* ``maxOffsetsPerTrigger`` and ``minOffsetsPerTrigger`` do not apply to the
  first batch planned after the query starts or restarts: it takes the
  whole backlog (one big batch after a long stop). Later batches are capped.
* Trigger.AvailableNow (and Once) read everything available at the start in
  one batch: the engine asks once and takes no limit. By default Spark runs
  an AvailableNow query over a Python source as a single batch (its
  Trigger.Once fallback): no batch without data follows it, so windows that
  the batch's watermark closes are not emitted in that run; and when the
  previous run stopped with a batch uncommitted, the run only repeats that
  batch and stops, reading nothing newer. With the wrapper setting above
  (``kaflite.spark.enable_available_now``) the query repeats the uncommitted
  batch, reads up to the offsets that were latest at its start, runs the
  batches without data that stateful operators ask for, then stops: the
  results of Spark 4.2+, in fewer, larger batches.
* Capping the first answer instead would not be safe: under
  Trigger.AvailableNow or Once it would end the run early, leaving behind
  records the trigger promises to read.

The initial offsets are resolved once per reader and kept: a first
``latestOffset()`` with no batch planned (a new query) resolves them before
it asks for the latest offsets, so the ``initialOffset()`` that follows
cannot lie past the end of batch 0 (``startingOffsets=latest`` with records
arriving in between).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from kaflite.client import TopicPartition
from kaflite.spark._fetch import read_range
from kaflite.spark._kafka import OffsetReader, report_data_loss
from kaflite.spark.offsets import (
    OffsetRange,
    PartitionOffsets,
    SparkOffsets,
    from_json,
    offsets_behind_latest,
    rate_limit,
    to_json,
)
from kaflite.spark.options import SourceOptions
from kaflite.spark.reader import KafkaInputPartition, executor_params, input_partitions

__all__ = ["HAS_ADMISSION_CONTROL", "KafkaStreamReader", "ReadAllAvailable", "ReadLimit",
           "ReadMaxRows", "ReadMinRows", "SupportsTriggerAvailableNow"]

log = logging.getLogger("kaflite.spark")

try:  # Spark 4.2+: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
    HAS_ADMISSION_CONTROL = True
except ImportError:  # pragma: no cover - older PySpark
    HAS_ADMISSION_CONTROL = False
    if not TYPE_CHECKING:   # (type checking sees PySpark 4.2+'s classes)
        # Stand-ins with the same names, fields and value semantics (4.2+'s are
        # dataclasses).
        class SupportsTriggerAvailableNow:
            pass

        class ReadLimit:
            pass

        @dataclass
        class ReadAllAvailable(ReadLimit):
            pass

        @dataclass
        class ReadMaxRows(ReadLimit):
            max_rows: int

        @dataclass
        class ReadMinRows(ReadLimit):
            min_rows: int


def _tps(tps: Iterable[TopicPartition]) -> str:
    return "Set(" + ", ".join(sorted(map(str, tps))) + ")"


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.params = executor_params(opts)
        self._reader: OffsetReader | None = None
        self._latest: PartitionOffsets | None = None     # for reportLatestOffset / metrics
        self._available_now = False
        self._target: PartitionOffsets | None = None     # Trigger.AvailableNow's end
        self._last_trigger_ms = 0.0
        self._initial: PartitionOffsets | None = None    # resolved once, see initialOffset
        # Spark < 4.2 self-limiting: the end of the last batch Spark planned, and the
        # previous answer of latestOffset() (None before the first, which is never capped).
        self._planned_end: SparkOffsets | None = None
        self._answer: SparkOffsets | None = None

    # Spark pickles the reader for the executors; the driver's client stays here.
    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_reader"] = None
        return state

    @property
    def offsets(self) -> OffsetReader:
        if self._reader is None:
            self._reader = OffsetReader(self.opts, "driver-0")
        return self._reader

    # -- positions ---------------------------------------------------------------------------
    def initialOffset(self) -> SparkOffsets:
        if self._initial is None:
            r = self.offsets
            self._initial = r.resolve(self.opts.starting, True, r.partitions())
            log.info("initial offsets of %s: %s", self.opts.strategy, self._initial)
        return to_json(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _fetch_latest(self, start: PartitionOffsets) -> PartitionOffsets:
        """Latest offsets, retried while a partition seems to go backwards (a lagging leader)."""
        r = self.offsets
        attempts = max(self.opts.fetch_offset_num_retries, 1)
        latest: PartitionOffsets = {}
        for attempt in range(1, attempts + 1):
            latest = r.latest(r.partitions())
            wrong = [tp for tp, off in latest.items() if off < start.get(tp, off)]
            if not wrong or attempt == attempts:
                break
            log.warning("Found incorrect offsets in some partitions %s; retrying", wrong)
            time.sleep(self.opts.fetch_offset_retry_interval_ms / 1000)
        return latest

    def latestOffset(self, start: SparkOffsets | None = None,
                     limit: ReadLimit | None = None) -> SparkOffsets:
        own = start is None
        if start is None:
            start, limit = self._own_start_and_limit()
        begin = from_json(start) if start is not None else {}
        latest = self._fetch_latest(begin)
        self._latest = latest
        if self._available_now:
            if self._target is None:
                self._target = latest
            latest = self._target
        end = self._limit(begin, latest, limit if limit is not None else ReadAllAvailable())
        if log.isEnabledFor(logging.INFO):
            # Spark's Kafka metrics (Python sources cannot report custom metrics).
            behind = offsets_behind_latest(end, self._latest)
            if behind:
                log.info("%s: offsets behind latest after this batch: min %s, max %s, avg %s",
                         self.opts.strategy, behind["minOffsetsBehindLatest"],
                         behind["maxOffsetsBehindLatest"], behind["avgOffsetsBehindLatest"])
        answer = to_json(end)
        if own:
            self._answer = answer
        return answer

    def _own_start_and_limit(self) -> tuple[SparkOffsets, ReadLimit]:
        """Spark 4.0/4.1's ``latestOffset()``: the batch's start, and the limit to apply."""
        if self._answer is not None:
            # Spark plans each new answer as a batch end before it asks again (or, under
            # the AvailableNow wrapper, asks again for the progress report only).
            return self._answer, self.getDefaultReadLimit()
        # The first answer may be the whole run (Trigger.Once/AvailableNow): never capped.
        # With no batch planned yet this is a new query (a restart re-plans its newest batch
        # first), whose batch 0 starts at the initial offsets: resolve them now, before the
        # latest offsets, so that they cannot lie past this batch's end.
        start = self._planned_end if self._planned_end is not None else self.initialOffset()
        return start, ReadAllAvailable()

    def _limit(self, start: PartitionOffsets, latest: PartitionOffsets,
               limit: ReadLimit) -> PartitionOffsets:
        if isinstance(limit, ReadAllAvailable):
            return latest
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) \
            else self.opts.min_offsets_per_trigger
        if min_rows is not None and not self._available_now \
                and self._delay_batch(min_rows, start, latest):
            return dict(start)
        if max_rows is None:
            return latest
        new = [tp for tp in latest if tp not in start]
        return rate_limit(max_rows, start, latest, self.offsets.earliest(new) if new else {})

    def _delay_batch(self, min_rows: int, start: PartitionOffsets,
                     latest: PartitionOffsets) -> bool:
        """minOffsetsPerTrigger: hold the batch back until enough records or maxTriggerDelay."""
        now = time.time() * 1000
        if now - self._last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self._last_trigger_ms = now
            return False
        waiting = sum(off - start.get(tp, 0) for tp, off in latest.items())
        if waiting < min_rows:
            log.debug("Delaying batch as number of records available is less than "
                      "minOffsetsPerTrigger")
            return True
        self._last_trigger_ms = now
        return False

    def reportLatestOffset(self) -> SparkOffsets | None:
        return to_json(self._latest) if self._latest else None

    def metrics(self, consumed: SparkOffsets | None) -> dict[str, str]:
        """Spark's Kafka source metrics: offsets behind latest (min, max, avg)."""
        if consumed is None or self._latest is None:
            return {}
        return offsets_behind_latest(from_json(consumed), self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    # -- planning ---------------------------------------------------------------------------------
    def partitions(self, start: SparkOffsets, end: SparkOffsets
                   ) -> list[KafkaInputPartition]:
        self._planned_end = end
        begin, until = from_json(start), from_json(end)
        if begin == until:
            return []
        fail = self.opts.fail_on_data_loss
        new = set(until) - set(begin)
        new_starts = self.offsets.earliest(new) if new else {}
        if set(new_starts) != new:
            report_data_loss(fail, f"Cannot find earliest offsets of "
                                   f"{_tps(new - set(new_starts))}. Some data may have been "
                                   "missed")
        if new_starts:
            log.info("Partitions added: %s", new_starts)
        for tp, off in sorted(new_starts.items()):
            if off != 0:
                report_data_loss(fail, f"Added partition {tp} starts from {off} instead of 0. "
                                       "Some data may have been missed")
        gone = set(begin) - set(until)
        if gone:
            report_data_loss(fail, f"{_tps(gone)} are gone. Some data may have been missed.")
        ranges = []
        for tp in sorted(until):
            first = begin.get(tp, new_starts.get(tp))
            if first is None:
                continue
            last = until[tp]
            if last < first:
                report_data_loss(fail, f"Partition {tp}'s offset was changed from {first} to "
                                       f"{last}, some data may have been missed")
            ranges.append(OffsetRange(tp.topic, tp.partition, first, last))
        return input_partitions(ranges, self.opts, self.params)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            # Nothing to read: PySpark plans one empty InputPartition(None) instead of none.
            return iter(())
        return read_range(partition.range, partition.params)

    def commit(self, end: SparkOffsets) -> None:
        # Spark's checkpoint is the position; nothing is committed to Kafka.
        log.debug("batch done up to %s", end)

    def stop(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

