"""The ``kaflite`` format: a PySpark Python data source for Kafka topics.

    import kaflite.spark
    kaflite.spark.register(spark)            # or: import kaflite.spark with a session active

    df = (spark.read.format("kaflite")
          .option("kafka.bootstrap.servers", servers)
          .option("subscribe", "events")
          .load())

Spark keeps the name ``kafka`` for its own (JVM) connector, so this one is
``kaflite``; the options, defaults and schema are those of Spark's ``kafka``
format (see ``options.py``). It needs no connector jar: the driver plans offset
ranges and the executors' Python workers read them straight from the
partition leaders with the kaflite client. With ``shareGroup`` the topics are
read as a share group's queue instead (``share.py`` for batch reads,
``share_stream.py`` for streaming ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyspark.errors import AnalysisException
from pyspark.sql.datasource import DataSource
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from kaflite.spark._env import use_driver_python

# The readers and writers (and the client under them) are imported where they are made.
# Spark runs each planning step in a Python worker process of its own (finding the
# format, making the source, planning a read, planning a write, committing it); only
# those that read or write need the client, whose import costs about a second.
if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from kaflite.spark.reader import KafkaBatchReader
    from kaflite.spark.share import ShareBatchReader
    from kaflite.spark.share_stream import ShareStreamReader
    from kaflite.spark.stream import KafkaStreamReader
    from kaflite.spark.writer import KafkaBatchWriter, KafkaStreamWriter

__all__ = ["AVAILABLE_NOW_WRAPPER", "FORMAT", "KafliteDataSource", "enable_available_now", "register",
           "spark_schema"]

FORMAT = "kaflite"
AVAILABLE_NOW_WRAPPER = "spark.sql.streaming.triggerAvailableNowWrapper.enabled"


def spark_schema(include_headers: bool = False) -> StructType:
    """Spark's Kafka source schema."""
    s = (StructType()
         .add("key", BinaryType()).add("value", BinaryType()).add("topic", StringType())
         .add("partition", IntegerType()).add("offset", LongType())
         .add("timestamp", TimestampType()).add("timestampType", IntegerType()))
    if include_headers:
        s = s.add("headers", ArrayType(StructType().add("key", StringType())
                                       .add("value", BinaryType())))
    return s


def _include_headers(options: Mapping[str, str]) -> bool:
    raw = options.get("includeHeaders", options.get("includeheaders", "false"))
    return str(raw).strip().lower() == "true"


def _check_schema(options: Mapping[str, str], schema: StructType) -> None:
    from kaflite.spark.options import KafkaOptionError

    if schema.simpleString() != spark_schema(_include_headers(options)).simpleString():
        raise KafkaOptionError("Kafka source has a fixed schema and cannot be set with a "
                               "custom one")


class KafliteDataSource(DataSource):
    """Reads and writes Kafka topics with Spark's Kafka options and schema."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return spark_schema(_include_headers(self.options))

    def reader(self, schema: StructType) -> KafkaBatchReader | ShareBatchReader:
        from kaflite.spark.options import parse_source_options
        from kaflite.spark.reader import KafkaBatchReader
        from kaflite.spark.share import ShareBatchReader, parse_share_options

        _check_schema(self.options, schema)
        share = parse_share_options(self.options)
        if share is not None:
            return ShareBatchReader(share)   # the topics as a share group's queue
        return KafkaBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> KafkaStreamReader | ShareStreamReader:
        from kaflite.spark.options import parse_source_options
        from kaflite.spark.share import parse_share_options
        from kaflite.spark.share_stream import ShareStreamReader
        from kaflite.spark.stream import KafkaStreamReader

        _check_schema(self.options, schema)
        share = parse_share_options(self.options)
        if share is not None:
            return ShareStreamReader(share)   # the driver is the group's member
        return KafkaStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        from kaflite.spark.options import parse_sink_options
        from kaflite.spark.writer import KafkaBatchWriter, check_save_mode

        check_save_mode(overwrite)
        return KafkaBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        from kaflite.spark.options import parse_sink_options
        from kaflite.spark.writer import KafkaStreamWriter

        return KafkaStreamWriter(parse_sink_options(self.options), schema)


def register(spark: SparkSession | ConnectSession) -> bool:
    """Make the ``kaflite`` format usable in ``spark`` (a SparkSession), workers included.

    With a local master and no worker Python chosen, the session's workers
    are pointed at this interpreter first (``_env.use_driver_python``). Then
    the format is registered, unless PySpark's own lookup found it already
    (``pyspark_kaflite``, a static source Spark lets no one replace; it runs
    in the interpreter the JVM was started with). Returns whether this call
    registered it.
    """
    sc = getattr(spark, "sparkContext", None)   # Spark Connect has none (an AttributeError)
    if sc is not None:
        use_driver_python(sc)
    try:
        spark.dataSource.register(KafliteDataSource)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
        return False
    return True


def enable_available_now(spark: SparkSession | ConnectSession) -> bool:
    """Let Trigger.AvailableNow run kaflite queries to the end on Spark 4.0/4.1.

    Those versions give Python sources no ``SupportsTriggerAvailableNow``, and
    by default run an AvailableNow query over such a source as one batch,
    like Trigger.Once: no batch without data follows, so windows a watermark
    closes are not emitted. This sets Spark's ``AVAILABLE_NOW_WRAPPER`` for
    ``spark``'s session: the engine then asks the source for its latest
    offsets once, reads up to them and runs the batches without data that
    stateful operators ask for, then stops. That is safe for kaflite's
    reader (fixed offset ranges, nothing consumed by asking), but the setting
    applies to every source of the session, and Spark warns that sources that
    are not replayable can lose or repeat data under it. Returns whether the
    setting was made; on Spark 4.2+ it is not needed and nothing is changed.
    """
    from kaflite.spark.stream import HAS_ADMISSION_CONTROL

    if HAS_ADMISSION_CONTROL:
        return False
    spark.conf.set(AVAILABLE_NOW_WRAPPER, "true")
    return True
