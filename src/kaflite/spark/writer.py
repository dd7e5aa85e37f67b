"""Writes: ``df.write.format("kaflite")`` and ``df.writeStream.format("kaflite")``.

The columns are Spark's Kafka sink's:

    value       string or binary, required (null writes a tombstone)
    key         string or binary, optional
    topic       string; the ``topic`` option, when given, overrides it
    partition   int, optional (else the producer's partitioner, by key)
    headers     array<struct<key: string, value: binary>>, optional

Each task writes its rows with one kaflite producer (kept per executor
process, as Spark caches its producers), waits for every acknowledgement and
fails if any record could not be written. The producer is idempotent (acks=all,
sequence numbers), so a retried request never duplicates a record; a retried
*task* may, so delivery is at least once, as with Spark's sink.

Save modes: Spark's Kafka sink writes in Append and ErrorIfExists (its
default) and refuses the others. Spark itself refuses ErrorIfExists and Ignore
for every Python data source (UNSUPPORTED_DATA_SOURCE_SAVE_MODE) before the
source is asked, so batch writes here say ``mode("append")``; Overwrite, which
Spark does pass on, is refused with the Kafka sink's message.

Where PySpark has them (4.1+), the Arrow writers are used: the rows arrive as
``pyarrow.RecordBatch`` es and are turned into Python values one column at a
time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceStreamWriter,
    DataSourceWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

if TYPE_CHECKING:
    from kaflite.client.producer import RecordMetadata
    from kaflite.client.sync import Producer
from kaflite.config import resolve
from kaflite.spark.options import SINK_CLIENT_ID, KafkaOptionError, SinkOptions, client_config

try:  # PySpark 4.1+
    from pyspark.sql.datasource import DataSourceArrowWriter as _BatchBase
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamBase
    HAS_ARROW_WRITER = True
except ImportError:  # pragma: no cover - older PySpark
    HAS_ARROW_WRITER = False
    if not TYPE_CHECKING:   # (type checking sees PySpark 4.1+'s classes)
        _BatchBase = DataSourceWriter
        _StreamBase = DataSourceStreamWriter

__all__ = ["KafkaBatchWriter", "KafkaStreamWriter", "KafkaWriteError", "check_save_mode",
           "validate_sink_schema"]

log = logging.getLogger("kaflite.spark")

HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


class KafkaWriteError(RuntimeError):
    """Records a task could not write."""


def check_save_mode(overwrite: bool) -> None:
    if overwrite:
        raise KafkaOptionError("Save mode Overwrite not allowed for Kafka. Allowed save modes "
                               "are Append and ErrorIfExists (default).")


def _same(t: DataType, expected: DataType) -> bool:
    """Type equality ignoring nullability (Spark compares sameType)."""
    if isinstance(expected, ArrayType):
        return isinstance(t, ArrayType) and _same(t.elementType, expected.elementType)
    if isinstance(expected, StructType):
        return isinstance(t, StructType) and len(t.fields) == len(expected.fields) and all(
            a.name == b.name and _same(a.dataType, b.dataType)
            for a, b in zip(t.fields, expected.fields, strict=True))
    return type(t) is type(expected)


def validate_sink_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's ``KafkaWriter.validateQuery``: the columns a Kafka sink accepts."""
    fields = {f.name: f.dataType for f in schema.fields}
    if topic_option is None:
        if "topic" not in fields:
            raise KafkaOptionError("topic option required when no 'topic' attribute is present. "
                                   "Use the topic option for setting a topic.")
        if not isinstance(fields["topic"], StringType):
            raise KafkaOptionError("Topic type must be a string")
    if "key" in fields and not isinstance(fields["key"], (StringType, BinaryType)):
        raise KafkaOptionError("key attribute type must be a string or binary")
    if "value" not in fields:
        raise KafkaOptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"], (StringType, BinaryType)):
        raise KafkaOptionError("value attribute type must be a string or binary")
    if "headers" in fields and not _same(fields["headers"], HEADERS_TYPE):
        raise KafkaOptionError("headers attribute type must be a "
                               "array<struct<key:string,value:binary>>")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise KafkaOptionError("partition attribute type must be an int")


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    records: int


# One producer per configuration per executor process (Spark's CachedKafkaProducer).
_producers: dict[tuple[tuple[str, str], ...], Producer] = {}
_producers_lock = threading.Lock()


def _producer(config: Mapping[str, object]) -> Producer:
    # Imported here: the planning worker that makes the writer needs no client.
    from kaflite.client.sync import Producer

    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    with _producers_lock:
        p = _producers.get(key)
        if p is None:
            p = Producer(config)
            p.start()
            _producers[key] = p
        return p


class _Delivery:
    """Counts acknowledgements and keeps the first failure (runs on the client's loop)."""

    def __init__(self) -> None:
        self.failed: BaseException | None = None
        self.failures = 0

    def __call__(self, err: BaseException | None, _metadata: RecordMetadata | None) -> None:
        if err is not None:
            self.failures += 1
            if self.failed is None:
                self.failed = err


def _text(v: Any) -> Any:
    """A column's value as the producer takes it: strings UTF-8 encoded, Spark's
    binary values (``bytearray``) as ``bytes``, which the sync producer batches in
    this thread (other types go through the loop thread one by one)."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, bytearray | memoryview):
        return bytes(v)
    return v


class _KafkaWrite:
    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        validate_sink_schema(schema, opts.topic)
        self.topic = opts.topic
        self.config = client_config(opts.kafka_params, "producer", SINK_CLIENT_ID)
        resolve("producer", self.config)
        self.columns = [f.name for f in schema.fields]

    def _send(self, rows: Iterable[dict[str, Any]]) -> KafkaCommitMessage:
        producer = _producer(self.config)
        delivery = _Delivery()
        n = 0
        fixed_topic = self.topic
        for row in rows:
            topic = fixed_topic or row.get("topic")
            if topic is None:
                raise KafkaWriteError("null topic present in the data. Use the topic option "
                                      "for setting a topic.")
            headers = row.get("headers")
            if headers:
                headers = [(h["key"], _text(h["value"])) for h in headers]
            producer.produce(topic, _text(row.get("value")), key=_text(row.get("key")),
                             partition=row.get("partition"), headers=headers or None,
                             on_delivery=delivery)
            n += 1
        producer.flush()
        if delivery.failed is not None:
            raise KafkaWriteError(f"{delivery.failures} of {n} records could not be written: "
                                  f"{delivery.failed!r}") from delivery.failed
        return KafkaCommitMessage(n)

    def _rows_from_arrow(self, batches: Iterator[Any]) -> Iterator[dict[str, Any]]:
        for batch in batches:
            cols = {name: batch.column(name).to_pylist() for name in batch.schema.names
                    if name in ("key", "value", "topic", "partition", "headers")}
            names = list(cols)
            for values in zip(*(cols[name] for name in names), strict=True):
                yield dict(zip(names, values, strict=True))

    def _write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        if HAS_ARROW_WRITER:
            return self._send(self._rows_from_arrow(iterator))
        return self._send(row.asDict(recursive=True) for row in iterator)


class KafkaBatchWriter(_KafkaWrite, _BatchBase):
    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("wrote %d records to Kafka", total)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Records already acknowledged stay in Kafka: there is no transaction to abort.
        log.warning("write aborted; records written by finished tasks remain in Kafka")


class KafkaStreamWriter(_KafkaWrite, _StreamBase):
    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total = sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))
        log.info("batch %d: wrote %d records to Kafka", batchId, total)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("batch %d aborted; records written by finished tasks remain in Kafka",
                    batchId)
