"""The workload processes: producers, consumers and transformers, each on its own thread.

Theory of operation
-------------------
Every process records what it invoked and what it observed, and nothing else:

* a **producer** (queue) sends unique integers (acks=all, idempotence on) at a
  steady rate and records each ``invoke`` and its ack (``ok`` with partition and
  offset) or error (``info``: an idempotent send that failed may still be
  written). What is still unacknowledged after the final flush is ``info``.
* a **consumer** polls its group's partitions, records each poll per partition
  and each assignment change its library reports, and commits the next offset of
  what it polled, recording each commit (under churn about half of them
  asynchronously, where the library can; ``_churn`` has the member faults).
* a **txn producer** sends 1-5 values per transaction, then commits (4 in 5) or
  aborts, and records the outcome; on a fatal error a new producer takes over
  its transactional id (which fences the old one and ends its transaction).
* a **transformer** (consume-transform-produce) polls the input with
  read_committed, sends each value to the output and the positions with
  ``send_offsets_to_transaction`` in one transaction, and commits. After an
  abort it seeks back to where the batch began (recorded as a ``seek``); after
  a fatal error it starts over with a new producer and a new consumer, which
  resume from the group's committed offsets.

``Shared`` carries the stop signals and each group's progress (the highest
offset polled, or committed in a transaction), which the runner waits on.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from kaflite.verify._churn import (
    Episodes,
    Subscriptions,
    crash,
    subscribe,
)
from kaflite.verify.clients import (
    ClientFactory,
    ConsumerClient,
    Context,
    ProducerClient,
    ShareConsumerClient,
    TxnFailure,
)
from kaflite.verify.history import (
    Assign,
    Commit,
    Fault,
    History,
    Note,
    Poll,
    Send,
    Subscribe,
    Txn,
)

if TYPE_CHECKING:
    from kaflite.verify.nemesis import Nemesis

__all__ = ["Shared", "consumer_process", "producer_process", "transformer_process",
           "txn_producer_process"]

TP = tuple[str, int]
MAX_NOTES = 20          # client errors noted per process (the rest are counted)
TICK = 0.02             # seconds between a producer's bursts
RESTART_PAUSE_S = 0.5   # before a failed producer is replaced
M = TypeVar("M")          # a member's client (consumer or share consumer)


class Shared:
    def __init__(self, history: History, factory: ClientFactory, servers: str,
                 seed: int) -> None:
        self.history = history
        self.factory = factory
        self.servers = servers
        self.seed = seed
        self.writers_stop = threading.Event()
        self.transformers_stop = threading.Event()
        self.readers_stop = threading.Event()
        self.values: Iterator[int] = itertools.count()
        self.progress: dict[tuple[str, str, int], int] = defaultdict(lambda: -1)
        self._lock = threading.Lock()
        self.notes: dict[str, int] = defaultdict(int)
        self.nemesis: Nemesis | None = None   # the running one, stopped on any way out
        self.churn = False                      # consumers leave and rejoin (RunConfig)
        # under churn, the topic members add to their subscription and drop again
        self.idle_topic: str | None = None
        self._commit_rngs: dict[str, random.Random] = {}
        # threads tearing down crashed members' clients (_churn): joined at the run's end
        self.abandoned: list[threading.Thread] = []
        # share groups (_share_member): records the members know finished; the limit
        self.share_done: set[tuple[str, int, int]] = set()
        self.share_delivery_limit = 0

    def commits_async(self, process: str) -> bool:
        """Under churn, where the library has them, about half of a member's commits are
        asynchronous (seeded per member)."""
        if not (self.churn and self.factory.async_commits):
            return False
        with self._lock:
            rng = self._commit_rngs.setdefault(
                process, random.Random(f"{self.seed}-{process}-commits"))
            return rng.random() < 0.5

    def advance(self, group: str, tp: TP, offset: int) -> None:
        with self._lock:
            key = (group, tp[0], tp[1])
            if offset > self.progress[key]:
                self.progress[key] = offset

    def note(self, process: str, text: str) -> None:
        self.notes[process] += 1
        if self.notes[process] <= MAX_NOTES:
            self.history.add(Note(time=self.history.now(), process=process, text=text))


class _Acks:
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


class _Recorder:
    """The rebalance listener of one consumer: assignment changes into the history."""

    def __init__(self, shared: Shared, process: str, group: str | None) -> None:
        self.shared, self.process, self.group = shared, process, group
        self.muted = False      # a crashed member's library speaks for nobody
        self.client: str | None = None   # the client.id of the consumer it listens to
        self.topics: list[str] = []      # its consumer's subscription

    def subscribed(self, topics: list[str]) -> None:
        self.topics = list(topics)
        if self.group is not None and not self.muted:
            h = self.shared.history
            h.add(Subscribe(time=h.now(), process=self.process, group=self.group,
                            topics=tuple(topics), client=self.client))

    def changed(self, type_: str, tps: list[TP]) -> None:
        if self.muted:
            return
        h = self.shared.history
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, part in tps:
            by_topic[topic].append(part)
        for topic, parts in sorted(by_topic.items()):
            h.add(Assign(time=h.now(), process=self.process, type=type_, group=self.group,
                         topic=topic, partitions=tuple(sorted(parts)), client=self.client))

    def assigned(self, tps: list[TP]) -> None:
        self.changed("assign", tps)

    def revoked(self, tps: list[TP], lost: bool) -> None:
        self.changed("lost" if lost else "revoke", tps)

    def closed(self) -> None:
        """Its consumer closed: it holds nothing of the topics it was subscribed to."""
        if self.muted:
            return
        h = self.shared.history
        for topic in self.topics:
            h.add(Assign(time=h.now(), process=self.process, type="close", group=self.group,
                         topic=topic, partitions=(), client=self.client))


def _record_events(shared: Shared, process: str,
                   client: ProducerClient | ConsumerClient | ShareConsumerClient,
                   limit: int = 2000) -> None:
    """The client's own events (kaflite's ``events()``) as notes, on the run's clock."""
    try:
        events = client.events()[-limit:]
    except Exception as exc:
        shared.note(process, f"events: {exc!r}")
        return
    h = shared.history
    offset = h.now() - time.time()      # wall clock -> seconds since the run started
    for ts, text in events:
        h.add(Note(time=ts + offset, process=process, text=f"event: {text}"))


