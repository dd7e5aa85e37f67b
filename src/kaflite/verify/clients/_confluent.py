"""confluent-kafka (librdkafka): blocking, delivery reports served by ``poll``."""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, cast

from kaflite.verify.clients._base import (
    CLASSIC,
    TP,
    AckFn,
    ClientFactory,
    CommitDone,
    ConsumerClient,
    Context,
    Listener,
    ProducerClient,
    Record,
    TxnFailure,
    decode,
    encode,
)

__all__ = ["ConfluentKafka"]

# librdkafka logs every refused connection to stderr; a run refuses many on purpose.
LOGGER = logging.getLogger("kaflite.verify.librdkafka")
LOGGER.addHandler(logging.NullHandler())


def _common(servers: str, client_id: str) -> dict[str, Any]:
    """Settings of every client; KAFLITE_VERIFY_RDKAFKA_DEBUG turns on librdkafka's debug
    contexts (for example ``cgrp,fetch``), logged with --client-logs."""
    config: dict[str, Any] = {"bootstrap.servers": servers, "client.id": client_id,
                              "logger": LOGGER}
    debug = os.environ.get("KAFLITE_VERIFY_RDKAFKA_DEBUG")
    if debug:
        config["debug"] = debug
    return config


def _txn_failure(exc: BaseException) -> TxnFailure:
    err = exc.args[0] if exc.args else None
    if err is not None and hasattr(err, "txn_requires_abort"):
        if err.fatal():
            return TxnFailure("fatal", str(err))
        if err.txn_requires_abort():
            return TxnFailure("abortable", str(err))
        if err.retriable():
            return TxnFailure("retry", str(err))
    return TxnFailure("fatal", repr(exc))


class _Producer(ProducerClient):
    def __init__(self, servers: str, client_id: str, txn_id: str | None) -> None:
        from confluent_kafka import Producer

        config = _common(servers, client_id)
        config.update({"acks": "all", "enable.idempotence": True, "linger.ms": 5})
        if txn_id is not None:
            config["transactional.id"] = txn_id
            config["transaction.timeout.ms"] = 20_000
        self.p = Producer(config)

    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        def report(err: Any, msg: Any) -> None:
            if err is not None:
                on_ack(None, None, str(err))
            else:
                on_ack(msg.partition(), msg.offset(), None)

        for _ in range(1000):
            try:
                self.p.produce(topic, encode(value), encode(value) if keyed else None,
                               on_delivery=report)
                return
            except BufferError:
                self.p.poll(0.01)
        raise BufferError("the producer queue stayed full")

    def tick(self, seconds: float) -> None:
        self.p.poll(seconds)

    def flush(self, timeout: float) -> None:
        self.p.flush(timeout)

    def close(self) -> None:
        self.p.flush(10)

    def _txn(self, call: Any, *args: Any) -> None:
        try:
            call(*args)
        except Exception as exc:
            raise _txn_failure(exc) from exc

    def init_transactions(self) -> None:
        self._txn(self.p.init_transactions, 30)

    def begin(self) -> None:
        self._txn(self.p.begin_transaction)

    def send_offsets(self, offsets: dict[TP, int], consumer: ConsumerClient) -> None:
        from confluent_kafka import TopicPartition

        c = cast(_Consumer, consumer).c
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        self._txn(self.p.send_offsets_to_transaction, tps, c.consumer_group_metadata(), 30)

    def commit(self) -> None:
        self._txn(self.p.commit_transaction, 30)

    def abort(self) -> None:
        self._txn(self.p.abort_transaction, 30)


# polls of an abandoned consumer that serve what its library queued before it is destroyed
ABANDON_DRAIN_POLLS = 5


