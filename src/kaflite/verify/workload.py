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

import itertools
import random
from collections import defaultdict
from collections.abc import Callable
from typing import TypeVar

from kaflite.verify._churn import (
    Episodes,
    Subscriptions,
    crash,
    subscribe,
)
from kaflite.verify._producers import Acks, TxnProducer, producer_process, txn_producer_process
from kaflite.verify._shared import TP, Shared, record_events
from kaflite.verify.clients import (
    ConsumerClient,
    Context,
)
from kaflite.verify.history import (
    Assign,
    Commit,
    Fault,
    Poll,
    Subscribe,
)

__all__ = ["Shared", "consumer_process", "producer_process", "transformer_process",
           "txn_producer_process"]

M = TypeVar("M")          # a member's client (consumer or share consumer)


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
            if shared.readers_stop.is_set():
                consumer.close()
                record_events(shared, process, consumer)    # its leave among them
                break
            if ending == "crash":
                record_events(shared, process, consumer)
                crash(shared, ctx, consumer, process, client, group, recorder)
                recorder = _Recorder(shared, process, group)
                continue
            try:    # a leave during a fault may fail; the member still joins again
                consumer.close()
            except Exception as exc:
                shared.note(process, f"leave: {exc!r}")
            record_events(shared, process, consumer)        # how its leave went
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

def transformer_process(shared: Shared, process: str, source: str, sink: str,
                        group: str) -> None:
    ctx = shared.factory.context()
    txns = TxnProducer(shared, ctx, process, process)
    acks = Acks(shared, process, sink)
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
