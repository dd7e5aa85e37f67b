"""Small value types of the consumer API."""

from __future__ import annotations

import enum
from bisect import bisect_right
from collections.abc import Awaitable, Callable, Iterator, Sequence
from itertools import chain, repeat
from typing import Generic, NamedTuple, overload

from typing_extensions import TypeVar

__all__ = ["ConsumerRecord", "OffsetAndMetadata", "OffsetAndTimestamp",
           "RebalanceListener", "RecordList", "TopicPartition"]


# The types of the keys and values a consumer hands out: what its deserializers return,
# bytes without one. (A null key or value is None either way: it is not deserialized.)
K = TypeVar("K", covariant=True, default=bytes)
V = TypeVar("V", covariant=True, default=bytes)
Headers = Sequence[tuple[str, bytes | None]]


class GroupMembershipOperation(enum.Enum):
    """What ``Consumer.close`` does with the member's place in its group (KIP-1092, Java's
    ``CloseOptions.GroupMembershipOperation``)."""

    DEFAULT = "default"                  # a dynamic member leaves, a static one stays
    LEAVE_GROUP = "leave_group"          # leave, static or not
    REMAIN_IN_GROUP = "remain_in_group"  # say nothing: the session expires, or a static
                                         # member comes back under its instance id


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int = -1


class ConsumerRecord(NamedTuple, Generic[K, V]):
    """One consumed record. ``key``/``value`` are bytes (or deserialized).

    A named tuple, because the consumer makes them by the hundred thousand: the
    fetcher builds each one in C (``tuple.__new__`` over zipped columns), with
    no Python-level ``__init__`` call per record.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: K | None
    value: V | None
    headers: Headers = ()


# (topic, partition, offsets, timestamps, keys, values, headers): one decoded run of a
# partition's records, as parallel lists
Segment = tuple[str, int, Sequence[int], Sequence[int], Sequence[K | None], Sequence[V | None],
                Sequence[Headers]]
_Row = tuple[str, int, int, int, K | None, V | None, Headers]


def _make(seg: Segment[K, V]) -> Iterator[ConsumerRecord[K, V]]:
    # ConsumerRecord is a named tuple; tuple.__new__ fills one from a row without the
    # Python-level __new__ the class would run (half the cost per record).
    new: Callable[[type[ConsumerRecord[K, V]], _Row[K, V]], ConsumerRecord[K, V]]
    new = tuple.__new__
    topic, partition, offsets, timestamps, keys, values, headers = seg
    n = len(offsets)
    rows = zip(repeat(topic, n), repeat(partition, n), offsets, timestamps, keys, values,
               headers, strict=True)
    return map(new, repeat(ConsumerRecord, n), rows)


class RecordList(Sequence[ConsumerRecord[K, V]]):
    """The records of a poll: a read-only sequence that makes each record when asked.

    Like Java's ``ConsumerRecords``, it is not a list. The fetcher decodes a
    batch into columns (offsets, timestamps, keys, values, headers), and the
    ``ConsumerRecord`` tuples are made from them as the application iterates
    (in C, with no Python call per record) or indexes. An application that
    handles records one at a time therefore never holds a whole poll of record
    objects at once: each dies young, and CPython's cyclic garbage collector,
    which otherwise walks every live record again and again while a large poll
    is being built, hardly notices them. ``list(records)`` makes a list.
    """

    __slots__ = ("_ends", "_segments")

    def __init__(self, segments: Sequence[Segment[K, V]] = ()) -> None:
        self._segments: list[Segment[K, V]] = []
        self._ends: list[int] = []     # cumulative record counts, for indexing
        for seg in segments:
            self.add(seg)

    def add(self, seg: Segment[K, V]) -> None:
        n = len(seg[2])
        if n:
            self._segments.append(seg)
            self._ends.append((self._ends[-1] if self._ends else 0) + n)

    @classmethod
    def concat(cls, lists: Sequence[RecordList[K, V]]) -> RecordList[K, V]:
        out: RecordList[K, V] = cls()
        for records in lists:
            for seg in records._segments:
                out.add(seg)
        return out

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __bool__(self) -> bool:
        return bool(self._ends)

    def __iter__(self) -> Iterator[ConsumerRecord[K, V]]:
        if len(self._segments) == 1:
            return _make(self._segments[0])
        return chain.from_iterable(map(_make, self._segments))

    @overload
    def __getitem__(self, index: int) -> ConsumerRecord[K, V]: ...
    @overload
    def __getitem__(self, index: slice) -> list[ConsumerRecord[K, V]]: ...

    def __getitem__(self, index: int | slice
                    ) -> ConsumerRecord[K, V] | list[ConsumerRecord[K, V]]:
        if isinstance(index, slice):
            return list(self)[index]
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("record index out of range")
        s = bisect_right(self._ends, index)
        topic, partition, offsets, timestamps, keys, values, headers = self._segments[s]
        i = index - (self._ends[s - 1] if s else 0)
        return ConsumerRecord(topic, partition, offsets[i], timestamps[i], keys[i], values[i],
                              headers[i])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RecordList | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other,
                                                                          strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[ConsumerRecord[K, V]]) -> list[ConsumerRecord[K, V]]:
        return [*self, *other]

    def __radd__(self, other: Sequence[ConsumerRecord[K, V]]) -> list[ConsumerRecord[K, V]]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"RecordList({list(self)!r})"


class RebalanceListener:
    """Override the callbacks you need (Java's ``ConsumerRebalanceListener``).

    Each may be a plain function or a coroutine function (the consumer awaits what
    it returns when that is awaitable).
    """

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> Awaitable[None] | None:
        return None

    def on_partitions_lost(self, lost: set[TopicPartition]) -> Awaitable[None] | None:
        return self.on_partitions_revoked(lost)


ListenerCallback = Callable[[set[TopicPartition]], Awaitable[None] | None]
