"""``Producer``: send records to partition leaders, batched, retried and idempotent.

    async with Producer({"bootstrap.servers": servers}) as producer:
        md = await producer.send("t", b"value", key=b"k")           # one record
        producer.produce("t", b"v", on_delivery=callback)           # fire and forget
        await producer.send_batch("t", [b"a", b"b", b"c"])          # bulk path
        await producer.flush()

``send`` waits for the acknowledgement; ``produce`` only queues the record
(and raises ``BufferFull`` when ``buffer.memory`` is exhausted), reporting
the outcome to ``on_delivery(error, metadata)``; ``send_batch`` hands a whole
sequence of values to the accumulator at once and encodes each batch with the
column encoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import add
from typing import Generic, cast

from kaflite.client._aio import cancel_and_wait
from kaflite.client._base import BaseClient
from kaflite.client.metrics import AVG_MAX
from kaflite.client.pool import DATA
from kaflite.client.producer._accumulator import (
    RECORD_OVERHEAD,
    BufferFull,
    DeliveryCallback,
    ProducerBatch,
    RecordAccumulator,
    RecordMetadata,
    cut_batches,
)
from kaflite.client.producer._columns import FastPaths
from kaflite.client.producer._idempotence import IdempotenceState
from kaflite.client.producer._partitioner import KeyCache, Partitioner
from kaflite.client.producer._sender import Sender, SenderHooks
from kaflite.client.producer._transactions import (
    ConsumerGroupMetadata,
    TransactionManager,
)
from kaflite.client.producer._values import (
    BatchMetadata,
    HeadersArg,
    K,
    Raw,
    V,
    _headers,
    _Queued,
    _size_hint,
    _to_bytes,
)
from kaflite.client.recovery import Action, action_for, error_name
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kaflite.protocol.records import Compression

__all__ = ["BatchMetadata", "Producer", "Raw"]

_CODECS = {"none": Compression.NONE, "gzip": Compression.GZIP, "snappy": Compression.SNAPPY,
           "lz4": Compression.LZ4, "zstd": Compression.ZSTD}


class Producer(FastPaths[K, V], BaseClient, Generic[K, V]):
    """Generic in the types of the keys (``K``) and values (``V``) it sends: those its
    serializers take, ``Raw`` (bytes, str, buffers) without one. Serializers given as
    keyword arguments type the producer (``Producer(c, value_serializer=json_bytes)``);
    given in the config dict, they do not, and ``Producer[str, Event](c)`` does."""

    ROLE = "producer"

    def __init__(self, config: Mapping[str, object] | None = None, *,
                 key_serializer: Callable[[K], bytes | None] | None = None,
                 value_serializer: Callable[[V], bytes | None] | None = None,
                 **kwargs: object) -> None:
        if key_serializer is not None:
            kwargs["key.serializer"] = key_serializer
        if value_serializer is not None:
            kwargs["value.serializer"] = value_serializer
        super().__init__(config, **kwargs)
        c = self.config
        self._acc = RecordAccumulator(c.int("batch.size"), c.int("linger.ms"),
                                      c.int("buffer.memory"))
        self._partitioner = Partitioner(
            c.string("partitioner"), c.int("batch.size"), c.bool("partitioner.ignore.keys"),
            c.bool("partitioner.adaptive.partitioning.enable"))
        txn_id = c.optional_string("transactional.id")
        self._idem = IdempotenceState(c.bool("enable.idempotence"), txn_id)
        self._txn: TransactionManager | None = None
        if txn_id is not None:
            self._txn = TransactionManager(self, self._idem, txn_id,
                                           c.int("transaction.timeout.ms"),
                                           lambda: self._acc.wakeup(), self._events.emit)
        self._compression = _CODECS[c.string("compression.type")]
        self._key_ser = c.function("key.serializer")
        self._value_ser = c.function("value.serializer")
        self._sender: Sender | None = None
        # leaders whose connection the sender waits on, and the last failure to open one
        self._opening: dict[int, asyncio.Task[None]] = {}
        self._connect_errors: dict[int, BaseException] = {}
        self._waiting: set[asyncio.Task[None]] = set()
        # Records produced while their topic's metadata was not known yet, per topic in
        # send order; one task appends them all once it comes. Later records of the
        # topic queue behind them, so that a producer's records keep their order.
        self._pending: dict[str, list[_Queued[V, K]]] = {}
        self._drains: dict[str, asyncio.Task[None]] = {}
        self._written: set[tuple[str, int]] = set()
        self._max_block = c.int("max.block.ms") / 1000
        # The fast path for unkeyed records (see produce): per topic, the open batch
        # of its sticky partition and the batch's size when it was opened here.
        self._open: dict[str, tuple[ProducerBatch, int]] = {}
        self._available: dict[str, tuple[int, list[int]]] = {}
        # The fast path for keyed records: murmur2's answers, per topic.
        self._keys = KeyCache()
        # ... and, per topic, the batch keyed records last opened or joined in each
        # partition (with the metadata version and the key table it was placed by)
        self._keyed_open: dict[str, tuple[int, dict[bytes, int], list[ProducerBatch | None]]] = {}
        # Bytes of the records in _pending: they count against buffer.memory too.
        self._pending_bytes = 0
        # KIP-714's producer metrics: the time a batch waited before it was sent, and
        # the throttle time each Produce answer asked for
        self._queue_time = self.metrics.sensor("record.queue.time", AVG_MAX)
        self._throttle_time = self.metrics.sensor("produce.throttle.time", AVG_MAX)

    async def _on_start(self) -> None:
        self.pool.role_providers.append(self._roles)
        if self._txn is not None:
            self.pool.role_providers.append(self._txn.roles)
        if self._idem.enabled and self._txn is None:
            await self._init_producer_id()
        self._sender = Sender(self, self._acc, self._idem, self._compression,
                              SenderHooks(self._produce_batches, self._init_producer_id,
                                          self._events.emit, self._txn, self._connected,
                                          self._queue_time.record))
        if self._txn is not None:
            self._txn.fail_queued = self._sender.fail_queued
        self._sender.start()

    def _connected(self, node_id: int) -> tuple[bool, BaseException | None]:
        """The sender's ``connected`` hook: is the leader's connection open? If not, open it
        (once at a time) and wake the sender when that ends."""
        if self.pool.connection_if_open(node_id) is not None:
            self._connect_errors.pop(node_id, None)
            return True, None
        if node_id not in self._opening:
            self._opening[node_id] = asyncio.get_running_loop().create_task(
                self._open_leader(node_id))
        return False, self._connect_errors.get(node_id)

    async def _open_leader(self, node_id: int) -> None:
        try:
            await self.pool.get(node_id)
            self._connect_errors.pop(node_id, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:      # the pool backs off and says so in the event log
            self._connect_errors[node_id] = exc
            self.metadata.request_update(f"cannot connect to broker {node_id}")
        finally:
            self._opening.pop(node_id, None)
            if self._sender is not None:
                self._sender.wakeup()

    async def _produce_batches(self, node_id: int, req: ProduceRequest
                               ) -> ProduceResponse | None:
        """A Produce of the sender's batches: at most v11 inside a transaction of
        transaction version 1, which Produce v12 would add partitions to (KIP-890)."""
        limit = self._txn.produce_max_version if self._txn is not None else None
        resp = await self._produce(node_id, req, max_version=limit)
        if resp is not None:
            self._throttle_time.record(resp.throttle_time_ms)
        return resp

    def _telemetry_resource(self) -> dict[str, str]:
        labels = super()._telemetry_resource()
        txn_id = self.config.optional_string("transactional.id")
        if txn_id is not None:
            labels["transactional_id"] = txn_id
        return labels

    def _roles(self, node_id: int, channel: str) -> list[str]:
        if channel != DATA:
            return []
        led = sorted(f"{t}-{p}" for t, p in self._written
                     if (m := self.metadata.leader(t, p)) is not None and m.leader == node_id)
        return [f"leader for {', '.join(led)}"] if led else []

    # -- idempotence -------------------------------------------------------------------------
    async def _init_producer_id(self) -> None:
        """InitProducerId; with an id already, bump its epoch (KIP-360)."""
        if self._txn is not None:
            await self._txn.init_producer_id()
            return
        idem = self._idem
        deadline = time.monotonic() + self.config.int("request.timeout.ms") / 1000
        backoff = self.config.int("retry.backoff.ms") / 1000
        while True:
            req = InitProducerIdRequest(
                transactional_id=idem.transactional_id,
                transaction_timeout_ms=self.config.int("transaction.timeout.ms"),
                producer_id=idem.producer_id, producer_epoch=idem.producer_epoch)
            try:
                resp: InitProducerIdResponse = await self._request_any(req)
                code = resp.error_code
            except (ConnectionError, TimeoutError, OSError):
                code = errors.NetworkExceptionError.code
                resp = InitProducerIdResponse()
            if code == 0:
                old = (idem.producer_id, idem.producer_epoch)
                idem.set_producer_id(resp.producer_id, resp.producer_epoch)
                self._events.emit("producer", f"producer id {resp.producer_id} epoch "
                                  f"{resp.producer_epoch}",
                                  cause="InitProducerId" if old[0] < 0 else "epoch bump")
                return
            if code == errors.InvalidProducerEpochError.code or \
                    code == errors.ProducerFencedError.code or \
                    action_for(code) in (Action.RAISE, Action.FATAL):
                if idem.producer_id >= 0 and code != errors.ProducerFencedError.code:
                    # The broker cannot bump this id: start over with a new one.
                    idem.producer_id, idem.producer_epoch = -1, -1
                    continue
                raise errors.error_for_code(code, "InitProducerId")
            if time.monotonic() > deadline:
                raise errors.error_for_code(code, f"InitProducerId: {error_name(code)}")
            await asyncio.sleep(backoff)

    # -- sending --------------------------------------------------------------------------------
    def _choose(self, topic: str, key: bytes | None, partition: int | None, size: int) -> int:
        tm = self.metadata.topics[topic]
        n = len(tm.partitions)
        if partition is not None:
            if not 0 <= partition < n:
                raise errors.UnknownTopicOrPartitionError(
                    f"{topic} has {n} partitions, not {partition + 1}")
            return partition
        if key is None or self._partitioner.ignore_keys:
            avail = self._leaders_available(topic)
            opened = self._open.pop(topic, None)
            if opened is not None:
                # Bytes appended on the fast path count against the sticky partition.
                batch, base = opened
                self._partitioner.record_appended(topic, batch.size - base, n, avail,
                                                  self._acc.queue_size)
            p = self._partitioner.partition(topic, key, n, avail, self._acc.queue_size)
            self._partitioner.record_appended(topic, size, n, avail, self._acc.queue_size)
            return p
        if self._partitioner.hashes_keys:
            return self._keys.partition(self._keys.table(topic, self.metadata.version, n), key, n)
        return self._partitioner.partition(topic, key, n)

    def _leaders_available(self, topic: str) -> list[int]:
        """Partitions of ``topic`` with a leader (cached per metadata version)."""
        version = self.metadata.version
        cached = self._available.get(topic)
        if cached is None or cached[0] != version:
            tm = self.metadata.topics[topic]
            cached = (version, [p.partition for p in tm.partitions if p.leader >= 0])
            self._available[topic] = cached
        return cached[1]

    def _append(self, topic: str, value: V, key: K | None, partition: int | None,
                headers: HeadersArg, timestamp: int | None
                ) -> tuple[ProducerBatch, int]:
        v = _to_bytes(value, self._value_ser)
        k = _to_bytes(key, self._key_ser)
        h = _headers(headers)
        size = RECORD_OVERHEAD + (len(v) if v is not None else 0) + \
            (len(k) if k is not None else 0)
        if h:
            size += sum(len(hk) + (len(hv) if hv else 0) + 2 for hk, hv in h)
        p = self._choose(topic, k, partition, size)
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        self._mark_written(topic, p)
        batch, index = self._acc.append(topic, p, v, k, h, ts, size)
        if k is None and partition is None and h is None and timestamp is None \
                and self._value_ser is None and batch.keys is None and batch.headers is None:
            self._open[topic] = (batch, batch.size)   # later unkeyed records go fast
        elif k is not None and partition is None and h is None and timestamp is None \
                and self._partitioner.hashes_keys:
            version = self.metadata.version   # later records of this key go fast
            entry = self._keyed_open.get(topic)
            if entry is None or entry[0] != version or len(entry[2]) <= p:
                n = len(self.metadata.topics[topic].partitions)
                entry = self._keyed_open[topic] = (
                    version, self._keys.table(topic, version, n), [None] * max(n, p + 1))
            entry[2][p] = batch
        return batch, index

    def _mark_written(self, topic: str, partition: int) -> None:
        if self._txn is not None:
            self._txn.record_for((topic, partition))
        self._written.add((topic, partition))

    async def learn_topic(self, topic: str) -> bool:
        """One metadata round trip naming ``topic`` if it is not known, then the records
        queued for it appended; True if its metadata is known now (the sync producer's
        first ``produce`` to a topic waits for this, as Java's ``send`` waits for
        metadata, rather than queue every record until the loop thread gets to it)."""
        if not self._started:
            await self.start()
        md = self.metadata
        if topic not in md.topics:
            md.add_topics([topic])
            with contextlib.suppress(Exception):   # (the queued records report it)
                await md.refresh(f"unknown topic {topic}")
        drain = self._drains.get(topic)
        if drain is not None:
            await asyncio.shield(drain)
        return topic in md.topics and topic not in self._pending

    async def _ready_for(self, topic: str) -> None:
        if not self._started:
            await self.start()
        if topic not in self.metadata.topics:
            await self.metadata.ensure_topic(topic, self._max_block)

    async def send(self, topic: str, value: V, key: K | None = None, partition: int | None = None,
                   headers: HeadersArg = None, timestamp: int | None = None) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        appended = None
        if partition is None and headers is None and timestamp is None \
                and topic not in self._pending:
            appended = self._append_fast(topic, value) if key is None \
                else self._append_keyed(topic, value, key)
        if appended is None:
            if self._txn is not None:
                self._txn.check_open()
            drain = self._drains.get(topic)
            if drain is not None:
                await drain     # records sent before this one go first
            if topic not in self.metadata.topics or not self._started:
                await self._ready_for(topic)
            hint = _size_hint(value)
            if not self._acc.has_room(hint):
                await self._acc.wait_for_room(hint, self._max_block)
            appended = self._append(topic, value, key, partition, headers, timestamp)
        batch, index = appended
        try:
            await batch.future()
        except Exception as exc:
            if batch.parts is None:
                raise batch.error_of(index) or exc from None
        # After a split (MESSAGE_TOO_LARGE) the record's own half decides, not the batch.
        sent, index = batch.record(index)
        error = sent.error_of(index)
        if error is not None:
            raise error
        return sent.metadata(index)

    def produce(self, topic: str, value: V, key: K | None = None, partition: int | None = None,
                headers: HeadersArg = None, timestamp: int | None = None,
                on_delivery: DeliveryCallback | None = None) -> None:
        """Queue one record without waiting; ``on_delivery(err, metadata)`` reports it."""
        if partition is None and headers is None and timestamp is None \
                and topic not in self._pending:
            appended = self._append_fast(topic, value) if key is None \
                else self._append_keyed(topic, value, key)
            if appended is not None:
                if on_delivery is not None:
                    batch, index = appended
                    if batch.callbacks is None:
                        batch.callbacks = []
                    batch.callbacks.append((index, on_delivery))
                return
        if self._txn is not None:
            self._txn.check_open()
        acc = self._acc
        if acc.used + self._pending_bytes >= acc.buffer_memory \
                and (acc.incomplete or self._pending):
            raise BufferFull(f"buffer.memory ({acc.buffer_memory} bytes) is exhausted")
        if topic in self._pending or topic not in self.metadata.topics or not self._started:
            # Until the topic's metadata comes, its records wait here, and count
            # against buffer.memory as if they were in a batch already.
            self._pending_bytes += RECORD_OVERHEAD + _size_hint(value) + _size_hint(key)
            self._queue_for_metadata(topic, (value, key, partition, headers, timestamp,
                                             on_delivery))
            return
        batch, index = self._append(topic, value, key, partition, headers, timestamp)
        if on_delivery is not None:
            if batch.callbacks is None:
                batch.callbacks = []
            batch.callbacks.append((index, on_delivery))

    def _queue_for_metadata(self, topic: str, record: _Queued[V, K]) -> None:
        queue = self._pending.get(topic)
        if queue is None:
            queue = self._pending[topic] = []
            task = asyncio.get_running_loop().create_task(self._append_queued(topic, queue))
            self._drains[topic] = task
            self._waiting.add(task)
            task.add_done_callback(self._waiting.discard)
        queue.append(record)

    def queue_for_metadata(self, topic: str, values: Sequence[bytes | None],
                           keys: Sequence[bytes | None] | None,
                           callbacks: Sequence[tuple[int, DeliveryCallback]] | None) -> None:
        """Records of a batch built elsewhere (the sync producer's) whose topic's metadata
        is not known (any more): they wait for it behind the topic's other records."""
        cbs = dict(callbacks or ())
        for i, v in enumerate(values):
            k = keys[i] if keys is not None else None
            self._pending_bytes += RECORD_OVERHEAD + _size_hint(v) + _size_hint(k)
            self._queue_for_metadata(topic, (cast(V, v), cast("K | None", k), None, None, None,
                                             cbs.get(i)))

    async def _append_queued(self, topic: str, queue: list[_Queued[V, K]]) -> None:
        """Once ``topic``'s metadata is known, append its queued records in send order."""
        failure: BaseException | None = None
        try:
            await self._ready_for(topic)
        except Exception as exc:
            failure = exc
        del self._pending[topic]
        del self._drains[topic]
        for record in queue:
            self._pending_bytes -= RECORD_OVERHEAD + _size_hint(record[0]) \
                + _size_hint(record[1])
        for value, key, partition, headers, timestamp, on_delivery in queue:
            try:
                if failure is not None:
                    raise failure
                batch, index = self._append(topic, value, key, partition, headers, timestamp)
            except Exception as exc:
                # As Java's doSend: a record of a transaction that fails here makes
                # the transaction abortable, so that it cannot commit without it.
                if self._txn is not None:
                    self._txn.fail(exc)
                if on_delivery is not None:
                    on_delivery(exc, None)
                continue
            if on_delivery is not None:
                if batch.callbacks is None:
                    batch.callbacks = []
                batch.callbacks.append((index, on_delivery))

    async def send_batch(self, topic: str, values: Sequence[V],
                         keys: Sequence[K | None] | None = None, partition: int | None = None,
                         timestamp: int | None = None, *, wait: bool = True) -> BatchMetadata:
        """Send many records at once (the bulk path); returns where each one went."""
        if self._txn is not None:
            self._txn.check_open()
        drain = self._drains.get(topic)
        if drain is not None:
            await drain     # records produced before these go first
        await self._ready_for(topic)
        vs: Sequence[bytes | None]
        if self._value_ser is None and values and isinstance(values[0], bytes):
            # raw bytes (a None among them is a tombstone): sent as given, not copied
            vs = cast("Sequence[bytes | None]", values)
        else:
            vs = [_to_bytes(v, self._value_ser) for v in values]
        ks: list[bytes | None] | None = None
        if keys is not None:
            if len(keys) != len(values):
                raise ValueError("keys and values differ in length")
            if self._key_ser is None and keys and set(map(type, keys)) == {bytes}:
                ks = list(cast("Sequence[bytes]", keys))   # (no conversion per key)
            else:
                ks = [_to_bytes(k, self._key_ser) for k in keys]
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        try:
            sizes = list(map(add, map(len, cast("Sequence[bytes]", vs)), repeat(RECORD_OVERHEAD)))
        except TypeError:  # None values (tombstones)
            sizes = [RECORD_OVERHEAD + (len(v) if v is not None else 0) for v in vs]
        if ks is not None:
            if None in ks:
                sizes = [s + (len(k) if k is not None else 0)
                         for s, k in zip(sizes, ks, strict=True)]
            else:
                sizes = list(map(add, sizes, map(len, cast("list[bytes]", ks))))
        await self._acc.wait_for_room(min(sum(sizes), self._acc.buffer_memory), self._max_block)
        n = len(self.metadata.topics[topic].partitions)
        parts: list[tuple[ProducerBatch, int, int]] = []
        order: list[int] | None = None
        if partition is not None or (ks is None and n == 1):
            p = self._choose(topic, None, partition if partition is not None else 0, 0)
            self._mark_written(topic, p)
            parts = self._acc.append_many(topic, p, vs, None, ts, sizes)
        elif ks is None:
            # Uniform sticky (KIP-794) at batch granularity: one batch's worth per partition.
            limit = self._acc.batch_size
            for i, j, total in cut_batches(sizes, limit):
                p = self._choose(topic, None, None, max(total, limit))
                self._mark_written(topic, p)
                parts += self._acc.append_many(topic, p, vs[i:j], None, ts, sizes[i:j])
        elif ks and None not in ks and (ps := self._key_partitions(
                topic, cast("list[bytes]", ks), n)) is not None:
            parts, order = self._append_keyed_columns(topic, ps, vs, ks, ts, sizes)
        else:
            groups: dict[int, list[int]] = {}
            for i, k in enumerate(ks):
                groups.setdefault(self._choose(topic, k, None, sizes[i]), []).append(i)
            positions: dict[int, int] = {}
            for p, idx in groups.items():
                self._mark_written(topic, p)
                for b in self._acc.append_many(topic, p, [vs[i] for i in idx],
                                               [ks[i] for i in idx], ts, [sizes[i] for i in idx]):
                    parts.append(b)
            flat = [i for idx in groups.values() for i in idx]
            for rank, i in enumerate(flat):
                positions[i] = rank
            order = [positions[i] for i in range(len(flat))]
        result = BatchMetadata(topic, parts, order)
        if wait:
            await asyncio.gather(*(b.future() for b, _, _ in parts))
        return result

    produce_many = send_batch

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now, and wait until it is acknowledged (or failed)."""
        if self._waiting:
            await asyncio.wait(list(self._waiting), timeout=timeout)
        batches = list(self._acc.incomplete)
        if not batches:
            return
        self._acc.flushing += 1
        self._acc.wakeup()
        try:
            futures = [b.future() for b in batches]
            await asyncio.wait(futures, timeout=timeout)
        finally:
            self._acc.flushing -= 1

    # -- transactions -------------------------------------------------------------------------
    def _transactional(self) -> TransactionManager:
        if self._txn is None:
            raise errors.KafkaError("this producer has no transactional.id")
        return self._txn

    async def init_transactions(self) -> None:
        """Get the transactional id's producer id and epoch, fencing older producers."""
        if not self._started:
            await self.start()
        await self._transactional().init_transactions()

    def begin_transaction(self) -> None:
        self._transactional().begin_transaction()
        self._open.clear()  # the fast paths may only append to batches of this transaction
        self._keyed_open.clear()
        self._keys.clear()

    async def send_offsets_to_transaction(
            self, offsets: Mapping[tuple[str, int], int],
            group: ConsumerGroupMetadata | str) -> None:
        """Commit a consumer group's offsets as part of the transaction (consume-process-produce)."""
        if isinstance(group, str):
            group = ConsumerGroupMetadata(group)
        await self._transactional().send_offsets(
            {(tp[0], tp[1]): int(o) for tp, o in offsets.items()}, group)

    async def commit_transaction(self) -> None:
        """Flush, then commit: the records and offsets become visible to read_committed."""
        txn = self._transactional()
        if self._waiting:  # records queued before their topic's metadata was known
            await asyncio.wait(list(self._waiting))
        await txn.commit(self.flush)

    async def abort_transaction(self) -> None:
        """Drop what was not sent, then abort: read_committed consumers never see it."""
        sender = self._sender
        assert sender is not None
        await self._transactional().abort(sender.drop_unsent, sender.wait_in_flight)

    @property
    def transaction_state(self) -> str | None:
        return self._txn.state.value if self._txn is not None else None

    def partitions_for(self, topic: str) -> list[int] | None:
        parts = self.metadata.partitions(topic)
        return None if parts is None else [p.partition for p in parts]

    async def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        if self._sender is not None:
            try:
                await self.flush(timeout)
            finally:
                self._open.clear()
                self._keyed_open.clear()
                await self._sender.close(timeout)
        for task in list(self._opening.values()):
            await cancel_and_wait(task)
        await super().close()
