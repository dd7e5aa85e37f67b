"""kaflite.client: the smart Kafka client (async), with a blocking façade in ``.sync``.

    from kaflite.client import Producer, Consumer, Admin

Names are imported on first use (PEP 562): importing the package costs nothing, and a
process that needs only a consumer (a Spark executor's Python worker, which is a new
process for each planning step) does not import the admin client (about 0.4 s).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite._lazy import lazy_names

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient
    from kaflite.client.admin import Admin, ConfigResource, NewTopic
    from kaflite.client.consumer import (
        CommitFailedError,
        Consumer,
        ConsumerRecord,
        GroupMembershipOperation,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        RebalanceListener,
        RecordList,
        TopicPartition,
    )
    from kaflite.client.events import Event
    from kaflite.client.pool import ConnectionInfo
    from kaflite.client.producer import BatchMetadata, BufferFull, Producer, RecordMetadata
    from kaflite.client.share import AcknowledgeType, ShareConsumer, ShareRecord
    from kaflite.config import ConfigError
    from kaflite.protocol.connection import AuthenticationError

__getattr__, __dir__ = lazy_names(__name__, {
    "BaseClient": "kaflite.client._base",
    "Admin": "kaflite.client.admin", "ConfigResource": "kaflite.client.admin",
    "NewTopic": "kaflite.client.admin",
    **dict.fromkeys(("CommitFailedError", "Consumer", "ConsumerRecord",
                     "GroupMembershipOperation", "OffsetAndMetadata", "OffsetAndTimestamp",
                     "RebalanceListener", "RecordList", "TopicPartition"),
                    "kaflite.client.consumer"),
    "Event": "kaflite.client.events",
    "ConnectionInfo": "kaflite.client.pool",
    **dict.fromkeys(("BatchMetadata", "BufferFull", "Producer", "RecordMetadata"),
                    "kaflite.client.producer"),
    **dict.fromkeys(("AcknowledgeType", "ShareConsumer", "ShareRecord"),
                    "kaflite.client.share"),
    "ConfigError": "kaflite.config",
    "AuthenticationError": "kaflite.protocol.connection",
})

__all__ = ["AcknowledgeType", "Admin", "AuthenticationError", "BaseClient", "BatchMetadata",
           "BufferFull", "CommitFailedError", "ConfigError", "ConfigResource",
           "ConnectionInfo", "Consumer", "ConsumerRecord", "Event", "GroupMembershipOperation",
           "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp", "Producer",
           "RebalanceListener", "RecordList", "RecordMetadata", "ShareConsumer", "ShareRecord",
           "TopicPartition"]

