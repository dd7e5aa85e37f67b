"""The kaflite producer (see ``_producer`` for the API and ``_sender`` for how it works).

Its names are imported on first use (``kaflite._lazy``).
"""

from typing import TYPE_CHECKING

from kaflite._lazy import lazy_names

if TYPE_CHECKING:
    from kaflite.client.producer._accumulator import BufferFull, RecordMetadata
    from kaflite.client.producer._producer import BatchMetadata, Producer
    from kaflite.client.producer._sender import BatchRejectedError, DeliveryTimeout
    from kaflite.client.producer._transactions import (
        ConsumerGroupMetadata,
        TransactionStateError,
    )

__all__ = ["BatchMetadata", "BatchRejectedError", "BufferFull", "ConsumerGroupMetadata",
           "DeliveryTimeout", "Producer", "RecordMetadata", "TransactionStateError"]

__getattr__, __dir__ = lazy_names(__name__, {
    "BufferFull": "._accumulator", "RecordMetadata": "._accumulator",
    "BatchMetadata": "._producer", "Producer": "._producer",
    "BatchRejectedError": "._sender", "DeliveryTimeout": "._sender",
    "ConsumerGroupMetadata": "._transactions", "TransactionStateError": "._transactions",
})
