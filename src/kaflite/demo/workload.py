"""The demo's traffic: a keyed clickstream producer and a group of consumers.

Every record carries a sequence number, so at the end we know exactly which
acknowledged records each consumer saw: produced, consumed, lost and
duplicated are counted, not estimated.

The clients start first (``start``) and the records flow from ``start_producing``
on, at ``rate`` per second by the clock (``records_due``): a send loop that falls
behind (a busy machine, a full buffer while a leader moves) catches up, by at
most a second's worth at once.

A record can reach a consumer before its acknowledgment reaches the producer:
it is readable once every in-sync replica has it, and the leader's answer to the
producer travels at the same moment as its answer to a waiting fetch. So the
live counts (``progress``) say how many acknowledged records were consumed, and
apart from them how many were read before their acknowledgment arrived.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from dataclasses import dataclass, field

from kaflite.client import Consumer, Producer, RecordMetadata
from kaflite.pipelines.events import ClickEvent, click_event, encode

__all__ = ["DemoEvent", "Progress", "Workload", "records_due"]


class DemoEvent(ClickEvent):
    """A clickstream event with the demo's sequence number (to count losses)."""

    seq: int



def records_due(rate: float, elapsed: float, sent: int) -> int:
    """How many records to send now, ``elapsed`` seconds into producing at ``rate``/s
    with ``sent`` sent: what the clock asks for, at most one second's worth."""
    return max(0, min(int(rate * elapsed) - sent, max(1, int(rate))))


@dataclass(frozen=True)
class Progress:
    """The producer's and the consumers' counts, taken at one moment."""

    acked: int          # records the producer has an acknowledgment for
    consumed: int       # of those, the ones a consumer has read
    ahead: int          # records read whose acknowledgment had not reached the producer


@dataclass
class ConsumerState:
    name: str
    client: Consumer
    task: asyncio.Task[None] | None = None
    seen: set[int] = field(default_factory=set)
    records: int = 0
    last_error: str | None = None


class Workload:
    def __init__(self, bootstrap: str, topic: str, group: str, rate: int = 500,
                 group_protocol: str = "classic") -> None:
        self.bootstrap = bootstrap
        self.group_protocol = group_protocol
        self.topic = topic
        self.group = group
        self.rate = rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "client.id": "producer",
                                  "acks": "all", "linger.ms": 10,
                                  "delivery.timeout.ms": 120_000})
        self.consumers: list[ConsumerState] = []
        self.acked: set[int] = set()
        self.failed: list[str] = []
        self.events: list[DemoEvent] = []  # every acknowledged event, for Spark checks
        self._next = 0
        self._rng = random.Random()
        self._stop = asyncio.Event()
        self._producing: asyncio.Task[None] | None = None
        self.producing_since: float | None = None     # monotonic
        self.producing_until: float | None = None

    # -- producer ------------------------------------------------------------------
    async def start(self, consumers: int = 2) -> None:
        """Start the producer and the consumers; no record flows before ``start_producing``."""
        await self.producer.start()
        for _ in range(consumers):
            await self.add_consumer()

    def start_producing(self) -> None:
        if self._producing is None:
            self.producing_since = time.monotonic()
            self._producing = asyncio.create_task(self._produce())

    @property
    def producing_s(self) -> float:
        """How long records were sent for (so far, while producing)."""
        if self.producing_since is None:
            return 0.0
        return (self.producing_until or time.monotonic()) - self.producing_since

    def _record(self) -> tuple[bytes, bytes, DemoEvent]:
        seq = self._next
        self._next += 1
        event: DemoEvent = {"seq": seq, **click_event(self._rng, int(time.time() * 1000))}
        key, value = encode(event)
        return key, value, event

    async def _produce(self) -> None:
        tick = 0.05
        start = time.monotonic()
        while not self._stop.is_set():
            for _ in range(records_due(self.rate, time.monotonic() - start, self._next)):
                key, value, event = self._record()

                def done(err: BaseException | None, md: RecordMetadata | None,
                         event: DemoEvent = event) -> None:
                    if err is None:
                        self.acked.add(event["seq"])
                        self.events.append(event)
                    else:
                        self.failed.append(f"{event['seq']}: {err!r}")

                while not self._stop.is_set():   # (a record not sent is not acked either)
                    try:
                        self.producer.produce(self.topic, value, key=key, on_delivery=done)
                        break
                    except Exception:  # the buffer is full while a leader moves: wait
                        await asyncio.sleep(0.05)
            await asyncio.sleep(tick)

    async def stop_producing(self) -> None:
        self._stop.set()
        if self._producing is not None:
            await self._producing
            self.producing_until = time.monotonic()
        await self.producer.flush(120)

    # -- consumers -----------------------------------------------------------------
    async def add_consumer(self) -> ConsumerState:
        name = f"consumer-{len(self.consumers) + 1}"
        config: dict[str, object] = {
            "bootstrap.servers": self.bootstrap, "client.id": name, "group.id": self.group,
            "group.protocol": self.group_protocol, "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 2000}
        if self.group_protocol == "classic":
            # KIP-848 members take both from the coordinator (the cluster's settings)
            config.update({"heartbeat.interval.ms": 1000, "session.timeout.ms": 10000})
        client = Consumer(config)
        await client.start()
        client.subscribe([self.topic])
        state = ConsumerState(name, client)
        state.task = asyncio.create_task(self._consume(state))
        self.consumers.append(state)
        return state

    async def _consume(self, state: ConsumerState) -> None:
        while True:
            try:
                batch = await state.client.getmany(timeout_ms=500, max_records=2000)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # surfaced in the view; the loop goes on
                state.last_error = repr(exc)
                await asyncio.sleep(0.2)
                continue
            for records in batch.values():
                for rec in records:
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        state.seen.add(json.loads(rec.value or b"")["seq"])
                    state.records += 1

    def consumed(self) -> set[int]:
        out: set[int] = set()
        for c in self.consumers:
            out |= c.seen
        return out

    def progress(self) -> Progress:
        """The counts at this moment. Call it on the workload's event loop: the delivery
        callbacks and the consumers change them there, so nothing moves while it counts."""
        consumed = self.consumed()
        read = len(consumed & self.acked)
        return Progress(len(self.acked), read, len(consumed) - read)

    def lag(self) -> dict[int, int]:
        """Per-partition lag summed over the consumers that own each partition."""
        lags: dict[int, int] = {}
        for c in self.consumers:
            for tp in c.client.assignment():
                value = c.client.lag(tp)
                if value is not None:
                    lags[tp.partition] = value
        return lags

    async def drain(self, timeout: float = 60) -> None:
        """Wait until the consumers have seen every acknowledged record (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.acked <= self.consumed():
            await asyncio.sleep(0.25)

    async def close(self) -> None:
        for c in self.consumers:
            if c.task is not None:
                c.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await c.task
            with contextlib.suppress(Exception):
                await c.client.close()
        with contextlib.suppress(Exception):
            await self.producer.close()
