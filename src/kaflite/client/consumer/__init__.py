"""The kaflite consumer (see ``_consumer`` for the API, ``_fetcher`` and ``_coordinator``)."""

from kaflite.client.consumer._aborted import AbortedFilter
from kaflite.client.consumer._assignors import ASSIGNORS
from kaflite.client.consumer._consumer import (
    CommitCallback,
    CommitFailedError,
    Consumer,
    IllegalStateError,
)
from kaflite.client.consumer._offsets import EARLIEST, LATEST, list_offsets
from kaflite.client.consumer._types import (
    ConsumerRecord,
    GroupMembershipOperation,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RebalanceListener,
    RecordList,
    TopicPartition,
)

# Building blocks for other readers of partitions (the Spark source's executors):
# read_committed filtering and ListOffsets lookups.
__all__ = ["ASSIGNORS", "EARLIEST", "LATEST", "AbortedFilter", "CommitCallback", "CommitFailedError", "Consumer", "ConsumerRecord",
           "GroupMembershipOperation", "IllegalStateError", "OffsetAndMetadata", "OffsetAndTimestamp",
           "RebalanceListener", "RecordList", "TopicPartition", "list_offsets"]
