"""The record accumulator: one queue of batches per partition.

``append`` adds a record to the newest batch of its partition's queue, or opens
a new batch when that one would grow past ``batch.size``. A batch is *ready*
to send when it is full (another batch queues behind it), when it has waited
``linger.ms``, when a flush is under way, or, for a retry, once its back-off
has passed. ``drain(node)`` takes at most one ready batch per partition led by
``node`` (the Produce protocol carries one batch per partition per request),
up to ``max.request.size``.

Memory is bounded by ``buffer.memory``: ``used`` counts the estimated size of
every batch not yet acknowledged, and appends beyond the limit either wait
(``send``) or fail with ``BufferFull`` (``produce``), as Java's
``max.block.ms`` and librdkafka's queue-full error do.

Record sizes are estimated, not exact: key and value lengths plus 21 bytes
(the worst-case varint overhead of a small record), which is what Java's
``DefaultRecord.sizeInUpperBound`` amounts to.
"""

from __future__ import annotations

import asyncio
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate

from kaflite.client._aio import wait_event
from kaflite.protocol.records import encode_batch_buffer

__all__ = ["BufferFull", "DeliveryCallback", "ProducerBatch", "RecordAccumulator",
           "RecordMetadata"]

RECORD_OVERHEAD = 21
BATCH_OVERHEAD = 61
HeaderList = Sequence[tuple[str, bytes | None]]


class BufferFull(BufferError):
    """``buffer.memory`` is exhausted (the producer's queue is full)."""


class RecordMetadata:
    """Where a record was written."""

    __slots__ = ("offset", "partition", "timestamp", "topic")

    def __init__(self, topic: str, partition: int, offset: int, timestamp: int) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return (f"RecordMetadata(topic={self.topic!r}, partition={self.partition}, "
                f"offset={self.offset}, timestamp={self.timestamp})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RecordMetadata) and (
            self.topic, self.partition, self.offset, self.timestamp) == (
            other.topic, other.partition, other.offset, other.timestamp)

    def __hash__(self) -> int:
        return hash((self.topic, self.partition, self.offset))


# on_delivery(error, metadata); what it returns is ignored
DeliveryCallback = Callable[[BaseException | None, RecordMetadata | None], object]


