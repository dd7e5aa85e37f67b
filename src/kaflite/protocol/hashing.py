"""Hash functions that must agree bit for bit with Java's.

* ``murmur2`` is Kafka's default partitioner hash (``Utils.murmur2``); with
  ``to_positive`` and a modulo it places a keyed record on the same partition
  as the Java client and librdkafka's ``murmur2_random`` partitioner.
* ``java_string_hash`` is ``String.hashCode``; the coordinator of a group or
  transactional id is partition ``abs(hash) % partitions`` of the internal topic.
"""

from __future__ import annotations

import struct

__all__ = [
    "coordinator_partition",
    "java_string_hash",
    "murmur2",
    "murmur2_partition",
    "to_positive",
]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's 32-bit murmur2, returned as a signed int32 like Java's."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    blocks = length >> 2
    if blocks:
        for k in struct.unpack_from(f"<{blocks}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return n & 0x7FFFFFFF


def murmur2_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a non-null key."""
    return to_positive(murmur2(key)) % num_partitions


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, as a signed int32."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


def coordinator_partition(key: str, num_partitions: int) -> int:
    """Partition of ``__consumer_offsets``/``__transaction_state`` that owns ``key``.

    Kafka's ``Utils.abs`` maps ``Integer.MIN_VALUE`` to 0 rather than overflowing.
    """
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
