"""The kaflite consumer (see ``_consumer`` for the API, ``_fetcher`` and ``_coordinator``)."""

from kaflite.client.consumer._assignors import ASSIGNORS
from kaflite.client.consumer._consumer import CommitFailedError, Consumer, IllegalStateError
from kaflite.client.consumer._types import (
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RebalanceListener,
    RecordList,
    TopicPartition,
)

__all__ = ["ASSIGNORS", "CommitFailedError", "Consumer", "ConsumerRecord",
           "IllegalStateError", "OffsetAndMetadata", "OffsetAndTimestamp",
           "RebalanceListener", "RecordList", "TopicPartition"]
