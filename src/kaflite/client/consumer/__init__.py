"""The kaflite consumer (see ``_consumer`` for the API, ``_fetcher`` and ``_coordinator``).

Its names are imported on first use (``kaflite._lazy``).
"""

from typing import TYPE_CHECKING

from kaflite._lazy import lazy_names

if TYPE_CHECKING:
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
__all__ = ["ASSIGNORS", "EARLIEST", "LATEST", "AbortedFilter", "CommitCallback",
           "CommitFailedError", "Consumer", "ConsumerRecord", "GroupMembershipOperation",
           "IllegalStateError", "OffsetAndMetadata", "OffsetAndTimestamp", "RebalanceListener",
           "RecordList", "TopicPartition", "list_offsets"]

__getattr__, __dir__ = lazy_names(__name__, {
    "AbortedFilter": "._aborted", "ASSIGNORS": "._assignors",
    **dict.fromkeys(("CommitCallback", "CommitFailedError", "Consumer", "IllegalStateError"),
                    "._consumer"),
    **dict.fromkeys(("EARLIEST", "LATEST", "list_offsets"), "._offsets"),
    **dict.fromkeys(("ConsumerRecord", "GroupMembershipOperation", "OffsetAndMetadata",
                     "OffsetAndTimestamp", "RebalanceListener", "RecordList", "TopicPartition"),
                    "._types"),
})
