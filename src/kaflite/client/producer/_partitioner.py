"""Choosing a partition: murmur2 for keys, the uniform sticky partitioner for null keys.

* A record with a key goes to ``toPositive(murmur2(key)) % partitions``, exactly
  as Java's ``BuiltInPartitioner.partitionForKey`` and librdkafka's
  ``murmur2_random`` place it, so keyed data lands on the same partitions
  whichever client wrote it.
* A record without a key uses KIP-794's uniform sticky partitioner: all such
  records go to one partition until ``batch.size`` bytes have been produced to
  it, then another partition is chosen. With adaptive partitioning (the
  default) the next partition is drawn with weights that favour partitions
  whose queue in the accumulator is short, as Java does from queue sizes; a
  partition without a leader is never chosen.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from kaflite.protocol.hashing import murmur2

__all__ = ["KeyCache", "Partitioner"]

QueueSize = Callable[[str, int], int]


class KeyCache:
    """Keys' partitions under the default partitioner, per topic, for one metadata version.

    murmur2 in Python costs about a microsecond for a short key; applications
    tend to reuse keys (user ids, device ids), so each topic remembers the
    partition of up to ``limit`` keys. The cache is valid for one partition
    count: a metadata change (``version``) empties it, and a full cache is
    emptied rather than evicted key by key.
    """

    __slots__ = ("limit", "topics")

    def __init__(self, limit: int = 65_536) -> None:
        self.limit = limit
        # topic -> (metadata version, number of partitions, key -> partition)
        self.topics: dict[str, tuple[int, int, dict[bytes, int]]] = {}

    def table(self, topic: str, version: int, num_partitions: int) -> dict[bytes, int]:
        """The key -> partition table of ``topic`` valid for this metadata version."""
        entry = self.topics.get(topic)
        if entry is None or entry[0] != version or entry[1] != num_partitions:
            entry = self.topics[topic] = (version, num_partitions, {})
        return entry[2]

    def partition(self, table: dict[bytes, int], key: bytes, num_partitions: int) -> int:
        p = table.get(key)
        if p is None:
            if len(table) >= self.limit:
                table.clear()
            p = table[key] = (murmur2(key) & 0x7FFFFFFF) % num_partitions
        return p

    def clear(self) -> None:
        self.topics.clear()


class _Sticky:
    __slots__ = ("bytes", "partition")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.bytes = 0


class Partitioner:
    def __init__(self, kind: str, batch_size: int, ignore_keys: bool = False,
                 adaptive: bool = True) -> None:
        self.kind = kind
        self.batch_size = max(batch_size, 1)
        self.ignore_keys = ignore_keys
        self.adaptive = adaptive
        self._sticky: dict[str, _Sticky] = {}
        self._rr = itertools.count()
        # keyed records are placed by murmur2 alone (so their partitions can be cached)
        self.hashes_keys = not ignore_keys and kind not in ("random", "round_robin")

    def partition(self, topic: str, key: bytes | None, num_partitions: int,
                  available: list[int] | None = None, queue_size: QueueSize | None = None
                  ) -> int:
        kind = self.kind
        if key is not None and not self.ignore_keys:
            if kind == "random":
                return random.randrange(num_partitions)
            if kind == "round_robin":
                return next(self._rr) % num_partitions
            return (murmur2(key) & 0x7FFFFFFF) % num_partitions
        if kind in ("consistent_random",) and key is not None:
            return (murmur2(key) & 0x7FFFFFFF) % num_partitions
        if kind == "round_robin":
            return next(self._rr) % num_partitions
        sticky = self._sticky.get(topic)
        if sticky is None or sticky.partition >= num_partitions:
            sticky = self._next(topic, num_partitions, available, queue_size)
        return sticky.partition

    def record_appended(self, topic: str, size: int, num_partitions: int,
                        available: list[int] | None = None,
                        queue_size: QueueSize | None = None) -> None:
        """Count ``size`` bytes against the sticky partition; switch once a batch is full."""
        sticky = self._sticky.get(topic)
        if sticky is None:
            return
        sticky.bytes += size
        if sticky.bytes >= self.batch_size:
            self._next(topic, num_partitions, available, queue_size)

    def _next(self, topic: str, num_partitions: int, available: list[int] | None,
              queue_size: QueueSize | None) -> _Sticky:
        choices = available if available else list(range(num_partitions))
        old = self._sticky.get(topic)
        if len(choices) > 1 and old is not None:
            choices = [p for p in choices if p != old.partition] or choices
        if self.adaptive and queue_size is not None and len(choices) > 1:
            # KIP-794 adaptive partitioning: weight inversely to queue length.
            sizes = [queue_size(topic, p) for p in choices]
            top = max(sizes) + 1
            weights = [top - s for s in sizes]
            partition = random.choices(choices, weights)[0]
        else:
            partition = random.choice(choices)
        sticky = _Sticky(partition)
        self._sticky[topic] = sticky
        return sticky
