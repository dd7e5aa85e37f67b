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

__all__ = ["Partitioner"]

QueueSize = Callable[[str, int], int]


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
