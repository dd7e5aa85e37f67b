"""The sender: drains ready batches to partition leaders and handles the answers.

Theory of operation
-------------------
One loop wakes when a batch becomes ready (full, lingered, flushed or due for
retry) or a response frees a slot. It asks the accumulator which leaders have
ready batches and, for each leader with fewer than
``max.in.flight.requests.per.connection`` requests outstanding, drains one
batch per partition into one Produce request and sends it on its own task:
so each broker gets its own stream of requests, and a slow broker never
holds up the others.

Each partition's answer goes through the recovery table:

* no error (or DUPLICATE_SEQUENCE_NUMBER, a retry the broker had already
  appended): the batch completes with its base offset;
* NOT_LEADER_OR_FOLLOWER and friends: the KIP-951 hint, if any, is applied
  at once, a metadata refresh is requested, and the batch is re-queued;
* other retriable errors: re-queued after ``retry.backoff.ms`` (exponential,
  up to ``retry.backoff.max.ms``);
* UNKNOWN_PRODUCER_ID, or OUT_OF_ORDER_SEQUENCE_NUMBER that no other batch of
  the partition explains (``_out_of_order``): the producer epoch is bumped, that
  partition's sequences restart from 0 and the batch is re-queued (other
  partitions settle their batches under the old epoch first: see ``_idempotence``);
* OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier batch being retried: back off;
  before later batches sent already (whose answers were lost), or behind an
  earlier one refused the same way: retried behind the later ones, as one of them
  may be what the broker holds;
* OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that a later one of its partition
  overtook (acknowledged first): the batch fails, since written now it would
  follow records sent after it;
* anything else: the batch fails.

A request that fails on the network (connection lost, request timeout)
re-queues all its batches and drops the connection. A batch that has been
retried past ``delivery.timeout.ms`` or ``retries`` fails with the last error.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kaflite.client._aio import cancel_and_wait, wait_event
from kaflite.client.events import Emit
from kaflite.client.producer._accumulator import ProducerBatch, RecordAccumulator
from kaflite.client.producer._idempotence import IdempotenceState, after
from kaflite.client.recovery import Action, action_for, error_name
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import ProduceRequest, ProduceResponse
from kaflite.protocol.messages import produce_request as pq

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient
    from kaflite.client.producer._transactions import TransactionManager

__all__ = ["BatchRejectedError", "Sender"]

log = logging.getLogger("kaflite.client.producer")

DUPLICATE_SEQUENCE = errors.DuplicateSequenceNumberError.code
OUT_OF_ORDER = errors.OutOfOrderSequenceNumberError.code
MESSAGE_TOO_LARGE = errors.MessageTooLargeError.code


class DeliveryTimeout(errors.RequestTimedOutError):
    """A record was not acknowledged within ``delivery.timeout.ms``."""


class BatchRejectedError(errors.KafkaError):
    """A valid record that failed because the broker refused its batch for other records
    in it (KIP-467, Java's "innocent bystanders"): sending it again can succeed."""

    name = "BATCH_REJECTED"


@dataclass(frozen=True)
class SenderHooks:
    """What the sender asks of its producer beyond its config and metadata."""

    produce: Callable[[int, ProduceRequest], Awaitable[ProduceResponse | None]]
    bump_epoch: Callable[[], Awaitable[None]]
    emit: Emit
    txn: TransactionManager | None
    # True when the connection to the broker is open; else it starts opening it (the
    # sender is woken when that ends) and says why the last attempt failed, if one did
    connected: Callable[[int], tuple[bool, BaseException | None]]
    # the milliseconds a batch waited in the accumulator before it was sent (a metric)
    queue_time: Callable[[float], None] | None = None


class Sender:
    def __init__(self, producer: BaseClient, accumulator: RecordAccumulator,
                 idempotence: IdempotenceState, compression: int, hooks: SenderHooks) -> None:
        self.producer = producer
        self.acc = accumulator
        self.idem = idempotence
        self.compression = compression
        self.bump_epoch = hooks.bump_epoch
        self.produce = hooks.produce
        self.connected = hooks.connected
        self.emit = hooks.emit
        self.queue_time = hooks.queue_time
        self.txn: TransactionManager | None = hooks.txn
        cfg = producer.config
        self.acks = cfg.int("acks")
        self.timeout_ms = cfg.int("request.timeout.ms")
        self.max_in_flight = cfg.int("max.in.flight.requests.per.connection")
        self.max_request = cfg.int("max.request.size")
        self.delivery_timeout = cfg.int("delivery.timeout.ms") / 1000
        self.retries = cfg.int("retries")
        self.backoff = cfg.int("retry.backoff.ms") / 1000
        self.backoff_max = cfg.int("retry.backoff.max.ms") / 1000
        self.in_flight: dict[int, int] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._running = True
        self._bumping: asyncio.Task[None] | None = None
        self.loop_task: asyncio.Task[None] | None = None
        accumulator.wakeup = self.wakeup

    def wakeup(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self.loop_task = asyncio.get_running_loop().create_task(self._run())

    def _leader_of(self, topic: str, partition: int) -> int | None:
        p = self.producer.metadata.leader(topic, partition)
        return p.leader if p is not None else None

    async def _run(self) -> None:
        md = self.producer.metadata
        while self._running:
            self._wake.clear()
            now = time.monotonic()
            self._expire(now)
            if self.idem.enabled and self.txn is None and \
                    (self.idem.needs_bump or not self.idem.has_producer_id):
                if self._bumping is None or self._bumping.done():
                    self._bumping = asyncio.get_running_loop().create_task(self._bump())
                await wait_event(self._wake, 0.1)
                continue
            muted = self.idem.muted() if self.idem.enabled else set()
            if self.txn is not None:
                muted |= self.txn.muted()
            nodes, delay, unknown = self.acc.ready(now, self._leader_of, muted)
            if unknown:
                md.add_topics(unknown)
                md.request_update(f"no leader for {', '.join(sorted(unknown))}")
            for node in nodes:
                if self.in_flight.get(node, 0) >= self.max_in_flight:
                    continue
                # As Java's NetworkClient.ready: a node's batches are drained (and given
                # their sequence numbers) only once its connection is open. Drained while
                # it opened, a later Produce could be written before an earlier one waiting
                # on the same connect, and a broker that has no state for the producer
                # takes any first sequence: the earlier one was then OUT_OF_ORDER (found
                # against Apache Kafka by benchmarks/kafka_anchor.py).
                if not self.connected(node)[0]:
                    continue
                batches = self.acc.drain(node, now, self._leader_of, muted, self.max_request)
                if batches:
                    try:
                        self._send(node, batches)
                    except Exception as exc:  # a batch that cannot be encoded fails alone
                        log.exception("cannot send to broker %s", node)
                        for batch in batches:
                            if not batch.finished:
                                self._fail(batch, exc)
            if not self.acc.incomplete and not self.tasks:
                delay = 3600.0
            if delay > 0 or not nodes:
                await wait_event(self._wake, max(delay, 0.001))
            else:
                await asyncio.sleep(0)

    async def _bump(self) -> None:
        try:
            await self.bump_epoch()
        except Exception as exc:
            log.warning("InitProducerId failed: %r", exc)
            await asyncio.sleep(self.backoff)
        finally:
            self.wakeup()

    def _expire(self, now: float) -> None:
        for batch in self.acc.expire(now, self.delivery_timeout):
            leader = self._leader_of(batch.topic, batch.partition)
            last = self.connected(leader)[1] if leader is not None else None
            self._fail(batch, DeliveryTimeout(
                f"{batch.topic}-{batch.partition}: {len(batch)} records not delivered within "
                f"delivery.timeout.ms" + (f" (last: {last})" if last is not None else "")))

    # -- one request ---------------------------------------------------------------------
    def _send(self, node: int, batches: list[ProducerBatch]) -> None:
        by_topic: dict[str, list[pq.PartitionProduceData]] = {}
        sending = []
        queue_time, now = self.queue_time, time.monotonic()
        for batch in batches:
            pid, epoch, seq = self.idem.assign(batch)
            try:
                data = batch.encode(self.compression, pid, epoch, seq, self.txn is not None)
            except Exception as exc:  # e.g. a value of the wrong type: this batch fails
                self._fail(batch, exc)
                continue
            batch.attempts += 1
            if queue_time is not None:   # as Java: from its creation to this drain
                queue_time((now - batch.created) * 1000)
            sending.append(batch)
            by_topic.setdefault(batch.topic, []).append(
                pq.PartitionProduceData(index=batch.partition, records=data))
        if not sending:
            return
        batches = sending
        req = ProduceRequest(
            transactional_id=self.idem.transactional_id, acks=self.acks,
            timeout_ms=self.timeout_ms,
            topic_data=[pq.TopicProduceData(name=t, partition_data=p)
                        for t, p in by_topic.items()])
        self.in_flight[node] = self.in_flight.get(node, 0) + 1
        task = asyncio.get_running_loop().create_task(self._exchange(node, req, batches))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _exchange(self, node: int, req: ProduceRequest,
                        batches: list[ProducerBatch]) -> None:
        try:
            try:
                resp: ProduceResponse | None = await self.produce(node, req)
            except (ConnectionClosed, TimeoutError, OSError) as exc:
                self.producer.metadata.request_update(f"Produce to broker {node} failed")
                for batch in batches:
                    self._retry(batch, exc, Action.REFRESH_METADATA)
                return
            except Exception as exc:
                for batch in batches:
                    self._fail(batch, exc)
                return
            if resp is None:  # acks=0
                for batch in batches:
                    self._complete(batch, -1, -1)
                return
            self._handle(node, resp, batches)
        finally:
            self.in_flight[node] -= 1
            self.wakeup()

    def _handle(self, node: int, resp: ProduceResponse, batches: list[ProducerBatch]) -> None:
        md = self.producer.metadata
        endpoints = [(e.node_id, e.host, e.port, e.rack) for e in resp.node_endpoints]
        results = {(t.name, p.index): p for t in resp.responses for p in t.partition_responses}
        for batch in batches:
            pr = results.get((batch.topic, batch.partition))
            if pr is None:
                self._fail(batch, errors.UnknownServerError("no response for partition"))
                continue
            code = pr.error_code
            if code == 0 or code == DUPLICATE_SEQUENCE:
                self._complete(batch, pr.base_offset, pr.log_append_time_ms)
                continue
            if code == MESSAGE_TOO_LARGE and len(batch) > 1:
                self._split(batch)
                continue
            action = action_for(code)
            where = f"{error_name(code)} on {batch.topic}-{batch.partition}"
            if action in (Action.REFRESH_METADATA, Action.BACKOFF_REFRESH):
                hint = pr.current_leader
                if hint.leader_id >= 0:
                    md.apply_leader_hint(batch.topic, batch.partition, hint.leader_id,
                                         hint.leader_epoch, endpoints)
                md.request_update(where)
            exc = errors.error_for_code(code, pr.error_message or where)
            batch.refused_out_of_order = code == OUT_OF_ORDER
            if code == OUT_OF_ORDER and self.idem.enabled and self.idem.overtaken(batch):
                # a later batch was written first (see _idempotence): sent again, this
                # one would land after it, so it fails
                self.emit("producer", f"a batch of {len(batch)} records overtaken on "
                          f"{batch.topic}-{batch.partition} fails", cause=where)
                self._fail(batch, exc)
                continue
            behind = False
            if code == OUT_OF_ORDER and self.idem.enabled:
                action, behind = self._out_of_order(batch)
            if action == Action.BUMP_EPOCH and self.txn is not None:
                self._fail(batch, exc)  # a transaction cannot bump its epoch midway
            elif action == Action.BUMP_EPOCH and self.idem.enabled:
                if not self.idem.needs_bump:
                    self.emit("producer", "bump producer epoch", cause=where)
                self.idem.request_bump((batch.topic, batch.partition))
                self._retry(batch, exc, action)
            elif action in (Action.REFRESH_METADATA, Action.BACKOFF_REFRESH, Action.BACKOFF) \
                    or exc.retriable:
                self._retry(batch, exc, action, behind)
            elif pr.record_errors:
                # KIP-467: the records named fail with their own reasons, the rest with
                # BatchRejectedError, as Java's ProducerBatch.completeExceptionally
                rejected: dict[int, BaseException] = {
                    e.batch_index: errors.error_for_code(
                        code, e.batch_index_error_message or where)
                    for e in pr.record_errors if 0 <= e.batch_index < len(batch)}
                self._fail(batch, BatchRejectedError(
                    f"{where}: the batch had {len(rejected)} invalid record(s); this one "
                    "was not among them"), rejected)
            else:
                self._fail(batch, exc)

    def _out_of_order(self, batch: ProducerBatch) -> tuple[Action, bool]:
        """What OUT_OF_ORDER_SEQUENCE_NUMBER on a batch that nothing acknowledged has
        overtaken means, from the partition's other unfinished batches of its epoch
        (queued or in flight), and whether to retry it behind those already sent.

        * one with a lower sequence: the gap is ours (that batch failed and is being
          retried): back off, it goes first. Unless that one was refused
          OUT_OF_ORDER_SEQUENCE_NUMBER too: it waits behind the later batches sent, and
          this one must as well (backing off in front of it, each refused for the
          other, they held the partition until delivery.timeout.ms);
        * one with a higher sequence, sent before: the broker may hold it already (its
          answer was lost), which is why it refuses this one. Retried first, it comes
          back DUPLICATE_SEQUENCE_NUMBER and this one is then ``overtaken``; or it is
          written. Retrying this one at the head of the queue could never succeed and
          would hold the partition until delivery.timeout.ms;
        * neither: the broker's state and ours disagree, bump the epoch (KIP-360)."""
        tp = (batch.topic, batch.partition)
        epoch = (batch.producer_id, batch.producer_epoch)
        later_sent = False
        for other in itertools.chain(self.acc.queues.get(tp, ()), self.idem.in_flight.get(tp, ())):
            if other is batch or other.base_sequence < 0 \
                    or (other.producer_id, other.producer_epoch) != epoch:
                continue
            if not after(other.base_sequence, batch.base_sequence):
                if other.refused_out_of_order:
                    continue
                return Action.BACKOFF, False
            later_sent = later_sent or other.attempts > 0
        return (Action.BACKOFF, True) if later_sent else (Action.BUMP_EPOCH, False)

    # -- outcomes -----------------------------------------------------------------------
    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self.idem.done(batch, True)
        self.idem.acknowledged(batch)
        self.acc.release(batch)
        batch.complete(base_offset, log_append_time)

    def _fail(self, batch: ProducerBatch, exc: BaseException,
              record_errors: dict[int, BaseException] | None = None) -> None:
        self.idem.done(batch, True)
        self.acc.release(batch)
        batch.fail(exc, record_errors)
        if self.txn is not None:
            self.txn.fail(exc)

    def drop_unsent(self, exc: BaseException) -> None:
        """Fail every batch not sent yet (a transaction is being aborted)."""
        self.fail_queued(set(self.acc.queues), exc)

    def fail_queued(self, tps: set[tuple[str, int]], exc: BaseException) -> None:
        """Fail the batches of ``tps`` that were not sent yet."""
        for tp in tps:
            queue = self.acc.queues.get(tp)
            while queue:
                batch = queue.popleft()
                batch.closed = True
                self.idem.done(batch, True)
                self.acc.release(batch)
                batch.fail(exc)

    async def wait_in_flight(self) -> None:
        if self.tasks:
            await asyncio.wait(list(self.tasks))

    def _split(self, batch: ProducerBatch) -> None:
        """MESSAGE_TOO_LARGE for a batch of several records: send it as two halves.

        The broker appended nothing, so the halves take the batch's place, with
        its sequence numbers when idempotent; batches behind it in flight come
        back OUT_OF_ORDER and are re-queued behind the halves. A half that is
        still too large is split again; a single record that is fails.
        """
        self.idem.done(batch, False)
        self.acc.release(batch)
        halves = batch.split()
        self.emit(
            "producer", f"split a batch of {len(batch)} records for {batch.topic}-"
            f"{batch.partition} in two", cause="MESSAGE_TOO_LARGE")
        for half in reversed(halves):   # re-queued at the front: the first half first
            self.acc.adopt(half)
            self.acc.reenqueue(half)

    def _retry(self, batch: ProducerBatch, exc: BaseException, action: Action,
               behind_sent: bool = False) -> None:
        now = time.monotonic()
        if now - batch.created > self.delivery_timeout and \
                isinstance(exc, ConnectionClosed | TimeoutError | OSError):
            # no broker took it in time: as Java's producer, which expires such a batch in
            # its accumulator, a DeliveryTimeout (its TimeoutException) naming the failure
            self._fail(batch, DeliveryTimeout(
                f"{batch.topic}-{batch.partition}: {len(batch)} records not delivered within "
                f"delivery.timeout.ms (last: {exc})"))
            return
        if now - batch.created > self.delivery_timeout or batch.attempts > self.retries:
            self._fail(batch, exc)
            return
        self.idem.done(batch, False)
        if action == Action.REFRESH_METADATA:
            delay = 0.0 if batch.attempts <= 1 else self.backoff
        else:
            delay = min(self.backoff * (2 ** (batch.attempts - 1)), self.backoff_max)
        batch.retry_at = now + delay
        self.acc.reenqueue(batch, behind_sent)

    async def close(self, timeout: float | None) -> None:
        self._running = False
        self.wakeup()
        await cancel_and_wait(self.loop_task)
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=timeout)
        for task in list(self.tasks):
            task.cancel()
        for batch in self.acc.pending_batches():
            batch.closed = True
            self._fail(batch, errors.KafkaError("producer closed"))
        self.acc.queues.clear()