def _record_polls(shared: Shared, process: str, group: str | None, isolation: str,
                  records: list[tuple[str, int, int, int]]) -> dict[TP, tuple[int, int]]:
    """Add one ``Poll`` per partition; return each partition's (first, last) offset."""
    h = shared.history
    by_tp: dict[TP, list[tuple[int, int]]] = defaultdict(list)
    for topic, part, offset, value in records:
        by_tp[(topic, part)].append((offset, value))
    now = h.now()
    for (topic, part), recs in sorted(by_tp.items()):
        h.add(Poll(time=now, process=process, group=group, topic=topic, partition=part,
                   records=tuple(recs), isolation=isolation))
    return {tp: (recs[0][0], recs[-1][0]) for tp, recs in by_tp.items()}


def _commit(shared: Shared, consumer: ConsumerClient, process: str, group: str,
            offsets: dict[TP, int]) -> bool:
    h = shared.history
    invoked = h.now()
    try:
        consumer.commit(offsets)
        error = None
    except Exception as exc:
        error = repr(exc)
    _record_commit(shared, process, group, offsets, invoked, error)
    return error is None


def _commit_async(shared: Shared, consumer: ConsumerClient, process: str, group: str,
                  offsets: dict[TP, int]) -> None:
    """The outcome is recorded when the library reports it (in a later poll, as a rule),
    and placed at ``invoked``: when the member acted."""
    invoked = shared.history.now()

    def done(reported: dict[TP, int], error: str | None) -> None:
        _record_commit(shared, process, group, reported, invoked, error, asynchronous=True)

    try:
        consumer.commit_async(offsets, done)
    except Exception as exc:
        done(offsets, repr(exc))


