"""The writing processes of a verify run: the queue's producers and the transactional
producers (see ``kaflite.verify.workload`` for what each records). ``Acks`` and
``TxnProducer`` also serve the transformers."""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from kaflite.verify._shared import Shared, record_events
from kaflite.verify.clients import ProducerClient, TxnFailure
from kaflite.verify.history import Send, Txn

__all__ = ["Acks", "TxnProducer", "producer_process", "txn_producer_process"]

TICK = 0.02             # seconds between a producer's bursts
RESTART_PAUSE_S = 0.5   # before a failed producer is replaced


class Acks:
    """Records each value's ack; remembers which values are still unacknowledged."""

    def __init__(self, shared: Shared, process: str, topic: str) -> None:
        self.shared, self.process, self.topic = shared, process, topic
        self.pending: dict[int, str | None] = {}
        self._lock = threading.Lock()

    def invoke(self, value: int, txn: str | None = None) -> Callable[
            [int | None, int | None, str | None], None]:
        h = self.shared.history
        with self._lock:
            self.pending[value] = txn
        h.add(Send(time=h.now(), process=self.process, type="invoke", topic=self.topic,
                   value=value, txn=txn))

        def ack(partition: int | None, offset: int | None, error: str | None) -> None:
            with self._lock:
                self.pending.pop(value, None)
            h.add(Send(time=h.now(), process=self.process, type="info" if error else "ok",
                       topic=self.topic, value=value, partition=partition, offset=offset,
                       error=error, txn=txn))
        return ack

    def failed(self, value: int, error: str, definite: bool = True) -> None:
        h = self.shared.history
        with self._lock:
            txn = self.pending.pop(value, None)
        h.add(Send(time=h.now(), process=self.process, type="fail" if definite else "info",
                   topic=self.topic, value=value, error=error, txn=txn))

    def unacknowledged(self, why: str) -> None:
        with self._lock:
            left = list(self.pending)
        for value in left:
            self.failed(value, why, definite=False)


def producer_process(shared: Shared, process: str, topic: str, rate: float,
                     keyed: bool = False) -> None:
    """Send ``rate`` values a second until the writers stop. A producer that fails for
    good (librdkafka's fatal idempotence errors) is replaced by a new one, as an
    application would: its unacknowledged values stay indeterminate, and the round
    goes on producing (a producer that died at 208 s of a 30-minute soak once left the
    rest of the round without a write)."""
    ctx = shared.factory.context()
    acks = Acks(shared, process, topic)
    try:
        while not shared.writers_stop.is_set():
            producer = None
            try:
                producer = shared.factory.producer(ctx, shared.servers, process)
                _produce(shared, process, topic, rate, keyed, producer, acks)
                return
            except Exception as exc:
                shared.note(process, f"producer failed: {exc!r}")
                if producer is not None:
                    with contextlib.suppress(Exception):
                        producer.close()
                acks.unacknowledged(f"producer failed: {exc!r}")
                shared.writers_stop.wait(RESTART_PAUSE_S)
    finally:
        ctx.close()


def _produce(shared: Shared, process: str, topic: str, rate: float, keyed: bool,
             producer: ProducerClient, acks: Acks) -> None:
    burst = max(1, round(rate * TICK))
    due = time.monotonic()
    while not shared.writers_stop.is_set():
        due += TICK
        for _ in range(burst):
            value = next(shared.values)
            on_ack = acks.invoke(value)
            try:
                producer.send(topic, value, on_ack, keyed)
            except Exception as exc:   # refused before it was queued
                acks.failed(value, repr(exc))
                shared.note(process, f"send: {exc!r}")
        # Paced by the clock: a client's tick may return early (librdkafka's poll
        # returns once it served a delivery report).
        for _ in range(100):
            left = due - time.monotonic()
            if left <= 0:
                break
            producer.tick(left)
        due = max(due, time.monotonic() - 1)   # no catching up after a long stall
    try:
        producer.flush(30)
    finally:
        acks.unacknowledged("no acknowledgement after the final flush")
        record_events(shared, process, producer)
        producer.close()


