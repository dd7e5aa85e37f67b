"""Batch reads: ``spark.read.format("kaflite")``.

The driver resolves the starting and ending offsets of every partition the
subscription covers (default: earliest to latest), splits the ranges into
Spark tasks (``minPartitions``, ``maxRecordsPerPartition``) and hands each
task an ``OffsetRange``; the executors fetch their ranges straight from the
partition leaders (``_fetch.read_range``) and yield Arrow batches.

Spark pickles the reader before it plans the partitions, so everything a
task needs travels in its ``KafkaInputPartition``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from kaflite.config import resolve
from kaflite.spark._fetch import DEFAULT_PARTITION_FETCH_BYTES, ExecutorParams, read_range
from kaflite.spark._kafka import OffsetReader
from kaflite.spark.offsets import OffsetRange, plan_ranges
from kaflite.spark.options import SourceOptions, client_config

__all__ = ["KafkaBatchReader", "KafkaInputPartition", "executor_params", "input_partitions"]

log = logging.getLogger("kaflite.spark")


class KafkaInputPartition(InputPartition):
    """One Spark task: an offset range and how to read it."""

    def __init__(self, index: int, offset_range: OffsetRange, params: ExecutorParams) -> None:
        super().__init__(index)
        self.range = offset_range
        self.params = params

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.range})"


def executor_params(opts: SourceOptions) -> ExecutorParams:
    """The executors' client config, validated on the driver so bad options fail early."""
    config = client_config(opts.kafka_params, "consumer", opts.executor_client_id())
    resolve("consumer", config)
    fetch_bytes = int(opts.kafka_params.get("max.partition.fetch.bytes",
                                            DEFAULT_PARTITION_FETCH_BYTES))
    return ExecutorParams(config=tuple(sorted(config.items())),
                          group_id=opts.group_id("executor"),
                          include_headers=opts.include_headers,
                          fail_on_data_loss=opts.fail_on_data_loss,
                          poll_timeout_ms=opts.poll_timeout_ms,
                          isolation_level=opts.isolation_level,
                          fetch_bytes=fetch_bytes)


def input_partitions(ranges: list[OffsetRange], opts: SourceOptions,
                     params: ExecutorParams) -> list[KafkaInputPartition]:
    planned = plan_ranges(ranges, opts.min_partitions, opts.max_records_per_partition)
    return [KafkaInputPartition(i, r, params) for i, r in enumerate(planned)]


class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.params = executor_params(opts)

    def partitions(self) -> list[KafkaInputPartition]:
        opts = self.opts
        assert opts.ending is not None
        reader = OffsetReader(opts, "driver-0")
        try:
            tps = reader.partitions()
            start = reader.resolve(opts.starting, True, tps)
            end = reader.resolve(opts.ending, False, tps)
        finally:
            reader.close()
        if set(start) != set(end):
            raise RuntimeError(
                "different topic partitions for starting offsets topics["
                f"{','.join(sorted(map(str, start)))}] and ending offsets topics["
                f"{','.join(sorted(map(str, end)))}]")
        ranges = []
        for tp in sorted(start):
            if end[tp] < start[tp]:
                raise ValueError(
                    f"Beginning offset {start[tp]} is after the ending offset {end[tp]} for "
                    f"topic {tp.topic} partition {tp.partition}. You either provided an invalid "
                    "fromOffset, or the Kafka topic has been damaged")
            ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
        parts = input_partitions(ranges, opts, self.params)
        log.info("batch read of %s: %d tasks for %s", opts.strategy, len(parts),
                 ", ".join(map(str, ranges)))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaInputPartition):
            # Nothing to read: PySpark plans one empty InputPartition(None) instead of none.
            return iter(())
        return read_range(partition.range, partition.params)