def _record_commit(shared: Shared, process: str, group: str, offsets: dict[TP, int],
                   invoked: float, error: str | None, asynchronous: bool = False) -> None:
    h = shared.history
    done = h.now()
    for (topic, part), offset in sorted(offsets.items()):
        h.add(Commit(time=done, process=process, type="fail" if error else "ok", group=group,
                     topic=topic, partition=part, offset=offset, invoked=invoked, error=error,
                     asynchronous=asynchronous))


# -- queue ------------------------------------------------------------------------------------

def producer_process(shared: Shared, process: str, topic: str, rate: float,
                     keyed: bool = False) -> None:
    """Send ``rate`` values a second until the writers stop. A producer that fails for
    good (librdkafka's fatal idempotence errors) is replaced by a new one, as an
    application would: its unacknowledged values stay indeterminate, and the round
    goes on producing (a producer that died at 208 s of a 30-minute soak once left the
    rest of the round without a write)."""
    ctx = shared.factory.context()
    acks = _Acks(shared, process, topic)
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
             producer: ProducerClient, acks: _Acks) -> None:
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
        _record_events(shared, process, producer)
        producer.close()


def _new_consumer(shared: Shared, ctx: Context, process: str, client: str, group: str,
                  isolation: str, recorder: _Recorder) -> ConsumerClient | None:
    """A consumer for ``process``. Under churn it tries until it gets one (a rejoin may
    come while the nemesis has the whole cluster down, and kaflite's start() then
    fails); without churn a failure ends the process, as it always did."""
    recorder.client = client
    return new_member_client(shared, ctx, process, lambda: shared.factory.consumer(
        ctx, shared.servers, client, group, isolation, recorder))


def new_member_client(shared: Shared, ctx: Context, process: str,
                      make: Callable[[], M]) -> M | None:
    """``make()``; under churn, again every half second until it succeeds or the
    readers stop (None then); without churn its failure is raised."""
    while True:
        try:
            return make()
        except Exception as exc:
            if not shared.churn:
                raise
            if shared.readers_stop.is_set():
                return None
            shared.note(process, f"rejoin: {exc!r}")
            ctx.sleep(0.5)


def _poll_once(shared: Shared, consumer: ConsumerClient, ctx: Context, process: str,
               group: str, isolation: str) -> None:
    try:
        records = consumer.poll(0.3)
    except Exception as exc:
        shared.note(process, f"poll: {exc!r}")
        ctx.sleep(0.1)
        return
    ranges = _record_polls(shared, process, group, isolation, records)
    for tp, (_, last) in ranges.items():
        shared.advance(group, tp, last)
    if ranges:
        commit = _commit_async if shared.commits_async(process) else _commit
        commit(shared, consumer, process, group,
               {tp: last + 1 for tp, (_, last) in ranges.items()})


def consumer_process(shared: Shared, process: str, topic: str, group: str,
                     isolation: str = "read_uncommitted") -> None:
    """Poll, record and commit until the readers stop. Under churn (``RunConfig.churn``),
    while the writers run, the member meets one of ``MEMBER_FAULTS`` at seeded moments."""
    ctx = shared.factory.context()
    rng = random.Random(f"{shared.seed}-{process}")
    subscriptions = Subscriptions(shared, process, topic)
    recorder = _Recorder(shared, process, group)
    try:
        for n in itertools.count():
            # each consumer its own client.id, to tell the coordinator's removals apart
            client = f"{process}.{n}"
            consumer = _new_consumer(shared, ctx, process, client, group, isolation, recorder)
            if consumer is None:
                break
            subscribe(consumer, recorder, subscriptions.start())
            episodes = Episodes(shared, process, client, group, rng)
            ending = None
            while not shared.readers_stop.is_set() and ending is None:
                ending = episodes.step()
                if episodes.stalled:
                    ctx.sleep(0.2)
                elif ending is None:
                    subscriptions.step(consumer, recorder)   # cut off or not, it may
                    _poll_once(shared, consumer, ctx, process, group, isolation)
            episodes.end()
            _record_events(shared, process, consumer)
            if shared.readers_stop.is_set():
                consumer.close()
                break
            if ending == "crash":
                crash(shared, ctx, consumer, process, client, group, recorder)
                recorder = _Recorder(shared, process, group)
                continue
            try:    # a leave during a fault may fail; the member still joins again
                consumer.close()
            except Exception as exc:
                shared.note(process, f"leave: {exc!r}")
            h = shared.history
            recorder.closed()
            h.add(Fault(time=h.now(), process=process, fault="churn",
                        args={"member": process, "group": group}, start=h.now(),
                        end=h.now()))
            ctx.sleep(rng.uniform(0.1, 1.0))
    except Exception as exc:
        shared.note(process, f"consumer failed: {exc!r}")
    finally:
        recorder.closed()
        ctx.close()


