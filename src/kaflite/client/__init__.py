"""kaflite.client: the smart Kafka client (async), with a blocking façade in ``.sync``.

    from kaflite.client import Producer, Consumer, Admin
"""

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

__all__ = ["AcknowledgeType", "Admin", "AuthenticationError", "BaseClient", "BatchMetadata", "BufferFull", "CommitFailedError", "ConfigError",
           "ConfigResource", "ConnectionInfo", "Consumer", "ConsumerRecord", "Event", "GroupMembershipOperation",
           "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp", "Producer",
           "RebalanceListener", "RecordList", "RecordMetadata", "ShareConsumer", "ShareRecord",
           "TopicPartition"]
