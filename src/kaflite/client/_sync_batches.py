"""The sync producer's batches, built in the threads that call ``produce``.

``sync.Producer.produce`` used to queue every record for the client's loop
thread, which then appended it to a batch: two threads touched every record,
and they took the GIL from each other for it. Now a plain record (bytes value,
bytes or no key, no partition, headers or timestamp, no serializers, not
transactional, the default partitioner) is placed in the caller's thread: its
partition comes from a per-topic key table (murmur2, as Java's
``BuiltInPartitioner``) or the topic's sticky partition (KIP-794), and it is
appended to that partition's open ``_Builder`` under one lock. The loop thread
gets whole batches: a builder is sealed when the next record would not fit in
``batch.size``, when it has waited ``linger.ms`` (the loop's ``_tick``), on
``flush``, or before a record of its topic that is not plain. Sealed builders
and the records that are not plain share one queue, which the loop drains in
order, so one thread's records keep their order in every partition.

``buffer.memory``: a builder reserves room in chunks rather than per record
(``_CHUNK`` first, then as much again as it holds, up to ``batch.size``: a
builder that fills fast comes back for room a few times a batch, and what is
reserved but unused stays below what the builder holds), so the per-record
check is one comparison with its ``cap``; what is reserved, plus the records queued for the loop, is ``_held``, and
``acc.used + _held`` never exceeds ``buffer.memory`` (except for one record into
an empty producer). Without room, ``produce`` seals every builder (so that they
are sent) and waits up to ``max.block.ms``, then raises ``BufferFull``.

A builder's records share one CreateTime, taken when it was opened: at most
``linger.ms`` (or the time it took to fill it) before their ``produce`` call.
Delivery callbacks are attached to the batch and run on the loop thread when it
completes, as for every other record.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic

from kaflite.client import producer as _producer
from kaflite.client.producer._accumulator import BATCH_OVERHEAD, RECORD_OVERHEAD, DeliveryCallback
from kaflite.client.producer._values import HeadersArg, K, V, _Produced, _size_hint
from kaflite.protocol.hashing import murmur2

if TYPE_CHECKING:
    from kaflite._loop import LoopThread

__all__ = ["CallerBatches"]

_CHUNK = 16_384        # buffer.memory a builder reserves first
_KEYS = 65_536         # keys remembered per topic (the table is emptied when full)
_ROOM_POLL_S = 0.001   # how often a blocked produce() looks for room in buffer.memory
_RETRY_S = 0.005       # how soon records the accumulator refused are offered again
_STALE_S = 0.01        # the least age at which produce() itself seals a builder


class _Builder:
    """One partition's open batch, appended to in the callers' threads."""

    __slots__ = ("callbacks", "cap", "created", "keys", "partition", "reserved", "size",
                 "stamp", "topic", "values")

    def __init__(self, topic: str, partition: int, reserved: int, batch_size: int) -> None:
        self.topic = topic
        self.partition = partition
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] | None = None
        self.callbacks: list[tuple[int, DeliveryCallback]] | None = None
        self.size = BATCH_OVERHEAD
        self.reserved = reserved                    # bytes of buffer.memory held for it
        self.cap = min(reserved, batch_size)        # appends below this need no check
        self.created = time.monotonic()
        self.stamp = time.time_ns() // 1_000_000    # every record's CreateTime


class _Topic:
    """What the callers' threads need to place a topic's records."""

    __slots__ = ("builders", "count", "name", "sticky", "table")

    def __init__(self, name: str, count: int, sticky: int) -> None:
        self.name = name
        self.count = count
        self.builders: list[_Builder | None] = [None] * count
        self.table: dict[bytes, int] = {}           # key -> partition (murmur2)
        self.sticky = sticky                        # where unkeyed records go


class CallerBatches(Generic[K, V]):
    """Mixed into ``sync.Producer``: ``produce`` and the queue to the loop thread."""

    _target: _producer.Producer[K, V]
    _loop_thread: LoopThread
    _loop: asyncio.AbstractEventLoop
    _max_block: float

    def _init_batches(self) -> None:
        a = self._target
        self._lock = threading.Lock()
        self._topics: dict[str, _Topic] = {}
        self._opened: dict[_Builder, _Topic] = {}   # unsealed builders, oldest first
        # sealed builders and records that are not plain, in produce order
        self._queue: collections.deque[_Builder | _Produced[V, K]] = collections.deque()
        self._held = 0            # reserved by builders + queued here, not yet in _acc
        self._scheduled = False   # a _drain is coming
        self._ticking = False     # a _tick is coming
        self._retry: asyncio.TimerHandle | None = None
        self._learned: set[str] = set()   # topics whose metadata produce() waited for
        self._acc = a._acc
        self._batch_size = self._acc.batch_size
        self._linger = self._acc.linger
        # a builder this old is sealed rather than appended to (its CreateTime would be
        # off by more); linger.ms=0 is left to the loop's _tick, which seals at once
        self._stale = max(self._linger, _STALE_S)
        self._plain = a._txn is None and a._key_ser is None and a._value_ser is None \
            and a._partitioner.hashes_keys
        self._acc.space_listeners.append(self._space_freed)
        a.metadata.listeners.append(self._metadata_changed)

    # -- the callers' side ----------------------------------------------------------------
    def produce(self, topic: str, value: V, key: K | None = None, partition: int | None = None,
                headers: HeadersArg = None, timestamp: int | None = None,
                on_delivery: DeliveryCallback | None = None) -> None:
        """Queue a record; ``on_delivery`` runs on the client's loop thread.

        Blocks while ``buffer.memory`` is exhausted, for at most ``max.block.ms``;
        then raises ``BufferFull``.
        """
        st = self._topics.get(topic)
        if st is not None and partition is None and headers is None and timestamp is None \
                and isinstance(value, bytes):
            # (acquire/release: half the cost of a with statement)
            if key is None:
                s = len(value) + RECORD_OVERHEAD
                lock = self._lock
                lock.acquire()
                try:
                    b = st.builders[st.sticky]
                    if b is not None and b.keys is None and b.size + s <= b.cap:
                        values = b.values
                        values.append(value)
                        b.size += s
                        if on_delivery is not None:
                            if b.callbacks is None:
                                b.callbacks = []
                            b.callbacks.append((len(values) - 1, on_delivery))
                        return
                finally:
                    lock.release()
            elif isinstance(key, bytes):
                p = st.table.get(key)
                if p is not None:
                    s = len(value) + len(key) + RECORD_OVERHEAD
                    lock = self._lock
                    lock.acquire()
                    try:
                        b = st.builders[p]
                        if b is not None and b.keys is not None and b.size + s <= b.cap:
                            values = b.values
                            values.append(value)
                            b.keys.append(key)
                            b.size += s
                            if on_delivery is not None:
                                if b.callbacks is None:
                                    b.callbacks = []
                                b.callbacks.append((len(values) - 1, on_delivery))
                            return
                    finally:
                        lock.release()
        self._produce_slow(topic, value, key, partition, headers, timestamp, on_delivery)

    def _produce_slow(self, topic: str, value: V, key: K | None, partition: int | None,
                      headers: HeadersArg, timestamp: int | None,
                      on_delivery: DeliveryCallback | None) -> None:
        """Open, seal or grow a builder, wait for room; or queue a record that is not plain."""
        if isinstance(value, bytes) and (key is None or isinstance(key, bytes)) and partition is None \
                and headers is None and timestamp is None and self._plain:
            st = self._topics.get(topic) or self._topic(topic) or self._learn(topic)
            if st is not None:
                deadline = time.monotonic() + self._max_block
                while True:
                    with self._lock:
                        if self._place(st, value, key, on_delivery):
                            return
                        self._seal_all()   # out of room: let everything go out
                    self._wait(deadline)
        size = RECORD_OVERHEAD + _size_hint(value) + _size_hint(key)
        deadline = time.monotonic() + self._max_block
        while True:
            with self._lock:
                if self._room() >= size or not self._busy():
                    if self._opened:
                        self._seal_topic(topic)   # its records produced before go first
                    self._held += size
                    self._queue.append((topic, value, key, partition, headers, timestamp,
                                        on_delivery))
                    self._schedule()
                    return
            self._wait(deadline)

    def _room(self) -> int:
        acc = self._acc
        return acc.buffer_memory - acc.used - self._held - self._target._pending_bytes

    def _busy(self) -> bool:
        """Does anything hold buffer.memory (else one record may go in, whatever its size)?"""
        return bool(self._held or self._acc.incomplete or self._target._pending_bytes)

    def _wait(self, deadline: float) -> None:
        if self._loop_thread.in_loop() or time.monotonic() >= deadline:
            # (on the loop thread, waiting would stop what makes room)
            acc = self._acc
            raise _producer.BufferFull(
                f"buffer.memory ({acc.buffer_memory} bytes) is exhausted"
                + (f" for {self._max_block:.1f}s (max.block.ms)" if self._max_block else ""))
        time.sleep(_ROOM_POLL_S)

    def _topic(self, name: str) -> _Topic | None:
        """The topic's placing state, once its metadata is known (else None: queue)."""
        a = self._target
        md = a.metadata.topics.get(name)
        if md is None or not a._started or name in a._pending:
            return None
        with self._lock:
            st = self._topics.get(name)
            if st is None:
                count = len(md.partitions)
                st = self._topics[name] = _Topic(name, count, 0)
                st.sticky = self._next_sticky(st, 0)
        return st

    def _learn(self, name: str) -> _Topic | None:
        """The first ``produce`` to a topic whose metadata is not known waits (at most
        ``max.block.ms``) for one metadata round trip naming it, as Java's ``send``
        does, so that its records go into batches here. Without the wait they were
        queued one by one for the loop thread, which, while this thread kept the GIL
        producing, got to the round trip only after 50-200 ms (measured; docs/benchmarks.md).
        A topic the round trip does not find is not waited for again: its records
        are queued, and their callbacks report what becomes of them."""
        if name in self._learned or not self._max_block or self._loop_thread.in_loop():
            return None   # (max.block.ms=0: produce never blocks)
        self._learned.add(name)
        try:
            known = self._loop_thread.run(self._target.learn_topic(name), self._max_block)
        except Exception:   # (a timeout, a closed client: the queue path reports it)
            return None
        return self._topic(name) if known else None

    def _next_sticky(self, st: _Topic, appended: int) -> int:
        """Count ``appended`` bytes against the sticky partition (KIP-794), and return
        the partition unkeyed records go to now."""
        a = self._target
        if st.name not in a.metadata.topics:
            return st.sticky   # (the topic is gone: its state is being dropped)
        avail = a._leaders_available(st.name)
        part = a._partitioner
        if appended:
            part.record_appended(st.name, appended, st.count, avail, self._acc.queue_size)
        return part.partition(st.name, None, st.count, avail, self._acc.queue_size)

    def _place(self, st: _Topic, value: bytes, key: bytes | None,
               on_delivery: DeliveryCallback | None) -> bool:
        """Under the lock: append the record, opening, sealing or growing its builder as
        needed. False: no room in buffer.memory."""
        s = len(value) + RECORD_OVERHEAD
        if key is None:
            p = st.sticky
        else:
            s += len(key)
            got = st.table.get(key)
            if got is None:
                if len(st.table) >= _KEYS:
                    st.table.clear()
                got = st.table[key] = (murmur2(key) & 0x7FFFFFFF) % st.count
            p = got
        b = st.builders[p]
        while b is not None and b.values and (
                b.size + s > self._batch_size or time.monotonic() - b.created > self._stale):
            self._seal(b, st)   # full, or too old for the CreateTime it gives
            if key is None:
                p = st.sticky   # (which may have moved to another partition's builder)
            b = st.builders[p]
        if b is None:
            need = BATCH_OVERHEAD + s
            room = self._room()
            if need > room and self._busy():
                return False
            reserved = max(need, min(_CHUNK, room))
            self._held += reserved
            b = st.builders[p] = _Builder(st.name, p, reserved, self._batch_size)
            self._opened[b] = st
            if not self._ticking:
                self._ticking = True
                self._call(self._tick)
        elif b.size + s > b.reserved:
            need = b.size + s - b.reserved
            room = self._room()
            if need > room:
                return False
            # (as much again as it holds: a builder that fills fast comes back less often)
            more = max(need, min(b.reserved, self._batch_size - b.reserved, room))
            self._held += more
            b.reserved += more
            b.cap = min(b.reserved, self._batch_size)
        values = b.values
        if key is not None and b.keys is None:
            b.keys = [None] * len(values)
        values.append(value)
        if b.keys is not None:
            b.keys.append(key)
        b.size += s
        if on_delivery is not None:
            if b.callbacks is None:
                b.callbacks = []
            b.callbacks.append((len(values) - 1, on_delivery))
        return True

    def _call(self, fn: Callable[[], None]) -> None:
        if self._loop_thread.in_loop():
            self._loop.call_soon(fn)
        else:
            self._loop.call_soon_threadsafe(fn)

    def _schedule(self) -> None:
        """Under the lock: have the loop drain the queue soon."""
        if not self._scheduled:
            self._scheduled = True
            self._call(self._drain)

    def _seal(self, b: _Builder, st: _Topic) -> None:
        """Under the lock: queue builder ``b`` for the loop thread; nothing more joins it."""
        st.builders[b.partition] = None
        del self._opened[b]
        if b.partition == st.sticky:
            st.sticky = self._next_sticky(st, b.size)
        self._queue.append(b)
        self._schedule()

    def _seal_topic(self, topic: str) -> None:
        for b, st in list(self._opened.items()):
            if st.name == topic:
                self._seal(b, st)

    def _seal_all(self) -> None:
        for b, st in list(self._opened.items()):
            self._seal(b, st)

    def seal_batches(self) -> None:
        """Hand every open batch to the loop thread (flush, send, transactions)."""
        with self._lock:
            self._seal_all()

    # -- the loop's side ------------------------------------------------------------------
    def _tick(self) -> None:
        """Seal the builders that have waited ``linger.ms``; come back for the others."""
        now = time.monotonic()
        with self._lock:
            for b, st in list(self._opened.items()):
                if now - b.created < self._linger:
                    self._loop.call_later(self._linger - (now - b.created), self._tick)
                    break
                self._seal(b, st)
            else:
                self._ticking = False

    def _drain(self) -> None:
        """Move the queue into the accumulator, in order: builders as whole batches,
        runs of other records through the async ``produce_all``. Records the
        accumulator refuses wait, first in line, until a batch is released (or
        ``_RETRY_S`` at the latest)."""
        with self._lock:
            self._scheduled = False
        q = self._queue
        a = self._target
        acc = self._acc
        while q:
            if isinstance(q[0], _Builder):
                b = q.popleft()
                assert isinstance(b, _Builder)
                self._commit(b)
                continue
            run: list[_Produced[V, K]] = []
            limit = len(q)
            if acc.incomplete:   # take about what fits, not a pass over all of q
                room = acc.buffer_memory - acc.used
                first = q[0]
                assert not isinstance(first, _Builder)
                limit = max(room, 0) // (RECORD_OVERHEAD + _size_hint(first[1])
                                         + _size_hint(first[2])) + 1
            while q and len(run) < limit and not isinstance(q[0], _Builder):
                item = q.popleft()
                assert not isinstance(item, _Builder)
                run.append(item)
            taken = a.produce_all(run)
            size = sum(RECORD_OVERHEAD + _size_hint(r[1]) + _size_hint(r[2])
                       for r in run[:taken])
            with self._lock:
                self._held -= size
            if taken < len(run):
                q.extendleft(reversed(run[taken:]))
                with self._lock:
                    self._scheduled = True
                if self._retry is None:
                    self._retry = self._loop.call_later(_RETRY_S, self._retry_drain)
                return

    def _commit(self, b: _Builder) -> None:
        """A sealed builder into the accumulator, as one batch."""
        with self._lock:
            self._held -= b.reserved
        a = self._target
        if b.topic in a._pending or b.topic not in a.metadata.topics:
            # (the topic's metadata went away: its records wait for it, as produce's do)
            a.queue_for_metadata(b.topic, b.values, b.keys, b.callbacks)
            return
        a._mark_written(b.topic, b.partition)
        batch = self._acc.add_batch(b.topic, b.partition, b.values, b.keys,
                                    [b.stamp] * len(b.values), b.size, b.created)
        batch.callbacks = b.callbacks

    def _retry_drain(self) -> None:
        self._retry = None
        self._drain()

    def _space_freed(self) -> None:
        """The accumulator released a batch: records waiting for room go in now."""
        if self._retry is not None:
            self._retry.cancel()
            self._retry = None
            self._loop.call_soon(self._drain)

    def _metadata_changed(self) -> None:
        """A topic's partition count changed (or it is gone): place its records anew."""
        topics = self._target.metadata.topics
        with self._lock:
            for name, st in list(self._topics.items()):
                md = topics.get(name)
                if md is None or len(md.partitions) != st.count:
                    self._seal_topic(name)
                    del self._topics[name]

    async def _queued_then(self, then: Callable[[], Awaitable[object]]) -> None:
        """Hand every open batch and queued record to the async producer, then run ``then``."""
        self.seal_batches()
        while self._queue or self._scheduled:
            self._drain()
            # (records the accumulator refused for want of room are offered again later)
            await asyncio.sleep(_RETRY_S if self._queue else 0)
        await then()
