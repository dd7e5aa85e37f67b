"""What the producer takes and gives back: the key/value types, headers,
conversions to bytes, and ``BatchMetadata`` (where a ``send_batch`` went)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from typing_extensions import TypeVar

from kaflite.client.producer._accumulator import DeliveryCallback, ProducerBatch, RecordMetadata

__all__ = ["BatchMetadata", "HeadersArg", "K", "Raw", "V"]

# What a producer sends without a serializer: bytes, a str (sent UTF-8) or a buffer.
Raw = bytes | bytearray | memoryview | str | None
# The types of the keys and values a producer sends: what its serializers take, or Raw.
K = TypeVar("K", default=Raw)
V = TypeVar("V", default=Raw)

HeadersArg = Sequence[tuple[str, bytes | str | None]] | Mapping[str, bytes | str | None] | None
# produce()'s arguments: (topic, value, key, partition, headers, timestamp, on_delivery)
_Produced = tuple[str, V, "K | None", "int | None", HeadersArg, "int | None",
                  "DeliveryCallback | None"]


class BatchMetadata:
    """Where the records of one ``send_batch`` call were written, in call order."""

    def __init__(self, topic: str, parts: list[tuple[ProducerBatch, int, int]],
                 order: list[int] | None = None) -> None:
        self.topic = topic
        self._parts = parts
        self._order = order

    def __len__(self) -> int:
        return sum(n for _, _, n in self._parts)

    @property
    def ranges(self) -> list[tuple[int, int, int]]:
        """(partition, base offset, record count) per batch."""
        return [(b.partition, b.base_offset + start, n) for b, start, n in self._parts]

    def __getitem__(self, i: int) -> RecordMetadata:
        if self._order is not None:
            i = self._order[i]
        for batch, start, n in self._parts:
            if i < n:
                return batch.metadata(start + i)
            i -= n
        raise IndexError(i)

    def __iter__(self) -> Iterator[RecordMetadata]:
        return (self[i] for i in range(len(self)))


def _to_bytes(value: object, serializer: Callable[..., object] | None) -> bytes | None:
    """``value`` as the bytes to send: through the user's serializer if there is one,
    else as given (bytes, str, a buffer); a value of another type is a ``TypeError``."""
    if value is None:
        return None
    if serializer is not None:
        out = serializer(value)
        if out is None or isinstance(out, bytes):
            return out
        raise TypeError(f"the serializer returned a {type(out).__name__}, not bytes")
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot send a {type(value).__name__} without a serializer")


def _size_hint(value: object) -> int:
    """The size of a value before it is serialized, when it is one of the raw kinds."""
    return len(value) if isinstance(value, (bytes, bytearray, memoryview, str)) else 0


def _headers(headers: HeadersArg) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in items]


# a record produced before its topic's metadata was known:
# (value, key, partition, headers, timestamp, on_delivery)
_Queued = tuple[V, "K | None", "int | None", "HeadersArg", "int | None",
                "DeliveryCallback | None"]