class ProducerBatch:
    __slots__ = ("attempts", "base_offset", "base_sequence", "callbacks", "closed", "created",
                 "done", "encoded", "error", "headers", "keys", "log_append_time", "parent",
                 "partition", "parts", "producer_epoch", "producer_id", "record_errors",
                 "refused_out_of_order", "retry_at", "size", "timestamps", "topic", "values")

    def __init__(self, topic: str, partition: int, now: float) -> None:
        self.topic = topic
        self.partition = partition
        self.values: list[bytes | None] = []
        self.keys: list[bytes | None] | None = None
        self.headers: list[HeaderList | None] | None = None
        self.timestamps: list[int] = []
        self.size = BATCH_OVERHEAD
        self.created = now
        self.done: asyncio.Future[None] | None = None
        self.callbacks: list[tuple[int, DeliveryCallback]] | None = None
        self.attempts = 0
        self.retry_at = 0.0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        # its last answer was OUT_OF_ORDER_SEQUENCE_NUMBER under its current sequence
        self.refused_out_of_order = False
        self.encoded: bytearray | None = None   # (the one copy of its records: see encode)
        self.base_offset = -1
        self.log_append_time = -1
        self.error: BaseException | None = None
        # KIP-467: the records the broker named as the reason it refused the batch
        self.record_errors: dict[int, BaseException] | None = None
        # True once nothing more may be appended: another batch queued behind it,
        # or it was drained (encoded) or expired. The producer's fast path checks it.
        self.closed = False
        # After a split (MESSAGE_TOO_LARGE): the halves, as (first index, batch); this
        # batch then answers for its records through them. ``parent`` is the reverse.
        self.parts: list[tuple[int, ProducerBatch]] | None = None
        self.parent: ProducerBatch | None = None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def finished(self) -> bool:
        if self.parts is not None:
            return all(part.finished for _, part in self.parts)
        return self.error is not None or self.base_offset >= 0 or self.log_append_time != -1

    def future(self) -> asyncio.Future[None]:
        if self.done is None:
            self.done = asyncio.get_running_loop().create_future()
            if self.error is not None:
                self.done.set_exception(self.error)
            elif self.finished:
                self.done.set_result(None)
        return self.done

    def split(self) -> list[ProducerBatch]:
        """Two halves of this batch's records, which then answer for them.

        Callbacks move to the halves; the halves keep this batch's attempts and
        creation time (delivery.timeout.ms counts from the first append) and,
        for an idempotent producer, the sequence numbers of their records.
        """
        n = len(self.values)
        half = n // 2
        parts: list[tuple[int, ProducerBatch]] = []
        for start, end in ((0, half), (half, n)):
            part = ProducerBatch(self.topic, self.partition, self.created)
            part.values = self.values[start:end]
            part.timestamps = self.timestamps[start:end]
            if self.keys is not None:
                part.keys = self.keys[start:end]
            if self.headers is not None:
                part.headers = self.headers[start:end]
            part.size = BATCH_OVERHEAD + (self.size - BATCH_OVERHEAD) * (end - start) // n
            part.attempts, part.closed, part.parent = self.attempts, True, self
            if self.base_sequence >= 0:
                part.producer_id, part.producer_epoch = self.producer_id, self.producer_epoch
                part.base_sequence = (self.base_sequence + start) & 0x7FFFFFFF
            if self.callbacks:
                part.callbacks = [(i - start, cb) for i, cb in self.callbacks if start <= i < end]
            parts.append((start, part))
        self.parts, self.callbacks, self.encoded = parts, None, None
        return [part for _, part in parts]

    def _part_finished(self) -> None:
        """A half is done: once both are, this batch completes (or fails) as they did.

        Its callbacks went to the halves and ``metadata`` asks them, so completing
        here only resolves the future and tells this batch's own parent.
        """
        if not self.finished:
            return
        failed = next((p.error for _, p in self.parts or [] if p.error is not None), None)
        if failed is not None:
            self.fail(failed)
        else:
            self.complete(-1, -1)

    def error_of(self, index: int) -> BaseException | None:
        """Why record ``index`` of this (sent) batch failed; None if it did not."""
        if self.record_errors is not None and index in self.record_errors:
            return self.record_errors[index]
        return self.error

    def record(self, index: int) -> tuple[ProducerBatch, int]:
        """The batch that was sent with record ``index`` (a half after a split), and its index there."""
        batch = self
        while batch.parts is not None:
            start, batch = next((s, p) for s, p in reversed(batch.parts) if index >= s)
            index -= start
        return batch, index

    def metadata(self, index: int) -> RecordMetadata:
        if self.parts is not None:
            batch, index = self.record(index)
            return batch.metadata(index)
        ts = self.log_append_time if self.log_append_time != -1 else self.timestamps[index]
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        return RecordMetadata(self.topic, self.partition, offset, ts)

    def encode(self, compression: int, producer_id: int, producer_epoch: int,
               base_sequence: int, transactional: bool = False) -> bytearray:
        key = (producer_id, producer_epoch, base_sequence)
        if self.encoded is None or (self.producer_id, self.producer_epoch,
                                    self.base_sequence) != key:
            ts: list[int] | None = self.timestamps
            base = min(ts) if ts else None
            if ts and ts.count(ts[0]) == len(ts):
                ts = None   # one CreateTime (a batch handed over whole): no delta column
            self.closed = True
            # (one buffer, each value copied into it once; it goes to the socket as it is)
            self.encoded = encode_batch_buffer(
                self.values, keys=self.keys, headers=self.headers, timestamps=ts,
                compression=compression, producer_id=producer_id,
                producer_epoch=producer_epoch, base_sequence=base_sequence,
                transactional=transactional, base_timestamp=base)
            self.producer_id, self.producer_epoch, self.base_sequence = key
        return self.encoded

    def complete(self, base_offset: int, log_append_time: int) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        # (the encoded records are not needed any more: whoever still holds the batch,
        # a flush waiting for it, say, should not keep them from being reused)
        self.encoded = None
        if self.done is not None and not self.done.done():
            self.done.set_result(None)
        if self.callbacks:
            for index, cb in self.callbacks:
                cb(None, self.metadata(index))
        if self.parent is not None:
            self.parent._part_finished()

    def fail(self, error: BaseException,
             record_errors: dict[int, BaseException] | None = None) -> None:
        """Fail every record with ``error``, or, for those ``record_errors`` names (by
        index), with theirs."""
        self.error = error
        self.record_errors = record_errors
        self.encoded = None
        if self.done is not None and not self.done.done():
            self.done.set_exception(error)
            self.done.exception()  # the caller may never look
        if self.callbacks:
            for index, cb in self.callbacks:
                cb(self.error_of(index), self.metadata(index))
        if self.parent is not None:
            self.parent._part_finished()


TP = tuple[str, int]