class _Consumer(ConsumerClient):
    abandon_on_a_thread = True      # a destroy can take long (see abandon)

    def __init__(self, servers: str, client_id: str, group: str | None, isolation: str,
                 listener: Listener | None, group_protocol: str = "classic",
                 max_poll_interval_ms: int | None = None) -> None:
        from confluent_kafka import Consumer

        self.listener = listener
        config = _common(servers, client_id)
        config.update({"group.id": group or f"{client_id}-nogroup",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False,
                       "isolation.level": isolation})
        if group_protocol in CLASSIC:
            config.update({"session.timeout.ms": 6_000, "heartbeat.interval.ms": 500,
                           "partition.assignment.strategy": CLASSIC[group_protocol]})
        else:   # KIP-848: librdkafka refuses both; the coordinator sets them
            config["group.protocol"] = group_protocol
        if max_poll_interval_ms is not None:
            config["max.poll.interval.ms"] = max_poll_interval_ms
        # the async commits waiting for their outcome, which poll() serves to on_commit
        self._pending: dict[TP, list[tuple[int, CommitDone]]] = {}
        config["on_commit"] = self._committed
        self.c = Consumer(config)

    def _committed(self, err: Any, parts: list[Any]) -> None:
        for p in parts or []:
            waiting = self._pending.get((p.topic, p.partition), [])
            mine = next((w for w in waiting if w[0] == p.offset), None)
            if mine is None:     # a synchronous commit's, reported too
                continue
            waiting.remove(mine)
            error = p.error if p.error is not None else err
            mine[1]({(p.topic, p.partition): p.offset}, None if error is None else str(error))

    def subscribe(self, topics: list[str]) -> None:
        listener = self.listener

        def assigned(consumer: Any, parts: list[Any]) -> None:
            if listener is not None:
                listener.assigned(sorted((p.topic, p.partition) for p in parts))

        def revoked(consumer: Any, parts: list[Any]) -> None:
            if listener is not None:
                listener.revoked(sorted((p.topic, p.partition) for p in parts), False)

        def lost(consumer: Any, parts: list[Any]) -> None:
            if listener is not None:
                listener.revoked(sorted((p.topic, p.partition) for p in parts), True)

        self.c.subscribe(topics, on_assign=assigned, on_revoke=revoked, on_lost=lost)

    def assign(self, tps: list[TP]) -> None:
        from confluent_kafka import TopicPartition

        self.c.assign([TopicPartition(t, p, 0) for t, p in tps])

    def poll(self, timeout: float) -> list[Record]:
        out: list[Record] = []
        for msg in self.c.consume(500, timeout):
            if msg.error() is None:
                out.append((str(msg.topic()), int(msg.partition() or 0), int(msg.offset() or 0),
                            decode(msg.value())))
        return out

    def commit(self, offsets: dict[TP, int]) -> None:
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        result = self.c.commit(offsets=tps, asynchronous=False)
        failed = [tp for tp in result or [] if tp.error is not None]
        if failed:
            raise RuntimeError(f"commit failed: {failed[0].error}")

    def commit_async(self, offsets: dict[TP, int], on_done: CommitDone) -> None:
        from confluent_kafka import TopicPartition

        for tp, o in offsets.items():
            self._pending.setdefault(tp, []).append((o, on_done))
        self.c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())],
                      asynchronous=True)

    def seek(self, tp: TP, offset: int) -> None:
        from confluent_kafka import TopicPartition

        self.c.seek(TopicPartition(tp[0], tp[1], offset))

    def close(self) -> None:
        """Unsubscribe and serve the revoke from ``poll`` first (bounded), so that the
        close itself has no rebalance left to serve: an assign inside ``close`` can block
        for ever (librdkafka#4884, #4527)."""
        try:
            self.c.unsubscribe()
            deadline = time.monotonic() + 5.0
            while self.c.assignment() and time.monotonic() < deadline:
                self.c.poll(0.1)
        except Exception as exc:
            LOGGER.info("unsubscribe before close: %r", exc)
        self.c.close()

    def abandon(self) -> None:
        """The handle's deallocation destroys it with RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE,
        releasing the GIL: no leave, no rebalance callbacks. ``close`` instead serves the
        final revoke, whose fallback ``rd_kafka_assign`` can block forever while holding
        the GIL (confluentinc/librdkafka#4884), hanging the whole interpreter.

        First the events librdkafka queued for the application are served, briefly
        (``ABANDON_DRAIN_POLLS``; what they say is heard by nobody: the recorder is
        muted, the pending commits forgotten). librdkafka 2.16 destroyed while its group
        waits for the application's assign call (join-state wait-assign-call, a KIP-848
        target the member never polled for) never terminates: "waiting for assign call
        ... before terminating", and its main thread loops with a zero timeout (the
        timers are stopped at destroy), a core for as long as the process lives. Seen in
        make test: two abandoned consumers of ``--group-protocol consumer`` rounds burnt
        26 CPU-minutes of a two-core run (docs/reliability.md)."""
        c = self.c
        self._pending.clear()
        for _ in range(ABANDON_DRAIN_POLLS):
            c.poll(0.02)        # a record polled here is never processed: the member crashed
        del self.c
        if sys.getrefcount(c) > 2:
            raise RuntimeError("the consumer handle is still referenced; not destroyed")
        del c


