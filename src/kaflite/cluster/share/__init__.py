"""Share groups (KIP-932) on the partition leaders: share-partitions, share sessions,
and their durable state. Membership lives with the group coordinator
(``kaflite.cluster.groups._share``); see docs/share-groups.md."""

from kaflite.cluster.share._config import ShareConfig, ShareGroupSettings
from kaflite.cluster.share._manager import SharePartitionManager
from kaflite.cluster.share._partition import (
    AckType,
    Acquired,
    BatchSpan,
    InFlightRecord,
    RecordState,
    SharePartition,
    ShareSnapshot,
)
from kaflite.cluster.share._persister import MemoryPersister, PersistedState, Persister

__all__ = [
    "AckType",
    "Acquired",
    "BatchSpan",
    "InFlightRecord",
    "MemoryPersister",
    "PersistedState",
    "Persister",
    "RecordState",
    "ShareConfig",
    "ShareGroupSettings",
    "SharePartition",
    "SharePartitionManager",
    "ShareSnapshot",
]
