"""kafka-python (blocking, with its own I/O thread) and aiokafka (asyncio)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from kaflite.verify.clients._base import (
    TP,
    AckFn,
    ClientFactory,
    CommitDone,
    ConsumerClient,
    Context,
    Listener,
    LoopContext,
    ProducerClient,
    Record,
    decode,
    encode,
)

__all__ = ["AioKafka", "KafkaPython"]

CONSUMER = {"auto_offset_reset": "earliest", "enable_auto_commit": False,
            "session_timeout_ms": 6_000, "heartbeat_interval_ms": 500}


def _consumer_config(max_poll_interval_ms: int | None) -> dict[str, Any]:
    if max_poll_interval_ms is None:
        return CONSUMER
    return {**CONSUMER, "max_poll_interval_ms": max_poll_interval_ms}


def _tps(parts: Any) -> list[TP]:
    return sorted((tp.topic, tp.partition) for tp in parts)


# -- kafka-python -----------------------------------------------------------------------------

class _KPProducer(ProducerClient):
    def __init__(self, servers: str, client_id: str) -> None:
        from kafka import KafkaProducer

        self.p = KafkaProducer(bootstrap_servers=servers, client_id=client_id, acks="all",
                               enable_idempotence=True, linger_ms=5, max_block_ms=20_000)

    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        future = self.p.send(topic, encode(value), key=encode(value) if keyed else None)
        future.add_callback(lambda md: on_ack(md.partition, md.offset, None))
        future.add_errback(lambda exc: on_ack(None, None, repr(exc)))

    def flush(self, timeout: float) -> None:
        self.p.flush(timeout)

    def close(self) -> None:
        self.p.close(timeout=10)


class _KPConsumer(ConsumerClient):
    def __init__(self, servers: str, client_id: str, group: str | None, isolation: str,
                 listener: Listener | None, max_poll_interval_ms: int | None = None) -> None:
        from kafka import KafkaConsumer

        self.listener = listener
        self.c = KafkaConsumer(bootstrap_servers=servers, client_id=client_id, group_id=group,
                               isolation_level=isolation,
                               **_consumer_config(max_poll_interval_ms))

    def subscribe(self, topics: list[str]) -> None:
        from kafka import ConsumerRebalanceListener

        outer = self.listener

        class Relay(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                if outer is not None:
                    outer.revoked(_tps(revoked), False)

            def on_partitions_assigned(self, assigned: Any) -> None:
                if outer is not None:
                    outer.assigned(_tps(assigned))

        self.c.subscribe(topics, listener=Relay())

    def assign(self, tps: list[TP]) -> None:
        from kafka import TopicPartition

        parts = [TopicPartition(t, p) for t, p in tps]
        self.c.assign(parts)
        for tp in parts:
            self.c.seek(tp, 0)

    def poll(self, timeout: float) -> list[Record]:
        got = self.c.poll(timeout_ms=int(timeout * 1000), max_records=500)
        return [(tp.topic, tp.partition, r.offset, decode(r.value))
                for tp, records in got.items() for r in records]

    def commit(self, offsets: dict[TP, int]) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        self.c.commit({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                       for (t, p), o in offsets.items()})

    def commit_async(self, offsets: dict[TP, int], on_done: CommitDone) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        def done(_: Any, result: Any) -> None:   # the response, or the exception
            on_done(offsets, repr(result) if isinstance(result, BaseException) else None)

        self.c.commit_async({TopicPartition(t, p): OffsetAndMetadata(o, "", -1)
                             for (t, p), o in offsets.items()}, callback=done)

    def seek(self, tp: TP, offset: int) -> None:
        from kafka import TopicPartition

        self.c.seek(TopicPartition(*tp), offset)

    def close(self) -> None:
        self.c.close()


KAFKA_PYTHON_PENDING_FETCH = (
    "kafka-python 3.0.12: Fetcher._send_fetches_async marks a broker as having a fetch in "
    "flight before manager.send(), which raises UnknownBrokerIdError (kafka-python PR #2876) "
    "when the leader is not in the client's broker list; the mark is never cleared, so the "
    "consumer never fetches from that broker again while it stays in the group (stuck). Seen "
    "with --client kafka-python --seconds 30 --seed 701: after a cluster crash restarted the "
    "brokers one at a time, the client's metadata lacked broker 2; a KIP-951 leader hint "
    "(Fetch v12 has no node endpoints) then named 2, poll() raised UnknownBrokerIdError(2) "
    "and consumer-1 never read queue-2 past offset 482 (of 2324). The faults that take a "
    "broker out of the metadata (kill, stop, crash) are left out; "
    "tests/verify/test_found_bugs.py reproduces the stall in isolation")


class KafkaPython(ClientFactory):
    name = "kafka-python"
    async_commits = True
    known_issues = {"queue": {"kill": KAFKA_PYTHON_PENDING_FETCH,
                              "stop": KAFKA_PYTHON_PENDING_FETCH,
                              "crash": KAFKA_PYTHON_PENDING_FETCH}}

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        return _KPProducer(servers, client_id)

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient:
        return _KPConsumer(servers, client_id, group, isolation, listener,
                           self.max_poll_interval_ms)


# -- aiokafka ------------------------------------------------------------------------------------

class _AioProducer(ProducerClient):
    def __init__(self, ctx: LoopContext, servers: str, client_id: str) -> None:
        from aiokafka import AIOKafkaProducer

        self.ctx = ctx

        async def make() -> Any:
            p = AIOKafkaProducer(bootstrap_servers=servers, client_id=client_id, acks="all",
                                 enable_idempotence=True, linger_ms=5)
            await p.start()
            return p

        self.p = ctx.run(make(), 30)

    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        def report(fut: Any) -> None:
            if fut.cancelled():
                on_ack(None, None, "cancelled")
            elif fut.exception() is not None:
                on_ack(None, None, repr(fut.exception()))
            else:
                md = fut.result()
                on_ack(md.partition, md.offset, None)

        future = self.ctx.run(self.p.send(topic, encode(value),
                                          key=encode(value) if keyed else None), 60)
        future.add_done_callback(report)

    def tick(self, seconds: float) -> None:
        self.ctx.sleep(seconds)

    def flush(self, timeout: float) -> None:
        self.ctx.run(self.p.flush(), timeout)

    def close(self) -> None:
        self.ctx.run(self.p.stop(), 20)


class _AioConsumer(ConsumerClient):
    def __init__(self, ctx: LoopContext, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None,
                 max_poll_interval_ms: int | None = None) -> None:
        from aiokafka import AIOKafkaConsumer

        self.ctx = ctx
        self.listener = listener

        async def make() -> Any:
            c = AIOKafkaConsumer(bootstrap_servers=servers, client_id=client_id,
                                 group_id=group, isolation_level=isolation,
                                 **_consumer_config(max_poll_interval_ms))
            await c.start()
            return c

        self.c = ctx.run(make(), 30)

    def subscribe(self, topics: list[str]) -> None:
        from aiokafka.abc import ConsumerRebalanceListener

        outer = self.listener

        class Relay(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                if outer is not None:
                    outer.revoked(_tps(revoked), False)

            def on_partitions_assigned(self, assigned: Any) -> None:
                if outer is not None:
                    outer.assigned(_tps(assigned))

        self.ctx.call(lambda: self.c.subscribe(topics, listener=Relay()))

    def assign(self, tps: list[TP]) -> None:
        from aiokafka import TopicPartition

        parts = [TopicPartition(t, p) for t, p in tps]
        self.ctx.call(self.c.assign, parts)
        for tp in parts:
            self.ctx.call(self.c.seek, tp, 0)

    def poll(self, timeout: float) -> list[Record]:
        got = self.ctx.run(self.c.getmany(timeout_ms=int(timeout * 1000), max_records=500),
                           timeout + 60)
        return [(tp.topic, tp.partition, r.offset, decode(r.value))
                for tp, records in got.items() for r in records]

    def commit(self, offsets: dict[TP, int]) -> None:
        from aiokafka import TopicPartition

        self.ctx.run(self.c.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()}),
                     60)

    def seek(self, tp: TP, offset: int) -> None:
        from aiokafka import TopicPartition

        self.ctx.call(self.c.seek, TopicPartition(*tp), offset)

    def close(self) -> None:
        try:
            self.ctx.run(self.c.stop(), 30)
        except asyncio.CancelledError as exc:
            # aiokafka 0.14's Fetcher.close cancels its pending fetch tasks and awaits them
            # without catching their CancelledError (aio-libs/aiokafka#647, open; the lines
            # are named in #983), so stop() raises it when a fetch was backing off from an
            # unreachable broker, after the member left its group but before its client
            # closed. Close the client too, and fail the leave as an ordinary error: the
            # churn workload then joins again (a group soak lost both members to it).
            self.ctx.run(self.c._client.close(), 10)
            raise RuntimeError("aiokafka stop() raised CancelledError "
                               "(aio-libs/aiokafka#647)") from exc


AIOKAFKA_OFFSET_FETCH_GROUP_ERROR = (
    "aiokafka 0.14 sends OffsetFetch v3, where Kafka answers a coordinator error "
    "(NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) at the group level with no "
    "partitions; _do_fetch_commit_offsets reads only the partitions, takes that for 'no "
    "committed offset' and starts the partition from auto_offset_reset, so the consumer "
    "re-reads what its group had committed and then commits a lower offset "
    "(nonmonotonic-commit). Seen with --client aiokafka --workload queue --seconds 10 "
    "--seed 1005 (CI): queue-3 committed 520, then 457 after a 500-record poll from 0. "
    "No upstream issue found. A real coordinator move that lands between FindCoordinator "
    "and OffsetFetch does the same, so the 'coordinator' fault can still, rarely, meet it; "
    "tests/verify/test_found_bugs.py reproduces it in isolation")


class AioKafka(ClientFactory):
    name = "aiokafka"
    known_errors = {w: {("OffsetFetch", e): AIOKAFKA_OFFSET_FETCH_GROUP_ERROR
                        for e in ("NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS")}
                    for w in ("queue", "txn")}

    def context(self) -> Context:
        return LoopContext()

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        return _AioProducer(cast(LoopContext, ctx), servers, client_id)

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient:
        return _AioConsumer(cast(LoopContext, ctx), servers, client_id, group, isolation,
                            listener, self.max_poll_interval_ms)
