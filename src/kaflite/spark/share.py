"""Reading topics as a share group: ``.option("shareGroup", NAME)``.

    df = (spark.read.format("kaflite")
          .option("kafka.bootstrap.servers", servers)
          .option("subscribe", "jobs")
          .option("shareGroup", "spark-workers")
          .option("shareConsumers", 4)
          .load())

Without the option the source reads offset ranges planned on the driver, as
Spark's ``kafka`` format does. With it, the topics are a queue: the driver
plans ``shareConsumers`` tasks (default: as many as the topics have
partitions), and each task runs a ``ShareConsumer`` of the group in explicit
acknowledgement mode. Many tasks may read the same partitions; the partition
leaders hand each record to one of them. A task polls until nothing arrived
for ``shareIdleTimeoutMs`` (default 2000) or it holds
``maxRecordsPerPartition`` records, yielding each poll's records as they come.
It keeps what it read by renewing the acquisition locks itself (RENEW,
KIP-1222): every record when it arrives, and all it holds again whenever half
the lock duration (``acquisition_lock_timeout_ms``) has passed since the last
renewal, as a Java application must (no consumer renews locks by itself). When the task has read to its end, which is when Spark has
taken every row of it, it accepts all it holds (ShareAcknowledge) and leaves
the group. A task that fails or is stopped before that acknowledges nothing:
its records are released when its consumer closes, or come back when their
locks expire if the executor died, and another task reads them again. That is
at-least-once delivery for failures of the reading task, acknowledged at the
task's end (not at the sink's commit, which a reading task of a batch job cannot
wait for: docs/share-groups.md says why); a sink that must not see a record
twice has to be idempotent. Streaming reads (``spark.readStream``) accept at
Spark's commit instead: the driver is the group's member there
(``share_stream.py``).

Where a share group starts reading a partition it has never read is the
group's ``share.auto.offset.reset`` (``latest`` unless configured), not
``startingOffsets``; ``endingOffsets``, ``assign``, ``subscribePattern``,
``minOffsetsPerTrigger`` and ``maxTriggerDelay`` do not apply to a queue and
are refused. The rows have Spark's Kafka schema;
``timestampType`` is 0 (the broker does not say which timestamp a share fetch
carries per record).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from kaflite.client.share import AcknowledgeType, ShareRecord
from kaflite.client.share._consumer import UNSUPPORTED
from kaflite.spark.options import (
    KafkaOptionError,
    _bool,
    _kafka_params,
    _lower,
    client_config,
)
from kaflite.spark.schema import HEADERS_TYPE, TIMESTAMP, arrow_schema

__all__ = ["ShareBatchReader", "ShareInputPartition", "ShareOptions", "parse_share_options",
           "read_share"]

log = logging.getLogger("kaflite.spark")

DEFAULT_IDLE_MS = 2000
DEFAULT_MAX_RECORDS = 100_000
POLL_MS = 200


@dataclass(frozen=True)
class ShareOptions:
    group: str
    topics: tuple[str, ...]
    config: tuple[tuple[str, object], ...]   # the share consumers' client properties
    consumers: int | None = None
    idle_ms: int = DEFAULT_IDLE_MS
    max_records: int = DEFAULT_MAX_RECORDS
    include_headers: bool = False
    # streaming reads (share_stream.py): the executors' Fetch, and the micro-batches
    executor_config: tuple[tuple[str, object], ...] = ()
    max_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000


def _positive(params: Mapping[str, str], key: str, name: str) -> int | None:
    raw = params.get(key)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise KafkaOptionError(f"Option '{name}' must be a positive integer, got '{raw}'") \
            from None
    if value <= 0:
        raise KafkaOptionError(f"Option '{name}' must be a positive integer, got '{raw}'")
    return value


def parse_share_options(options: Mapping[str, object]) -> ShareOptions | None:
    """The share-group read the options ask for, or None (an offset-range read)."""
    params = _lower(options)
    group = params.get("sharegroup", "").strip()
    if not group:
        if "sharegroup" in params:
            raise KafkaOptionError("Option 'shareGroup' must name a share group")
        return None
    for key, name in (("assign", "assign"), ("subscribepattern", "subscribePattern"),
                      ("endingoffsets", "endingOffsets"), ("startingoffsets", "startingOffsets"),
                      ("endingtimestamp", "endingTimestamp"),
                      ("startingtimestamp", "startingTimestamp"),
                      ("minoffsetspertrigger", "minOffsetsPerTrigger"),
                      ("maxtriggerdelay", "maxTriggerDelay")):
        if key in params:
            raise KafkaOptionError(f"Option '{name}' does not apply to a share-group read "
                                   "(shareGroup): a share group reads its topics as a queue")
    topics = tuple(t.strip() for t in params.get("subscribe", "").split(",") if t.strip())
    if not topics:
        raise KafkaOptionError("A share-group read (shareGroup) needs 'subscribe' with the "
                               "topics to read")
    kafka = _kafka_params(params)
    for name in [n for n in kafka if n in UNSUPPORTED or n == "group.id"]:
        log.warning("Kafka option 'kafka.%s' does not apply to a share consumer; ignored", name)
        del kafka[name]
    config = client_config(kafka, "consumer", f"spark-share-{group}",
                           **{"group.id": group, "share.acknowledgement.mode": "explicit"})
    max_records = _positive(params, "maxrecordsperpartition", "maxRecordsPerPartition")
    executor = client_config(kafka, "consumer", f"spark-share-{group}-executor")
    return ShareOptions(
        group=group, topics=topics, config=tuple(sorted(config.items())),
        consumers=_positive(params, "shareconsumers", "shareConsumers"),
        idle_ms=_positive(params, "shareidletimeoutms", "shareIdleTimeoutMs") or DEFAULT_IDLE_MS,
        max_records=max_records or DEFAULT_MAX_RECORDS,
        include_headers=_bool(params, "includeheaders", "includeHeaders", False),
        executor_config=tuple(sorted(executor.items())),
        max_per_trigger=_positive(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger"),
        min_partitions=_positive(params, "minpartitions", "minPartitions"),
        fail_on_data_loss=_bool(params, "failondataloss", "failOnDataLoss", True),
        poll_timeout_ms=_positive(params, "kafkaconsumer.polltimeoutms",
                                  "kafkaConsumer.pollTimeoutMs") or 120_000)


class ShareInputPartition(InputPartition):
    """One Spark task: one share consumer of the group."""

    def __init__(self, index: int, opts: ShareOptions) -> None:
        super().__init__(index)
        self.opts = opts

    def __repr__(self) -> str:
        return f"ShareInputPartition({self.opts.group}, {self.value})"


class ShareBatchReader(DataSourceReader):
    def __init__(self, opts: ShareOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[ShareInputPartition]:
        n = self.opts.consumers or self._partition_count()
        log.info("share-group read of %s by group %s: %d tasks", ",".join(self.opts.topics),
                 self.opts.group, n)
        return [ShareInputPartition(i, self.opts) for i in range(n)]

    def _partition_count(self) -> int:
        from kaflite.client.sync import Admin

        config = {k: v for k, v in self.opts.config
                  if k not in ("group.id", "share.acknowledgement.mode")}
        config["client.id"] = f"spark-share-{self.opts.group}-driver"
        with Admin(config) as admin:
            found = admin.describe_topics(list(self.opts.topics))
        return max(sum(len(t.partitions) for t in found.values()), 1)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ShareInputPartition):
            return iter(())
        return read_share(partition.opts, partition.value)


def to_arrow(records: Sequence[ShareRecord[bytes, bytes]], include_headers: bool
             ) -> pa.RecordBatch:
    columns: list[pa.Array] = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([r.topic for r in records], pa.string()),
        pa.array([r.partition for r in records], pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp * 1000 for r in records], TIMESTAMP),
        pa.array([0] * len(records), pa.int32()),
    ]
    if include_headers:
        columns.append(pa.array(
            [[{"key": k, "value": None if v is None else bytes(v)} for k, v in r.headers]
             if r.headers else None for r in records], HEADERS_TYPE))
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))


def read_share(opts: ShareOptions, task: int) -> Iterator[pa.RecordBatch]:
    """One task's reading: poll until idle (or full), then accept everything."""
    from kaflite.client.sync import ShareConsumer as SyncShareConsumer

    config = dict(opts.config)
    config["client.id"] = f"{config.get('client.id', 'spark-share')}-{task}-{uuid.uuid4().hex[:6]}"
    consumer: SyncShareConsumer[bytes, bytes] = SyncShareConsumer(config)
    held: list[ShareRecord[bytes, bytes]] = []
    try:
        consumer.subscribe(opts.topics)
        idle = 0
        renewed = time.monotonic()
        while idle < opts.idle_ms and len(held) < opts.max_records:
            records = consumer.poll(POLL_MS)
            lock_ms = consumer.acquisition_lock_timeout_ms()
            if held and lock_ms is not None and \
                    time.monotonic() - renewed >= lock_ms / 2000:
                for r in held:     # their locks start again (sent with the next poll)
                    consumer.acknowledge(r, AcknowledgeType.RENEW)
                renewed = time.monotonic()
            if not records:
                idle += POLL_MS
                continue
            idle = 0
            for r in records:
                consumer.acknowledge(r, AcknowledgeType.RENEW)   # kept until the end
            if not held:
                renewed = time.monotonic()
            held.extend(records)
            yield to_arrow(records, opts.include_headers)
        for r in held:
            consumer.acknowledge(r, AcknowledgeType.ACCEPT)
        failed = {tp: e for tp, e in consumer.commit_sync().items() if e is not None}
        if failed:
            # their locks ended first: the group delivers them again (at-least-once)
            log.warning("share group %s: acknowledgements failed for %s", opts.group,
                        ", ".join(f"{tp} ({e})" for tp, e in sorted(failed.items())))
    finally:
        consumer.close()