class TxnProducer:
    """A transactional producer that a successor replaces after a fatal error."""

    def __init__(self, shared: Shared, ctx: Any, process: str, txn_id: str) -> None:
        self.shared, self.ctx, self.process, self.txn_id = shared, ctx, process, txn_id
        self.producer: ProducerClient | None = None
        self.generation = 0

    def get(self) -> ProducerClient:
        if self.producer is None:
            self.generation += 1
            p = self.shared.factory.producer(self.ctx, self.shared.servers,
                                             f"{self.process}.{self.generation}", self.txn_id)
            try:
                p.init_transactions()
            except Exception:
                self._close(p)
                raise
            self.producer = p
        return self.producer

    def discard(self) -> None:
        p, self.producer = self.producer, None
        if p is not None:
            self._close(p)

    def _close(self, p: ProducerClient) -> None:
        try:
            p.close()
        except Exception as exc:
            self.shared.note(self.process, f"close: {exc!r}")

    def finish(self, want: str, txn: str, values: tuple[tuple[str, int], ...],
               offsets: tuple[tuple[str, int, int], ...] = (), group: str | None = None
               ) -> str:
        """Commit or abort; record and return the outcome (``ok``, ``abort`` or ``info``)."""
        h = self.shared.history
        p = self.get()

        def record(type_: str, outcome: str, error: str | None = None) -> None:
            h.add(Txn(time=h.now(), process=self.process, txn=txn, type=type_, outcome=outcome,
                      values=values, offsets=offsets, group=group, error=error))

        call = p.commit if want == "commit" else p.abort
        for _ in range(5):
            try:
                call()
                record(want, "ok")
                return "ok" if want == "commit" else "abort"
            except TxnFailure as f:
                if f.kind == "retry":
                    continue
                if f.kind == "abortable":
                    return self.abort(txn, values, offsets, group, str(f))
                record(want, "info", str(f))
                self.discard()
                return "info"
        record(want, "info", "still retriable after 5 attempts")
        self.discard()
        return "info"

    def abort(self, txn: str, values: tuple[tuple[str, int], ...],
              offsets: tuple[tuple[str, int, int], ...], group: str | None, why: str) -> str:
        h = self.shared.history
        try:
            self.get().abort()
            h.add(Txn(time=h.now(), process=self.process, txn=txn, type="abort", outcome="ok",
                      values=values, offsets=offsets, group=group, error=why))
            return "abort"
        except Exception as exc:
            h.add(Txn(time=h.now(), process=self.process, txn=txn, type="abort",
                      outcome="info", values=values, offsets=offsets, group=group,
                      error=f"{why}; abort: {exc!r}"))
            self.discard()
            return "info"


def txn_producer_process(shared: Shared, process: str, topic: str, rate: float) -> None:
    ctx = shared.factory.context()
    rng = random.Random(f"{shared.seed}-{process}")
    txns = TxnProducer(shared, ctx, process, process)
    acks = Acks(shared, process, topic)
    try:
        for n in itertools.count():
            if shared.writers_stop.is_set():
                break
            txn = f"{process}-{n}"
            values = [next(shared.values) for _ in range(rng.randint(1, 5))]
            want = "commit" if rng.random() < 0.8 else "abort"
            tvs = tuple((topic, v) for v in values)
            try:
                p = txns.get()
                p.begin()
                for v in values:
                    p.send(topic, v, acks.invoke(v, txn), keyed=v % 2 == 0)
                if want == "abort":
                    p.flush(10)     # written, so that the abort has data to hide
            except Exception as exc:
                shared.note(process, f"{txn}: {exc!r}")
                if txns.producer is not None:
                    txns.abort(txn, tvs, (), None, repr(exc))
                ctx.sleep(0.2)
                continue
            txns.finish(want, txn, tvs)
            p.tick(len(values) / rate)
        if txns.producer is not None:
            txns.producer.flush(10)
    except Exception as exc:
        shared.note(process, f"txn producer failed: {exc!r}")
    finally:
        acks.unacknowledged("no acknowledgement when the producer stopped")
        txns.discard()
        ctx.close()
