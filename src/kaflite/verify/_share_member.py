"""Share-group members (KIP-932): the queue workload's ``share`` group protocol.

Theory of operation
-------------------
Each member is one thread with one share consumer at a time, in explicit
acknowledgement mode. It polls, records each partition's deliveries (``Poll``
with each record's delivery count, and when their acquisition locks end at the
earliest, as its library knows it), acknowledges every record it was handed,
and sends the acknowledgements (``commit``: synchronously, or under churn about
half of the time asynchronously). Each record is mostly ACCEPTed; a few are
RELEASEd (delivered again) or REJECTed (archived), and a record whose value is a
multiple of ``POISON`` is always released: it must be delivered
``share.delivery.count.limit`` times and then archived.

Every acknowledgement is recorded when it is sent and again when the leader's
answer comes (``Ack``: ``ok``, or ``fail`` with the error); one still unanswered
when its consumer closes or crashes is ``info``, its outcome unknown. Once a
consumer closed, the records its library was delivered and never handed out are
recorded too (``Unseen``: given back with a partition taken away or at close, or
expired in its buffer), as its events name them: the group counted those
deliveries, toward the limit as well.

Under churn the member meets the faults of ``_churn.MEMBER_FAULTS`` as the other
protocols' members do, with one difference: a fault that falls due right after a
poll meets the member holding the records it was just given, unacknowledged. A
stall then outlasts their acquisition locks (the group's
``share.record.lock.duration.ms`` is shorter than ``STALL_S``): the group must
deliver them to another member, and the stalled member's late acknowledgements
must fail. A cut or a crash drops the member's connections, and the brokers
release what it held; a leave closes the consumer, which does the same.

The members mark in ``Shared.share_done`` each record that is finished, as far as
they know: accepted or rejected (the leader said so, or refused it although it was
sent while the lock held: it may have taken it before, ``_share``), or delivered
``share.delivery.count.limit`` times. The runner waits for every record of the
log to be finished before it stops them.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING

from kaflite.verify._churn import Episodes, crash
from kaflite.verify._shared import record_events
from kaflite.verify.clients import Context, ShareConsumerClient
from kaflite.verify.clients._base import TP, Delivery
from kaflite.verify.history import Ack, Fault, Poll, Unseen
from kaflite.verify.workload import _Recorder, new_member_client

if TYPE_CHECKING:
    from kaflite.verify._shared import Shared

__all__ = ["POISON", "REJECT_P", "RELEASE_P", "share_consumer_process"]

POISON = 97             # a multiple of it is released at every delivery: archived at the limit
RELEASE_P = 0.03        # the odds that a member gives a record back
REJECT_P = 0.01         # ... or rejects it


class _ShareAcks:
    """The acknowledgements one consumer sent and not yet heard back about."""

    def __init__(self, shared: Shared, process: str, group: str, client: str) -> None:
        self.shared, self.process, self.group, self.client = shared, process, group, client
        # (topic, partition, offset) -> type, when sent, the lock's earliest end
        self.pending: dict[tuple[str, int, int], tuple[str, float, float | None]] = {}
        self.lock = threading.Lock()
        self.muted = False      # a crashed member hears nothing more

    def sent(self, chosen: dict[TP, dict[int, tuple[str, float | None]]],
             invoked: float) -> None:
        with self.lock:
            for (topic, part), offsets in chosen.items():
                for offset, (kind, lock_until) in offsets.items():
                    self.pending[(topic, part, offset)] = (kind, invoked, lock_until)

    def result(self, tp: TP, offsets: set[int], error: str | None) -> None:
        """A leader answered for ``offsets`` of ``tp`` (the library's callback)."""
        h = self.shared.history
        with self.lock:
            if self.muted:
                return
            answered: dict[tuple[str, float], list[int]] = defaultdict(list)
            maybe: list[int] = []       # refused, but perhaps taken before (_share)
            for offset in offsets:
                sent = self.pending.pop((tp[0], tp[1], offset), None)
                if sent is None:        # a gap, or a buffered record given back
                    continue
                kind, invoked, lock_until = sent
                answered[(kind, invoked)].append(offset)
                if kind in ("accept", "reject") and (error is None or (
                        lock_until is not None and invoked < lock_until)):
                    maybe.append(offset)
        for (kind, invoked), offs in sorted(answered.items()):
            h.add(Ack(time=h.now(), process=self.process, type=kind,
                      outcome="fail" if error else "ok", group=self.group, topic=tp[0],
                      partition=tp[1], offsets=tuple(sorted(offs)), invoked=invoked,
                      client=self.client, error=error))
        self.shared.share_done.update((tp[0], tp[1], o) for o in maybe)

    def unknown(self, why: str, mute: bool = False) -> None:
        """What is still unanswered has an unknown outcome from now on."""
        with self.lock:
            left, self.pending = self.pending, {}
            self.muted = self.muted or mute
        by: dict[tuple[str, int, str, float], list[int]] = defaultdict(list)
        for (topic, part, offset), (kind, invoked, _) in left.items():
            by[(topic, part, kind, invoked)].append(offset)
        h = self.shared.history
        for (topic, part, kind, invoked), offs in sorted(by.items()):
            h.add(Ack(time=h.now(), process=self.process, type=kind, outcome="info",
                      group=self.group, topic=topic, partition=part,
                      offsets=tuple(sorted(offs)), invoked=invoked, client=self.client,
                      error=why))


def _new_share_consumer(shared: Shared, ctx: Context, process: str, client: str, group: str,
                        acks: _ShareAcks) -> ShareConsumerClient | None:
    """As ``workload._new_consumer``: under churn it tries until it gets one."""
    return new_member_client(shared, ctx, process, lambda: shared.factory.share_consumer(
        ctx, shared.servers, client, group, acks.result))


def _poll(shared: Shared, consumer: ShareConsumerClient, ctx: Context, process: str,
          group: str, client: str) -> list[Delivery]:
    try:
        got = consumer.poll(0.3)
    except Exception as exc:
        shared.note(process, f"poll: {exc!r}")
        ctx.sleep(0.1)
        return []
    h = shared.history
    by_tp: dict[TP, list[Delivery]] = defaultdict(list)
    for d in got:
        by_tp[(d[0], d[1])].append(d)
    now = h.now()
    limit = shared.share_delivery_limit
    for (topic, part), ds in sorted(by_tp.items()):
        locks = [d[5] for d in ds if d[5] is not None]
        h.add(Poll(time=now, process=process, group=group, topic=topic, partition=part,
                   records=tuple((d[2], d[3]) for d in ds),
                   deliveries=tuple(d[4] for d in ds),
                   lock_until=min(locks) - h.t0 if len(locks) == len(ds) else None,
                   client=client))
        if limit:
            shared.share_done.update((topic, part, d[2]) for d in ds if d[4] >= limit)
    return got


def _choose(rng: random.Random, value: int) -> str:
    if value % POISON == 0:
        return "release"
    draw = rng.random()
    return "release" if draw < RELEASE_P else "reject" if draw < RELEASE_P + REJECT_P \
        else "accept"


def _acknowledge(shared: Shared, consumer: ShareConsumerClient, acks: _ShareAcks, process: str,
                 held: list[Delivery], rng: random.Random) -> None:
    chosen: dict[TP, dict[int, tuple[str, float | None]]] = defaultdict(dict)
    t0 = shared.history.t0
    try:
        for topic, part, offset, value, _, lock_until in held:
            kind = _choose(rng, value)
            consumer.acknowledge((topic, part), offset, kind)
            chosen[(topic, part)][offset] = (kind, None if lock_until is None
                                             else lock_until - t0)
    except Exception as exc:
        shared.note(process, f"acknowledge: {exc!r}")
    acks.sent(chosen, shared.history.now())
    try:
        consumer.commit(shared.commits_async(process))
    except Exception as exc:
        shared.note(process, f"commit: {exc!r}")


def _record_unseen(shared: Shared, process: str, group: str, client: str,
                   consumer: ShareConsumerClient) -> None:
    """What the consumer's library was delivered and never handed out, once it closed:
    deliveries the group counted (toward the limit, too) that no Poll shows."""
    h = shared.history
    try:
        unseen = consumer.unseen()
    except Exception as exc:
        shared.note(process, f"unseen: {exc!r}")
        return
    offset = h.now() - time.time()      # wall clock -> the run's clock
    for ts, topic, part, offsets, why in unseen:
        h.add(Unseen(time=ts + offset, process=process, group=group, topic=topic,
                     partition=part, offsets=offsets, client=client, why=why))


def _hold(shared: Shared, episodes: Episodes, ctx: Context) -> str | None:
    """A member fault due now meets the member holding what it was just given: a stall
    holds it (for STALL_S at most) past its acquisition locks, a leave or crash ends the
    member (returned) before it acknowledged anything."""
    ending = episodes.step()
    while episodes.stalled and not shared.readers_stop.is_set():
        ctx.sleep(0.2)
        episodes.step()
    return ending


def share_consumer_process(shared: Shared, process: str, topic: str, group: str) -> None:
    """Poll, record, acknowledge until the readers stop; under churn, with member faults."""
    ctx = shared.factory.context()
    rng = random.Random(f"{shared.seed}-{process}")
    choices = random.Random(f"{shared.seed}-{process}-acks")
    recorder = _Recorder(shared, process, group)
    h = shared.history
    try:
        for n in itertools.count():
            client = f"{process}.{n}"
            acks = _ShareAcks(shared, process, group, client)
            recorder.client = client
            consumer = _new_share_consumer(shared, ctx, process, client, group, acks)
            if consumer is None:
                break
            consumer.subscribe([topic])
            recorder.subscribed([topic])
            episodes = Episodes(shared, process, client, group, rng)
            ending = None
            while not shared.readers_stop.is_set() and ending is None:
                if episodes.ongoing:        # a cut: the member carries on, cut off
                    episodes.step()
                held = _poll(shared, consumer, ctx, process, group, client)
                # a fault that fell due meets the member now, with what it was just given
                ending = _hold(shared, episodes, ctx)
                if ending is None and held:
                    _acknowledge(shared, consumer, acks, process, held, choices)
            episodes.end()
            record_events(shared, process, consumer)
            if ending == "crash":
                acks.unknown("the member crashed", mute=True)
                crash(shared, ctx, consumer, process, client, group, recorder)
                _record_unseen(shared, process, group, client, consumer)
                recorder = _Recorder(shared, process, group)
                continue
            recorder.closed()   # from now on the brokers may release what it holds
            try:
                consumer.close()
            except Exception as exc:
                shared.note(process, f"close: {exc!r}")
            acks.unknown("no answer before the consumer closed")
            _record_unseen(shared, process, group, client, consumer)
            if shared.readers_stop.is_set():
                break
            h.add(Fault(time=h.now(), process=process, fault="churn",
                        args={"member": process, "group": group}, start=h.now(),
                        end=h.now()))
            ctx.sleep(rng.uniform(0.1, 1.0))
    except Exception as exc:
        shared.note(process, f"share consumer failed: {exc!r}")
    finally:
        recorder.closed()
        ctx.close()