LIBRDKAFKA_5511 = (
    "librdkafka drops a broker that leaves the Metadata response (a stopped or killed "
    "broker, as Kafka reports it) and send_offsets_to_transaction() then hangs while that "
    "broker is the cached group coordinator: confluentinc/librdkafka#5511 (fix: PR #5512). "
    "Seen with --client confluent-kafka --workload txn --seed 303: both transformers blocked "
    "in send_offsets_to_transaction for 60 s, then in abort_transaction. The same fault, "
    "while a consumer's first offset lookup (ListOffsets BEGINNING) was queued on the "
    "stopped broker, let that stale request's late FENCED_LEADER_EPOCH answer move an "
    "actively fetching partition back to offset BEGINNING: it re-read vout-1 from 0 with "
    "no rebalance or seek (nonmonotonic-poll; related: librdkafka#843, #4620). A crash of "
    "the whole cluster does the same: its brokers start again one at a time, and a Metadata "
    "answer in between lists only those already up (seed 601: both transformers blocked in "
    "send_offsets_to_transaction from 20 s to the end, past its 30 s timeout)")

LIBRDKAFKA_5586 = (
    "when the OffsetFetch that looks up an assigned partition's committed offset is "
    "answered NOT_COORDINATOR (a group-level error with no partitions, as Kafka answers "
    "after a coordinator moves), librdkafka looks the coordinator up again but never "
    "resends the OffsetFetch: the partition stays in its 'queried' state and is never "
    "fetched until the consumer is rebalanced or restarted: confluentinc/librdkafka#5586 "
    "(open). Seen with --client confluent-kafka --workload txn --seed 744319918: "
    "transformer-0 held vin-0 and vin-1 for 50 s without one fetch. A real coordinator "
    "move that lands while that OffsetFetch is in flight does the same, so the "
    "'coordinator' fault can still, rarely, meet this bug")


LIBRDKAFKA_STALE_LISTOFFSETS = (
    "a consumer's first offset lookup (ListOffsets BEGINNING, no committed offset) sent to "
    "a broker that is down stays queued there and is retried after the partition has "
    "moved to a new leader, been looked up again and fetched from; when that stale request "
    "finally comes back marked outdated, librdkafka restarts the offset query for a "
    "partition that is no longer waiting for one ('outdated offset response: (re)starting "
    "offset query timer for offset BEGINNING') and the consumer re-reads it from the log "
    "start with no rebalance or seek (nonmonotonic-poll). No upstream issue found "
    "(related: confluentinc/librdkafka#843). Seen with --client confluent-kafka --workload "
    "queue --seed 158852209 (soak of 2026-11-24; again in 2 replays of 4): consumer-0 went from "
    "queue-0 offset 166 back to 0; librdkafka's debug log (KAFLITE_VERIFY_RDKAFKA_DEBUG="
    "fetch,topic,consumer --client-logs) shows the request queued on the stopped broker 0 "
    "at 1.4 s, the partition active on broker 1 from 2.4 s, and the reset at 3.96 s")

LIBRDKAFKA_ASYNC_COMMIT_RETRY = (
    "an asynchronous commit answered COORDINATOR_LOAD_IN_PROGRESS or REQUEST_TIMED_OUT is "
    "retried by librdkafka; a synchronous commit of a later offset made meanwhile goes out "
    "first, and the retry then sets the group's offset back (nonmonotonic-commit). Kafka's "
    "Java consumer never retries commitAsync. No upstream issue found. Seen in the "
    "30-minute confluent-kafka KIP-848 soak (seed 597617956); reproduced by "
    "tests/verify/test_found_bugs.py. A coordinator that is really loading answers the "
    "same, so a 'coordinator' or 'crash' fault can still, rarely, meet it")


class ConfluentKafka(ClientFactory):
    group_protocols = ("classic", "cooperative", "consumer")
    name = "confluent-kafka"
    transactions = True
    async_commits = True
    known_issues = {"txn": {"kill": LIBRDKAFKA_5511, "stop": LIBRDKAFKA_5511,
                            "crash": LIBRDKAFKA_5511},
                    "queue": {"kill": LIBRDKAFKA_STALE_LISTOFFSETS,
                              "stop": LIBRDKAFKA_STALE_LISTOFFSETS,
                              "crash": LIBRDKAFKA_STALE_LISTOFFSETS}}
    known_errors = {"queue": {("OffsetFetch", "NOT_COORDINATOR"): LIBRDKAFKA_5586,
                              ("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS"):
                                  LIBRDKAFKA_ASYNC_COMMIT_RETRY,
                              ("OffsetCommit", "REQUEST_TIMED_OUT"):
                                  LIBRDKAFKA_ASYNC_COMMIT_RETRY},
                    "txn": {("OffsetFetch", "NOT_COORDINATOR"): LIBRDKAFKA_5586}}

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        return _Producer(servers, client_id, txn_id)

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient:
        return _Consumer(servers, client_id, group, isolation, listener, self.group_protocol,
                         self.max_poll_interval_ms)
