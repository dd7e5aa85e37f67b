"""Value types of the share consumer: acknowledgement types and the records it hands out."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Generic, NamedTuple

from kaflite.client.consumer._types import Headers, K, TopicPartition, V
from kaflite.protocol import errors

__all__ = ["GAP", "AcknowledgeType", "AcknowledgementCommitCallback", "ShareRecord"]

# Acknowledgement type 0 on the wire: an offset in an acquired range that holds no
# record for the application (a control record, a compacted-away offset).
GAP = 0


class AcknowledgeType(enum.IntEnum):
    """How a delivered record is acknowledged (Java's ``AcknowledgeType``; the values
    are the wire's)."""

    ACCEPT = 1    # processed: never delivered again
    RELEASE = 2   # give it back: delivered again (to any member), delivery count + 1
    REJECT = 3    # unprocessable: archived, never delivered again
    RENEW = 4     # KIP-1222: keep it, extend the acquisition lock; acknowledge it later


class ShareRecord(NamedTuple, Generic[K, V]):
    """A record delivered to a share consumer: a ``ConsumerRecord``'s fields and how
    many times the group has delivered it (1 the first time)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: K | None
    value: V | None
    headers: Headers = ()
    delivery_count: int = 1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


# callback(offsets acknowledged by partition, the partition's error or None), once per
# partition when a leader has answered an acknowledgement (Java's
# AcknowledgementCommitCallback, called per partition here)
AcknowledgementCommitCallback = Callable[
    [Mapping[TopicPartition, set[int]], errors.KafkaError | None], object]
