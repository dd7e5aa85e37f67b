"""Share groups (KIP-932) on the client: ``ShareConsumer`` (see ``_consumer``)."""

from kaflite.client.share._consumer import ShareConsumer
from kaflite.client.share._types import AcknowledgementCommitCallback, AcknowledgeType, ShareRecord

__all__ = ["AcknowledgeType", "AcknowledgementCommitCallback", "ShareConsumer", "ShareRecord"]
