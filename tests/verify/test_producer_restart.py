"""A producer that fails for good is replaced, and the round goes on producing.

The 30-minute confluent-kafka soak of 2026-11-30 (seed 597617956) lost both producers
at 208 s to librdkafka's fatal OUT_OF_ORDER_SEQUENCE_NUMBER; the producer process
ended there, and the remaining 27 minutes of the round had no write to check."""

from __future__ import annotations

import threading
import time

from kaflite.verify.clients._base import (
    AckFn,
    ClientFactory,
    ConsumerClient,
    Context,
    ProducerClient,
)
from kaflite.verify.history import History, Note, Send
from kaflite.verify.workload import Shared, producer_process


class _Producer(ProducerClient):
    def __init__(self, generation: int, fail_after: int | None) -> None:
        self.generation, self.fail_after, self.sent = generation, fail_after, 0
        self.closed = False

    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        self.sent += 1
        on_ack(0, value, None)

    def tick(self, seconds: float) -> None:
        # as librdkafka's poll raises a fatal error: the instance is done for
        if self.fail_after is not None and self.sent >= self.fail_after:
            raise RuntimeError("fatal: sequence desynchronization")
        time.sleep(seconds)

    def flush(self, timeout: float) -> None:
        return None

    def close(self) -> None:
        self.closed = True


class _Factory(ClientFactory):
    name = "fake"

    def __init__(self) -> None:
        self.made: list[_Producer] = []

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        p = _Producer(len(self.made), fail_after=5 if not self.made else None)
        self.made.append(p)
        return p

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str = "read_uncommitted") -> ConsumerClient:
        raise NotImplementedError


def test_a_failed_producer_is_replaced_and_writes_go_on() -> None:
    factory = _Factory()
    shared = Shared(History(), factory, "127.0.0.1:1", seed=1)
    thread = threading.Thread(target=producer_process,
                              args=(shared, "producer-0", "queue", 500.0))
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(factory.made) < 2 or factory.made[1].sent < 50):
        time.sleep(0.01)
    shared.writers_stop.set()
    thread.join(30)
    assert not thread.is_alive()
    assert len(factory.made) == 2 and factory.made[0].closed and factory.made[1].closed
    acked = [op for op in shared.history.ops if isinstance(op, Send) and op.type == "ok"]
    assert len(acked) >= 5 + 50
    notes = [op.text for op in shared.history.ops if isinstance(op, Note)]
    assert any(n.startswith("producer failed: RuntimeError('fatal") for n in notes), notes
