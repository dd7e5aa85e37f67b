"""The sync producer's batches, built in the threads that call ``produce``.

``sync.Producer.produce`` used to queue every record for the client's loop
thread, which then appended it to a batch: two threads touched every record,
and they took the GIL from each other for it. Now a plain record (bytes value,
bytes or no key, no partition, headers or timestamp, no serializers, not
transactional, the default partitioner) is placed in the caller's thread: its
partition comes from a per-topic key table (murmur2, as Java's
``BuiltInPartitioner``) or the topic's sticky partition (KIP-794), and it joins
that partition's *run*, the records not yet sealed into a batch. The loop
thread gets whole batches: a run is sealed (cut) when the next record would not
fit in ``batch.size``, when it has waited ``linger.ms`` (the loop's ``_tick``),
on ``flush``, or before a record of its topic that is not plain. Sealed runs
and the records that are not plain share one queue, which the loop drains in
order, so one thread's records keep their order in every partition.

Appending takes no lock. A run is one flat list of ``(key, value, on_delivery)``
triples, extended by one ``list += tuple``, a single C call, so a record's three
items go in together and in order, whichever threads append. The lock guards
everything else (opening, counting, cutting runs, ``buffer.memory``), and the
fast path only reads what it guards: it appends while the run is shorter than
its ``limit``, which the locked side sets so that records of up to the run's
``small`` bytes cannot overfill the batch or its reservation. A cut takes the
run's first ``n`` items and deletes them (``run[:n]``, then ``del run[:n]``):
records appended meanwhile land after them and stay for the next run. A caller
that read the limit before a cut may append just after it; it then reads the
limit (0 from the cut) again and registers the run itself (``_adopt``), so
every record is in a batch or in a run that ``linger.ms`` will seal. (With one
lock per record, the loop thread's ``_tick`` and the callers waited for each
other, and each wait handed the GIL over: a version without the lock, unsafe,
was 15-20 % faster on keyed 100-byte records; docs/benchmarks.md.)

``buffer.memory``: a run reserves room in chunks rather than per record
(``_CHUNK`` first, then as much again as it holds, up to ``batch.size``), and
the fast path stays within what is reserved; what is reserved, plus the records
queued for the loop, is ``_held``, and ``acc.used + _held`` never exceeds
``buffer.memory`` (except for one record into an empty producer, and a record
a thread appends just as its run is cut). Without room, ``produce`` seals every
run (so that they are sent) and waits up to ``max.block.ms``, then raises
``BufferFull``.

A run's records share one CreateTime, taken when it was opened: at most
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
from typing import TYPE_CHECKING, Generic, cast

from kaflite.client import producer as _producer
from kaflite.client.producer._accumulator import BATCH_OVERHEAD, RECORD_OVERHEAD, DeliveryCallback
from kaflite.client.producer._values import HeadersArg, K, V, _Produced, _size_hint
from kaflite.protocol.hashing import murmur2

if TYPE_CHECKING:
    from kaflite._loop import LoopThread

__all__ = ["CallerBatches"]

_CHUNK = 16_384        # buffer.memory a run reserves first
_KEYS = 65_536         # keys remembered per topic (the table is emptied when full)
_ROOM_POLL_S = 0.001   # how often a blocked produce() looks for room in buffer.memory
_RETRY_S = 0.005       # how soon records the accumulator refused are offered again
_STALE_S = 0.01        # the least age at which produce() itself seals a run

# a run's items: key, value, on_delivery, key, value, on_delivery, ...
Items = list[bytes | DeliveryCallback | None]


class _Run:
    """One partition's records not yet sealed into a batch, and what the callers'
    fast path reads to add to them."""

    __slots__ = ("counted", "items", "limit", "opened", "partition", "reserved", "size",
                 "small", "stamp", "topic")

    def __init__(self, topic: _Topic, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.items: Items = []
        # produce() appends to items without the lock while there are fewer than this
        # (0: take the lock); set under the lock, only while the run is open
        self.limit = 0
        self.small = 0                 # the largest key + value the fast path takes
        self.counted = 0               # items counted into size
        self.size = BATCH_OVERHEAD
        self.reserved = 0              # buffer.memory held for the run
        self.opened = 0.0              # when it was opened (monotonic)
        self.stamp = 0                 # its records' CreateTime (ms)


class _Topic:
    """What the callers' threads need to place a topic's records."""

    __slots__ = ("count", "name", "runs", "sticky", "table")

    def __init__(self, name: str, count: int, sticky: int) -> None:
        self.name = name
        self.count = count
        self.runs = [_Run(self, p) for p in range(count)]
        self.table: dict[bytes, _Run] = {}   # key -> its partition's run (murmur2)
        self.sticky = self.runs[sticky]      # where unkeyed records go


class _Sealed:
    """A cut run, queued for the loop thread."""

    __slots__ = ("created", "partition", "records", "reserved", "size", "stamp", "topic")

    def __init__(self, topic: str, partition: int, records: Items, size: int, reserved: int,
                 stamp: int, created: float) -> None:
        self.topic, self.partition, self.records = topic, partition, records
        self.size, self.reserved, self.stamp, self.created = size, reserved, stamp, created


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
        # open runs, oldest first (every run whose limit is above 0 is here)
        self._opened: dict[_Run, None] = {}
        # sealed runs and records that are not plain, in produce order
        self._queue: collections.deque[_Sealed | _Produced[V, K]] = collections.deque()
        self._held = 0            # reserved by runs + queued here, not yet in _acc
        self._scheduled = False   # a _drain is coming
        self._ticking = False     # a _tick is coming
        self._retry: asyncio.TimerHandle | None = None
        self._learned: set[str] = set()   # topics whose metadata produce() waited for
        self._acc = a._acc
        self._batch_size = self._acc.batch_size
        self._linger = self._acc.linger
        # a run this old is sealed rather than appended to in the locked path (its
        # CreateTime would be off by more); linger.ms=0 is left to the loop's _tick
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
            if key is None:
                r = st.sticky
                if len(value) <= r.small:
                    items = r.items
                    if len(items) < r.limit:
                        items += (None, value, on_delivery)   # (one C call: no lock needed)
                        if not r.limit:
                            self._adopt(r)   # cut meanwhile: see the module's doc
                        return
            elif isinstance(key, bytes):
                r = st.table.get(key) or self._key_run(st, key)
                if len(value) + len(key) <= r.small:
                    items = r.items
                    if len(items) < r.limit:
                        items += (key, value, on_delivery)
                        if not r.limit:
                            self._adopt(r)
                        return
        self._produce_slow(topic, value, key, partition, headers, timestamp, on_delivery)

    @staticmethod
    def _key_run(st: _Topic, key: bytes) -> _Run:
        """The run of ``key``'s partition (murmur2, as Java's ``BuiltInPartitioner``),
        kept in the topic's table. (No lock: a dict's get, set and clear are each
        atomic.)"""
        table = st.table
        if len(table) >= _KEYS:
            table.clear()
        p = 0 if st.count == 1 else (murmur2(key) & 0x7FFFFFFF) % st.count
        r = table[key] = st.runs[p]
        return r

    def _adopt(self, r: _Run) -> None:
        """A record went into run ``r`` as it was being cut: see that the run is open
        (then linger.ms seals it), or, if its topic's state was dropped, cut it now."""
        with self._lock:
            if not r.items or r in self._opened:
                return
            self._open(r)
            if self._topics.get(r.topic.name) is not r.topic:
                self._cut(r)

    def _produce_slow(self, topic: str, value: V, key: K | None, partition: int | None,
                      headers: HeadersArg, timestamp: int | None,
                      on_delivery: DeliveryCallback | None) -> None:
        """Open, seal or grow a run, wait for room; or queue a record that is not plain."""
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
                st.sticky = st.runs[self._next_sticky(st, 0)]
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
            return st.sticky.partition   # (the topic is gone: its state is being dropped)
        avail = a._leaders_available(st.name)
        part = a._partitioner
        if appended:
            part.record_appended(st.name, appended, st.count, avail, self._acc.queue_size)
        return part.partition(st.name, None, st.count, avail, self._acc.queue_size)

    def _place(self, st: _Topic, value: bytes, key: bytes | None,
               on_delivery: DeliveryCallback | None) -> bool:
        """Under the lock: append the record, opening, cutting or growing its run as
        needed, and set how far the fast path may fill it. False: no room in
        buffer.memory."""
        size = len(value)
        if key is None:
            r = st.sticky
        else:
            size += len(key)
            r = st.table.get(key) or self._key_run(st, key)
        s = size + RECORD_OVERHEAD
        while r in self._opened:
            self._account(r)
            if r.counted and (r.size + s > self._batch_size
                              or time.monotonic() - r.opened > self._stale):
                self._cut(r)   # full, or too old for the CreateTime it gives
                if key is None:
                    r = st.sticky   # (which may have moved to another partition)
                continue
            break
        else:
            self._account(r)   # (records appended as the run was cut)
            need = r.size + s
            room = self._room()
            if need > room and self._busy():
                return False
            reserved = max(need, min(_CHUNK, room))
            self._held += reserved
            r.reserved += reserved
            self._open(r)
        if size > r.small:
            r.small = size   # (records counted before took no more than the old one)
        s = r.small + RECORD_OVERHEAD   # (what _account counts this record as)
        if r.size + s > r.reserved:
            need = r.size + s - r.reserved
            room = self._room()
            if need > room:
                return False
            # (as much again as it holds: a run that fills fast comes back less often)
            more = max(need, min(r.reserved, self._batch_size - r.reserved, room))
            self._held += more
            r.reserved += more
        items = r.items
        items += (key, value, on_delivery)
        self._account(r)
        # how many more records of up to `small` bytes fit in the batch and the room held
        fits = (min(r.reserved, self._batch_size) - r.size) // s
        r.limit = len(items) + 3 * fits if fits > 0 else 0
        return True

    def _open(self, r: _Run) -> None:
        """Under the lock: run ``r`` is open from now (its CreateTime, and its linger.ms,
        count from here)."""
        r.opened = time.monotonic()
        r.stamp = time.time_ns() // 1_000_000
        self._opened[r] = None
        if not self._ticking:
            self._ticking = True
            self._call(self._tick)

    @staticmethod
    def _account(r: _Run) -> None:
        """Under the lock: count the records appended to run ``r`` since it was last
        counted, each as ``small`` bytes (the most the fast path takes into it): exact
        where a run's records are all one size, over where they vary, never under
        (but for a record appended as its run is cut). (Adding up their lengths cost
        a pass of about 30 ns a record.)"""
        n = len(r.items)
        if n > r.counted:
            r.size += (n - r.counted) // 3 * (r.small + RECORD_OVERHEAD)
            r.counted = n

    def _cut(self, r: _Run) -> None:
        """Under the lock: seal run ``r``, as far as it is counted, into a batch queued
        for the loop thread. A record appended meanwhile stays, and opens the next
        run (as it does for a caller that appends after this)."""
        r.limit = 0   # (first: see _adopt)
        self._opened.pop(r, None)
        self._account(r)
        items = r.items
        n = r.counted
        st = r.topic
        if n:
            records = items[:n]
            del items[:n]
            self._queue.append(_Sealed(st.name, r.partition, records, r.size, r.reserved,
                                       r.stamp, r.opened))
            self._schedule()
            if r is st.sticky:
                st.sticky = st.runs[self._next_sticky(st, r.size)]
        else:
            self._held -= r.reserved
        r.size = BATCH_OVERHEAD
        r.counted = r.reserved = 0
        if items:
            self._open(r)
        else:
            r.small = 0   # (the next run sizes itself)

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

    def _seal_topic(self, topic: str) -> None:
        for r in list(self._opened):
            if r.topic.name == topic:
                self._cut(r)

    def _seal_all(self) -> None:
        for r in list(self._opened):
            self._cut(r)

    def seal_batches(self) -> None:
        """Hand every open run to the loop thread (flush, send, transactions)."""
        with self._lock:
            self._seal_all()

    # -- the loop's side ------------------------------------------------------------------
    def _tick(self) -> None:
        """Seal the runs that have waited ``linger.ms``; come back for the others."""
        now = time.monotonic()
        with self._lock:
            for r in list(self._opened):
                age = now - r.opened
                if age < self._linger:
                    self._loop.call_later(self._linger - age, self._tick)
                    break
                self._cut(r)
            else:
                if self._opened:
                    # a run cut here opened again (a record was appended as it was cut):
                    # its linger.ms starts now, and this tick, still pending, must come
                    self._loop.call_later(self._linger, self._tick)
                else:
                    self._ticking = False

    def _drain(self) -> None:
        """Move the queue into the accumulator, in order: sealed runs as whole batches,
        runs of other records through the async ``produce_all``. Records the
        accumulator refuses wait, first in line, until a batch is released (or
        ``_RETRY_S`` at the latest)."""
        with self._lock:
            self._scheduled = False
        q = self._queue
        a = self._target
        acc = self._acc
        while q:
            if isinstance(q[0], _Sealed):
                b = q.popleft()
                assert isinstance(b, _Sealed)
                self._commit(b)
                continue
            run: list[_Produced[V, K]] = []
            limit = len(q)
            if acc.incomplete:   # take about what fits, not a pass over all of q
                room = acc.buffer_memory - acc.used
                first = q[0]
                assert not isinstance(first, _Sealed)
                limit = max(room, 0) // (RECORD_OVERHEAD + _size_hint(first[1])
                                         + _size_hint(first[2])) + 1
            while q and len(run) < limit and not isinstance(q[0], _Sealed):
                item = q.popleft()
                assert not isinstance(item, _Sealed)
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

    def _commit(self, b: _Sealed) -> None:
        """A sealed run into the accumulator, as one batch."""
        with self._lock:
            self._held -= b.reserved
        a = self._target
        records = b.records
        values = cast("list[bytes | None]", records[1::3])
        keyed = cast("list[bytes | None]", records[0::3])
        keys = None if keyed.count(None) == len(keyed) else keyed   # (None: no record has one)
        got = records[2::3]
        callbacks = None
        if got.count(None) != len(got):
            callbacks = [(i, cast(DeliveryCallback, cb)) for i, cb in enumerate(got)
                         if cb is not None]
        if b.topic in a._pending or b.topic not in a.metadata.topics:
            # (the topic's metadata went away: its records wait for it, as produce's do)
            a.queue_for_metadata(b.topic, values, keys, callbacks)
            return
        a._mark_written(b.topic, b.partition)
        batch = self._acc.add_batch(b.topic, b.partition, values, keys,
                                    [b.stamp] * len(values), b.size, b.created)
        batch.callbacks = callbacks

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
                    del self._topics[name]   # (first: a late append then cuts, in _adopt)
                    self._seal_topic(name)

    async def _queued_then(self, then: Callable[[], Awaitable[object]]) -> None:
        """Hand every open batch and queued record to the async producer, then run ``then``."""
        self.seal_batches()
        while self._queue or self._scheduled:
            self._drain()
            # (records the accumulator refused for want of room are offered again later)
            await asyncio.sleep(_RETRY_S if self._queue else 0)
        await then()
