"""The kaflite producer (see ``_producer`` for the API and ``_sender`` for how it works)."""

from kaflite.client.producer._accumulator import BufferFull, RecordMetadata
from kaflite.client.producer._producer import BatchMetadata, Producer
from kaflite.client.producer._sender import BatchRejectedError, DeliveryTimeout
from kaflite.client.producer._transactions import ConsumerGroupMetadata, TransactionStateError

__all__ = ["BatchMetadata", "BatchRejectedError", "BufferFull", "ConsumerGroupMetadata", "DeliveryTimeout", "Producer",
           "RecordMetadata", "TransactionStateError"]