# -- transactions -----------------------------------------------------------------------------

class _TxnProducer:
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
    txns = _TxnProducer(shared, ctx, process, process)
    acks = _Acks(shared, process, topic)
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


def transformer_process(shared: Shared, process: str, source: str, sink: str,
                        group: str) -> None:
    ctx = shared.factory.context()
    txns = _TxnProducer(shared, ctx, process, process)
    acks = _Acks(shared, process, sink)
    recorder = _Recorder(shared, process, group)
    consumer: ConsumerClient | None = None
    try:
        for n in itertools.count():
            if shared.transformers_stop.is_set():
                break
            if consumer is None:
                recorder.client = f"{process}.c{n}"
                consumer = shared.factory.consumer(ctx, shared.servers, recorder.client,
                                                   group, "read_committed", recorder)
                subscribe(consumer, recorder, [source])
            try:
                records = consumer.poll(0.3)
            except Exception as exc:
                shared.note(process, f"poll: {exc!r}")
                continue
            ranges = _record_polls(shared, process, group, "read_committed", records)
            if not ranges:
                continue
            txn = f"{process}-{n}"
            nexts = {tp: last + 1 for tp, (_, last) in ranges.items()}
            offsets = tuple((t, p, o) for (t, p), o in sorted(nexts.items()))
            tvs = tuple((sink, v) for _, _, _, v in records)
            try:
                p = txns.get()
                p.begin()
                for _, _, _, v in records:
                    p.send(sink, v, acks.invoke(v, txn))
                p.send_offsets(nexts, consumer)
            except Exception as exc:
                shared.note(process, f"{txn}: {exc!r}")
                outcome = "abort"       # nothing was sent if there is no producer
                if txns.producer is not None:
                    outcome = txns.abort(txn, tvs, offsets, group, repr(exc))
            else:
                outcome = txns.finish("commit", txn, tvs, offsets, group)
            if outcome == "ok":
                for tp, o in nexts.items():
                    shared.advance(group, tp, o - 1)
            elif outcome == "abort":
                for tp, (first, _) in ranges.items():
                    try:
                        consumer.seek(tp, first)
                    except Exception as exc:   # no longer ours: its new owner resumes
                        shared.note(process, f"seek {tp}: {exc!r}")
                        continue
                    recorder.changed("seek", [tp])
            else:   # unknown outcome: start over from the group's committed offsets
                recorder.closed()
                _close_quietly(shared, process, consumer)
                consumer = None
                txns.discard()
    except Exception as exc:
        shared.note(process, f"transformer failed: {exc!r}")
    finally:
        acks.unacknowledged("no acknowledgement when the transformer stopped")
        if consumer is not None:
            _close_quietly(shared, process, consumer)
        recorder.closed()
        txns.discard()
        ctx.close()


def _close_quietly(shared: Shared, process: str, consumer: ConsumerClient) -> None:
    try:
        consumer.close()
    except Exception as exc:
        shared.note(process, f"close: {exc!r}")
