"""The broker's persistent partition log, in Kafka's on-disk layout.

One ``PartitionLog`` per partition replica, one ``LogManager`` per broker data
directory, one ``LogConfig`` per topic. The code is synchronous and meant to be
called from the broker's event loop: an append is one ``os.write`` and a read one
``os.pread``; fsync happens only when ``flush.messages`` or an explicit
``flush()`` asks for it.

See ``docs/log.md`` for the layout, the recovery rules and measured throughput.
"""

from kaflite.cluster.log._cleaner import CleanerStats
from kaflite.cluster.log._config import LogConfig
from kaflite.cluster.log._deferred_sync import flush as flush_deferred_fsyncs
from kaflite.cluster.log._manager import LogManager
from kaflite.cluster.log._partition import PartitionLog
from kaflite.cluster.log._segment import LogSegment
from kaflite.cluster.log._types import (
    AppendOrigin,
    AppendResult,
    LogError,
    ProducerInfo,
    ReadResult,
    SegmentInfo,
    TimestampOffset,
    UnexpectedAppendOffsetError,
)

__all__ = [
    "AppendOrigin",
    "AppendResult",
    "CleanerStats",
    "LogConfig",
    "LogError",
    "LogManager",
    "LogSegment",
    "PartitionLog",
    "ProducerInfo",
    "ReadResult",
    "SegmentInfo",
    "TimestampOffset",
    "UnexpectedAppendOffsetError",
    "flush_deferred_fsyncs",
]
