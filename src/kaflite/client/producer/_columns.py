"""The producer's fast paths: records appended without the general path's work.

``Producer.produce`` and ``send`` first try ``_append_fast`` (an unkeyed record
into the open batch of the topic's sticky partition) or ``_append_keyed`` (a
keyed record into the open batch of its cached partition). The sync façade hands
its records over in bursts to ``produce_all``, which appends runs of plain
records column by column (``_produce_columns``). All of them give up (return
None) when anything is not plain, and the general path takes over.
"""

from __future__ import annotations

import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import accumulate, groupby, repeat
from operator import add
from typing import TYPE_CHECKING, Generic, cast

from kaflite.client.metadata import Metadata
from kaflite.client.producer._accumulator import (
    RECORD_OVERHEAD,
    BufferFull,
    DeliveryCallback,
    ProducerBatch,
    RecordAccumulator,
    cut_batches,
)
from kaflite.client.producer._partitioner import KeyCache, Partitioner
from kaflite.client.producer._transactions import TransactionManager, TxnState
from kaflite.client.producer._values import HeadersArg, K, V, _Produced, _Queued

__all__ = ["FastPaths"]

_Placed = list[tuple[list[int] | None, list[tuple[ProducerBatch, int, int]]]]


class FastPaths(Generic[K, V]):
    """Mixed into ``Producer``, whose state these paths append to."""

    metadata: Metadata
    _acc: RecordAccumulator
    _keys: KeyCache
    _keyed_open: dict[str, tuple[int, dict[bytes, int], list[ProducerBatch | None]]]
    _partitioner: Partitioner
    _open: dict[str, tuple[ProducerBatch, int]]
    _pending: dict[str, list[_Queued[V, K]]]
    _pending_bytes: int
    _started: bool
    _txn: TransactionManager | None
    _key_ser: Callable[..., object] | None
    _value_ser: Callable[..., object] | None

    if TYPE_CHECKING:   # the Producer's own, declared for the type checker
        def _choose(self, topic: str, key: bytes | None, partition: int | None,
                    size: int) -> int: ...

        def _mark_written(self, topic: str, partition: int) -> None: ...

        def produce(self, topic: str, value: V, key: K | None = None,
                    partition: int | None = None, headers: HeadersArg = None,
                    timestamp: int | None = None,
                    on_delivery: DeliveryCallback | None = None) -> None: ...

    def _append_fast(self, topic: str, value: V) -> tuple[ProducerBatch, int] | None:
        """An unkeyed record into the open batch of the topic's sticky partition.

        The general path (serialize, partition, size, accumulate) costs about a
        microsecond per record in Python. An unkeyed record without headers or
        timestamp, whose topic has an open batch (see ``_open``) with room, only
        needs appending to that batch's columns; the batch is encoded in bulk when
        the sender drains it. Anything else returns None: take the general path.
        """
        opened = self._open.get(topic)
        if opened is None or not isinstance(value, bytes) or self._value_ser is not None:
            return None
        if self._txn is not None and self._txn.state is not TxnState.IN_TRANSACTION:
            return None  # the general path raises the transaction's error
        batch = opened[0]
        size = len(value) + RECORD_OVERHEAD
        acc = self._acc
        if batch.closed or batch.size + size > acc.batch_size \
                or acc.used + size > acc.buffer_memory \
                or batch.keys is not None or batch.headers is not None:
            return None  # (a keyed record or one with headers joined the batch since)
        values = batch.values
        index = len(values)
        values.append(value)
        batch.timestamps.append(time.time_ns() // 1_000_000)
        batch.size += size
        acc.used += size
        return batch, index

    def _append_keyed(self, topic: str, value: V, key: K) -> tuple[ProducerBatch, int] | None:
        """A keyed record into the open batch of its key's partition, as ``_append_fast``.

        The key's partition comes from the ``KeyCache``, filled by the general path
        (which also opened the batch and marked the partition written). Only raw
        bytes without serializers take this path, so nothing is converted.
        """
        if self._value_ser is not None or self._key_ser is not None \
                or not isinstance(key, bytes) or not isinstance(value, bytes):
            return None
        entry = self._keyed_open.get(topic)
        if entry is None or entry[0] != self.metadata.version:
            return None
        p = entry[1].get(key)
        if p is None:
            return None
        batch = entry[2][p]   # (closed once any batch queues behind it)
        if batch is None:
            return None
        if self._txn is not None and self._txn.state is not TxnState.IN_TRANSACTION:
            return None
        acc = self._acc
        size = len(value) + len(key) + RECORD_OVERHEAD
        keys = batch.keys
        if keys is None or batch.closed or batch.attempts or batch.headers is not None \
                or batch.size + size > acc.batch_size or acc.used + size > acc.buffer_memory:
            return None
        values = batch.values
        index = len(values)
        values.append(value)
        keys.append(key)
        batch.timestamps.append(time.time_ns() // 1_000_000)
        batch.size += size
        acc.used += size
        return batch, index

    def produce_all(self, records: Sequence[_Produced[V, K]]) -> int:
        """``produce`` each record in turn (the sync façade's hand-off); a record that
        fails goes to its ``on_delivery``. Stops at ``BufferFull``: returns how many
        records were taken. Runs of plain records take the column path."""
        if len(records) > 1:
            taken = self._produce_columns(records)
            if taken is not None:
                return taken
        produce = self.produce
        for i, args in enumerate(records):
            try:
                produce(*args)
            except BufferFull:
                return i
            except Exception as exc:
                if args[6] is not None:
                    args[6](exc, None)
        return len(records)

    def _produce_columns(self, records: Sequence[_Produced[V, K]]) -> int | None:
        """Append records of one topic, with bytes values and bytes (or no) keys and
        nothing else, column by column: partitions from the key cache (or the sticky
        partition, a batch at a time), then whole slices per partition. Every check
        is a C-level pass over a column. Takes the records that fit in buffer.memory
        and returns how many; None (nothing done): take the general path."""
        n = len(records)
        topics, values, keys, parts, hdrs, stamps, cbs = zip(*records, strict=True)
        topic = topics[0]
        if topics.count(topic) != n or parts.count(None) != n or hdrs.count(None) != n \
                or stamps.count(None) != n or self._value_ser is not None \
                or self._key_ser is not None or not self._started \
                or topic in self._pending or topic not in self.metadata.topics \
                or set(map(type, values)) != {bytes}:
            return None
        if self._txn is not None and self._txn.state is not TxnState.IN_TRANSACTION:
            return None
        vs = cast("list[bytes | None]", list(values))
        sizes = list(map(add, map(len, cast("list[bytes]", vs)), repeat(RECORD_OVERHEAD)))
        keyed = keys.count(None) != n
        if keyed:
            if set(map(type, keys)) != {bytes}:
                return None
            sizes = list(map(add, sizes, map(len, keys)))
        acc = self._acc
        room = acc.buffer_memory - acc.used - self._pending_bytes
        if sum(sizes) > room:   # take what fits (the first record always, into an empty buffer)
            n = max(bisect_right(list(accumulate(sizes)), room),
                    0 if acc.incomplete or self._pending else 1)
            if not n:
                return 0
            vs, sizes, keys, cbs = vs[:n], sizes[:n], keys[:n], cbs[:n]
            keyed = keys.count(None) != n
        ts = time.time_ns() // 1_000_000
        placed: _Placed = []
        if keyed:
            ks = cast("list[bytes]", list(keys))
            num = len(self.metadata.topics[topic].partitions)
            hashed_ps = self._key_partitions(topic, ks, num)
            ps = hashed_ps if hashed_ps is not None \
                else [self._choose(topic, k, None, 0) for k in ks]
            if ps.count(ps[0]) == n:
                self._mark_written(topic, ps[0])
                placed.append((None, acc.extend(topic, ps[0], vs, list(ks), ts, sizes)))
            else:
                order = sorted(range(n), key=ps.__getitem__)
                for p, group in groupby(order, ps.__getitem__):
                    idx = list(group)
                    self._mark_written(topic, p)
                    placed.append((idx, acc.extend(
                        topic, p, list(map(vs.__getitem__, idx)), list(map(ks.__getitem__, idx)),
                        ts, list(map(sizes.__getitem__, idx)))))
        else:
            # uniform sticky (KIP-794) a batch at a time, as send_batch does
            for i, j, total in cut_batches(sizes, acc.batch_size):
                p = self._choose(topic, None, None, total)
                self._mark_written(topic, p)
                made = acc.extend(topic, p, vs[i:j], None, ts, sizes[i:j])
                placed.append((list(range(i, j)), made))
                batch = made[-1][0]
                if batch.keys is None and batch.headers is None:
                    self._open[topic] = (batch, batch.size)
        if cbs.count(None) != n:
            self._add_callbacks(cbs, placed)
        return n

    def _key_partitions(self, topic: str, keys: Sequence[bytes], num: int) -> list[int] | None:
        """Each key's partition (murmur2, as Java places it) from the key cache, in
        C-level passes; murmur2 runs in Python only for keys not seen yet. None: the
        partitioner does not place keys by their hash."""
        if not self._partitioner.hashes_keys:
            return None
        table = self._keys.table(topic, self.metadata.version, num)
        cached = list(map(table.get, keys))
        if None not in cached:
            return cast("list[int]", cached)
        hashed = self._keys.partition
        return [hashed(table, k, num) if p is None else p
                for p, k in zip(cached, keys, strict=True)]

    def _append_keyed_columns(self, topic: str, ps: list[int], vs: Sequence[bytes | None],
                              ks: list[bytes | None], timestamp: int, sizes: list[int]
                              ) -> tuple[list[tuple[ProducerBatch, int, int]], list[int] | None]:
        """``send_batch``'s keyed records into their partitions' batches, grouped by one
        stable sort; returns the batches and, for ``BatchMetadata``, each record's place
        among them (None: in order)."""
        acc = self._acc
        if ps.count(ps[0]) == len(ps):
            self._mark_written(topic, ps[0])
            return acc.append_many(topic, ps[0], vs, ks, timestamp, sizes), None
        flat = sorted(range(len(ps)), key=ps.__getitem__)
        parts: list[tuple[ProducerBatch, int, int]] = []
        for p, group in groupby(flat, ps.__getitem__):
            idx = list(group)
            self._mark_written(topic, p)
            parts += acc.append_many(topic, p, list(map(vs.__getitem__, idx)),
                                     list(map(ks.__getitem__, idx)), timestamp,
                                     list(map(sizes.__getitem__, idx)))
        # (the inverse permutation of flat: record i is the rank[i]-th among the batches)
        return parts, sorted(range(len(flat)), key=flat.__getitem__)

    @staticmethod
    def _add_callbacks(cbs: Sequence[DeliveryCallback | None], placed: _Placed) -> None:
        """Register each record's ``on_delivery`` with the batch (and index) it went to."""
        for idx, made in placed:
            pos = 0
            for batch, start, count in made:
                for k in range(count):
                    cb = cbs[idx[pos + k] if idx is not None else pos + k]
                    if cb is not None:
                        if batch.callbacks is None:
                            batch.callbacks = []
                        batch.callbacks.append((start + k, cb))
                pos += count