def cut_batches(sizes: Sequence[int], batch_size: int) -> list[tuple[int, int, int]]:
    """(start, end, bytes) of consecutive batches of at most ``batch_size`` bytes.

    A batch takes records while their sizes, plus the batch overhead, fit; a
    record larger than that gets a batch of its own. Found with running sums
    and bisection, so the cost is per batch, not per record.
    """
    cum = list(accumulate(sizes))
    n = len(cum)
    out = []
    start, before = 0, 0
    room = batch_size - BATCH_OVERHEAD
    while start < n:
        end = bisect_right(cum, before + room, start)
        if end == start:
            end = start + 1   # one record bigger than a batch
        total = BATCH_OVERHEAD + cum[end - 1] - before
        out.append((start, end, total))
        before = cum[end - 1]
        start = end
    return out


class RecordAccumulator:
    def __init__(self, batch_size: int, linger_ms: int, buffer_memory: int) -> None:
        self.batch_size = max(batch_size, 1)
        self.linger = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self.queues: dict[TP, deque[ProducerBatch]] = {}
        self.used = 0
        self.incomplete: set[ProducerBatch] = set()
        self.flushing = 0
        self.wakeup: Callable[[], None] = lambda: None
        self._space: asyncio.Event | None = None
        # called (on the loop) whenever a batch's memory is released
        self.space_listeners: list[Callable[[], None]] = []

    # -- appending -------------------------------------------------------------------
    def has_room(self, size: int) -> bool:
        return self.used + size <= self.buffer_memory or not self.incomplete

    async def wait_for_room(self, size: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.has_room(size):
            if self._space is None:
                self._space = asyncio.Event()
            self._space.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BufferFull(f"buffer.memory ({self.buffer_memory} bytes) exhausted "
                                 f"for {timeout:.1f}s (max.block.ms)")
            await wait_event(self._space, remaining)

    def append(self, topic: str, partition: int, value: bytes | None, key: bytes | None,
               headers: HeaderList | None, timestamp: int, size: int
               ) -> tuple[ProducerBatch, int]:
        tp = (topic, partition)
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        batch = queue[-1] if queue else None
        if batch is None or batch.closed or batch.attempts \
                or (batch.size + size > self.batch_size and batch.values):
            if batch is not None:
                batch.closed = True
            batch = ProducerBatch(topic, partition, time.monotonic())
            queue.append(batch)
            self.incomplete.add(batch)
            self.wakeup()
        index = len(batch.values)
        batch.values.append(value)
        batch.timestamps.append(timestamp)
        if key is not None:
            if batch.keys is None:
                batch.keys = [None] * index
            batch.keys.append(key)
        elif batch.keys is not None:
            batch.keys.append(None)
        if headers:
            if batch.headers is None:
                batch.headers = [None] * index
            batch.headers.append(headers)
        elif batch.headers is not None:
            batch.headers.append(None)
        batch.size += size
        self.used += size
        return batch, index

    def append_many(self, topic: str, partition: int, values: Sequence[bytes | None],
                    keys: Sequence[bytes | None] | None, timestamp: int,
                    sizes: list[int]) -> list[tuple[ProducerBatch, int, int]]:
        """Bulk append: whole slices go into batches at once (send_batch)."""
        out: list[tuple[ProducerBatch, int, int]] = []
        tp = (topic, partition)
        queue = self.queues.setdefault(tp, deque())
        if queue:
            queue[-1].closed = True
        now = time.monotonic()
        for start, end, total in cut_batches(sizes, self.batch_size):
            batch = ProducerBatch(topic, partition, now)
            batch.values = list(values[start:end])
            if keys is not None:
                batch.keys = list(keys[start:end])
            batch.timestamps = [timestamp] * (end - start)
            batch.size = total
            self.used += total
            queue.append(batch)
            self.incomplete.add(batch)
            out.append((batch, 0, end - start))
        self.wakeup()
        return out

    def extend(self, topic: str, partition: int, values: list[bytes | None],
               keys: list[bytes | None] | None, timestamp: int,
               sizes: list[int]) -> list[tuple[ProducerBatch, int, int]]:
        """Bulk append that continues the partition's open batch (the sync producer's
        hand-off): the records that fit go into it, the rest into new batches cut as
        ``append_many`` cuts them. Returns (batch, first index, count) per batch."""
        out: list[tuple[ProducerBatch, int, int]] = []
        queue = self.queues.get((topic, partition))
        if queue is None:
            queue = self.queues[(topic, partition)] = deque()
        n = len(values)
        taken = 0
        batch = queue[-1] if queue else None
        if batch is not None and not batch.closed and not batch.attempts \
                and batch.headers is None and batch.parts is None:
            room = self.batch_size - batch.size
            cum = list(accumulate(sizes))
            taken = bisect_right(cum, room)
            if taken:
                index = len(batch.values)
                batch.values += values[:taken]
                if keys is not None:
                    if batch.keys is None:
                        batch.keys = [None] * index
                    batch.keys += keys[:taken]
                elif batch.keys is not None:
                    batch.keys += [None] * taken
                batch.timestamps += [timestamp] * taken
                batch.size += cum[taken - 1]
                self.used += cum[taken - 1]
                out.append((batch, index, taken))
        if taken < n:
            ks = keys[taken:] if keys is not None else None
            out += self.append_many(topic, partition, values[taken:], ks, timestamp,
                                    sizes[taken:])
        return out

    def add_batch(self, topic: str, partition: int, values: list[bytes | None],
                  keys: list[bytes | None] | None, timestamps: list[int], size: int,
                  created: float) -> ProducerBatch:
        """A whole batch built elsewhere (the sync producer's caller-side batches): queued
        behind the partition's batches as it is, closed, so sendable at once."""
        queue = self.queues.get((topic, partition))
        if queue is None:
            queue = self.queues[(topic, partition)] = deque()
        if queue:
            queue[-1].closed = True
        batch = ProducerBatch(topic, partition, created)
        batch.values, batch.keys, batch.timestamps = values, keys, timestamps
        batch.size = size
        batch.closed = True
        self.used += size
        queue.append(batch)
        self.incomplete.add(batch)
        self.wakeup()
        return batch

    def queue_size(self, topic: str, partition: int) -> int:
        q = self.queues.get((topic, partition))
        return len(q) if q else 0

    # -- sending ----------------------------------------------------------------------
    def ready(self, now: float, leader_of: Callable[[str, int], int | None],
              muted: set[TP]) -> tuple[set[int], float, set[str]]:
        """Nodes with a sendable batch, seconds until the next one may be, unknown leaders."""
        nodes: set[int] = set()
        unknown: set[str] = set()
        next_check = self.linger if self.linger > 0 else 0.05
        flushing = self.flushing > 0
        for tp, queue in self.queues.items():
            if not queue or tp in muted:
                continue
            leader = leader_of(tp[0], tp[1])
            if leader is None:
                unknown.add(tp[0])
                continue
            if leader in nodes:
                continue
            batch = queue[0]
            if batch.attempts and batch.retry_at > now:
                next_check = min(next_check, batch.retry_at - now)
                continue
            waited = now - batch.created
            if len(queue) > 1 or batch.size >= self.batch_size or waited >= self.linger \
                    or flushing or batch.attempts or batch.closed:
                nodes.add(leader)
            else:
                next_check = min(next_check, self.linger - waited)
        return nodes, max(next_check, 0.0), unknown

    def drain(self, node: int, now: float, leader_of: Callable[[str, int], int | None],
              muted: set[TP], max_size: int) -> list[ProducerBatch]:
        out: list[ProducerBatch] = []
        total = 0
        for tp, queue in self.queues.items():
            if not queue or tp in muted or leader_of(tp[0], tp[1]) != node:
                continue
            batch = queue[0]
            if batch.attempts and batch.retry_at > now:
                continue
            if out and total + batch.size > max_size:
                break
            queue.popleft()
            total += batch.size
            out.append(batch)
        return out

    def reenqueue(self, batch: ProducerBatch, behind_sent: bool = False) -> None:
        """Put a batch back at the front, in sequence order (for idempotent retries), or
        with ``behind_sent`` behind every batch at the front that was sent before."""
        queue = self.queues.setdefault((batch.topic, batch.partition), deque())
        i = 0
        while i < len(queue) and queue[i].attempts and \
                (behind_sent or 0 <= queue[i].base_sequence < batch.base_sequence):
            i += 1
        queue.insert(i, batch)

    def adopt(self, batch: ProducerBatch) -> None:
        """Count a batch made outside ``append`` (a split half) as incomplete."""
        self.incomplete.add(batch)
        self.used += batch.size

    def release(self, batch: ProducerBatch) -> None:
        if batch in self.incomplete:
            self.incomplete.discard(batch)
            self.used -= batch.size
            if self._space is not None:
                self._space.set()
            for listener in self.space_listeners:
                listener()

    def expire(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        """Queued batches older than ``delivery.timeout.ms``."""
        out = []
        for queue in self.queues.values():
            while queue and now - queue[0].created > delivery_timeout:
                batch = queue.popleft()
                batch.closed = True
                out.append(batch)
        return out

    def pending_batches(self) -> list[ProducerBatch]:
        return [b for q in self.queues.values() for b in q]
