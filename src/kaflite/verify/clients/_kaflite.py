"""kaflite's own clients: the asyncio ``kaflite.client`` and its blocking ``.sync`` façade."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, cast

from kaflite.client import (
    Consumer,
    GroupMembershipOperation,
    Producer,
    RebalanceListener,
    TopicPartition,
)
from kaflite.client import sync as ksync
from kaflite.client.producer import RecordMetadata
from kaflite.client.share import AcknowledgeType, ShareConsumer, ShareRecord
from kaflite.protocol.errors import KafkaError
from kaflite.verify.clients._base import (
    CLASSIC,
    TP,
    AckFn,
    AckResult,
    ClientFactory,
    CommitDone,
    ConsumerClient,
    Context,
    Delivery,
    Listener,
    LoopContext,
    ProducerClient,
    Record,
    ShareConsumerClient,
    TxnFailure,
    decode,
    encode,
)

__all__ = ["KafliteAsync", "KafliteSync"]


def producer_config(servers: str, client_id: str, txn_id: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": servers, "client.id": client_id,
                              "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                              "max.block.ms": 20_000}
    if txn_id is not None:
        config["transactional.id"] = txn_id
        config["transaction.timeout.ms"] = 20_000
    return config


def consumer_config(servers: str, client_id: str, group: str | None, isolation: str,
                    group_protocol: str = "classic",
                    max_poll_interval_ms: int | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": servers, "client.id": client_id, "group.id": group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": isolation, "default.api.timeout.ms": 20_000}
    if group_protocol in CLASSIC:
        config.update({"session.timeout.ms": 6_000, "heartbeat.interval.ms": 500,
                       "partition.assignment.strategy": CLASSIC[group_protocol]})
    else:       # KIP-848: the coordinator sets both (group.consumer.* on the broker)
        config["group.protocol"] = group_protocol
    if max_poll_interval_ms is not None:
        config["max.poll.interval.ms"] = max_poll_interval_ms
    return config


def share_config(servers: str, client_id: str, group: str,
                 max_poll_interval_ms: int | None = None) -> dict[str, Any]:
    """A share group member that acknowledges every record itself (explicit mode)."""
    config: dict[str, Any] = {"bootstrap.servers": servers, "client.id": client_id,
                              "group.id": group, "share.acknowledgement.mode": "explicit",
                              "default.api.timeout.ms": 20_000}
    if max_poll_interval_ms is not None:
        config["max.poll.interval.ms"] = max_poll_interval_ms
    return config


ACK_TYPES = {"accept": AcknowledgeType.ACCEPT, "release": AcknowledgeType.RELEASE,
             "reject": AcknowledgeType.REJECT}


def _ack_callback(on_result: AckResult) -> Callable[[Any, KafkaError | None], None]:
    def done(offsets: Any, error: KafkaError | None) -> None:
        for tp, offs in offsets.items():
            on_result((tp.topic, tp.partition), set(offs),
                      None if error is None else repr(error))
    return done


# the share fetcher's events about records it never handed out (_buffer.offset_ranges)
_UNSEEN = re.compile(r"^(?:gave back|dropped) \d+ (?:buffered )?records of (.+)-(\d+)"
                     r"[^(]*\(offsets ([0-9, -]+)\)")


class _UnseenEvents:
    """A share consumer's events that name records it never handed out, kept as they
    happen. The client's own event log keeps the last ``events.max`` events only, and a
    member that lives through a long run emits more than that: read at its close, the
    early ones were gone, and the checker counted their records as never delivered
    (a 30-minute soak: 493 records of a partition, dropped three times in its buffer,
    then archived at the delivery limit, reported as lost)."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def __call__(self, event: Any) -> None:
        if event.kind == "share" and _UNSEEN.match(event.message):
            self.events.append(event)


def _unseen(events: list[Any]) -> list[tuple[float, str, int, tuple[int, ...], str]]:
    out = []
    for e in events:
        m = _UNSEEN.match(e.message) if e.kind == "share" else None
        if m is None:
            continue
        offsets: list[int] = []
        for part in m.group(3).split(","):
            a, _, b = part.strip().partition("-")
            offsets += range(int(a), int(b or a) + 1)
        out.append((e.timestamp, m.group(1), int(m.group(2)), tuple(offsets), e.message))
    return out


def _delivery(r: ShareRecord[Any, Any], lock_until: float | None) -> Delivery:
    return (r.topic, r.partition, r.offset, decode(r.value), r.delivery_count, lock_until)


def _txn_failure(producer: Producer | Any, exc: BaseException) -> TxnFailure:
    state = producer.transaction_state
    if state == "abortable error":
        return TxnFailure("abortable", repr(exc))
    if state == "fatal error":
        return TxnFailure("fatal", repr(exc))
    if state in ("committing", "aborting", "in transaction"):
        return TxnFailure("retry", f"{exc!r} (state {state})")
    return TxnFailure("fatal", f"{exc!r} (state {state})")


class _Listener(RebalanceListener):
    def __init__(self, listener: Listener) -> None:
        self.listener = listener

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.listener.revoked(sorted((tp.topic, tp.partition) for tp in revoked), False)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.listener.assigned(sorted((tp.topic, tp.partition) for tp in assigned))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.listener.revoked(sorted((tp.topic, tp.partition) for tp in lost), True)


def _events(client: Any) -> list[tuple[float, str]]:
    return [(e.timestamp, f"{e.kind}: {e.message}" + (f" ({e.cause})" if e.cause else ""))
            for e in client.events()]


def _commit_callback(offsets: dict[TP, int], on_done: CommitDone
                     ) -> Callable[[object, BaseException | None], None]:
    def done(_: object, error: BaseException | None) -> None:
        on_done(offsets, None if error is None else repr(error))
    return done


def _callback(on_ack: AckFn) -> Any:
    def done(err: BaseException | None, md: RecordMetadata | None) -> None:
        if err is not None or md is None:
            on_ack(None, None, repr(err))
        else:
            on_ack(md.partition, md.offset, None)
    return done


# -- asyncio -------------------------------------------------------------------------------

class _AsyncProducer(ProducerClient):
    def __init__(self, ctx: LoopContext, config: dict[str, Any]) -> None:
        self.ctx = ctx
        self.p = Producer(config)
        ctx.run(self.p.start(), 30)

    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        key = encode(value) if keyed else None
        self.ctx.call(self.p.produce, topic, encode(value), key, None, None, None,
                      _callback(on_ack))

    def tick(self, seconds: float) -> None:
        self.ctx.sleep(seconds)

    def flush(self, timeout: float) -> None:
        self.ctx.run(self.p.flush(timeout), timeout + 5)

    def close(self) -> None:
        self.ctx.run(self.p.close(10), 20)

    def events(self) -> list[tuple[float, str]]:
        return _events(self.p)

    def init_transactions(self) -> None:
        self.ctx.run(self.p.init_transactions(), 60)

    def begin(self) -> None:
        self.ctx.call(self.p.begin_transaction)

    def _txn(self, what: str, coro: Any) -> None:
        try:
            self.ctx.run(coro, 60)
        except Exception as exc:
            raise _txn_failure(self.p, exc) from exc

    def send_offsets(self, offsets: dict[TP, int], consumer: ConsumerClient) -> None:
        group = cast(_AsyncConsumer, consumer).c.group_metadata()
        self._txn("send_offsets", self.p.send_offsets_to_transaction(offsets, group))

    def commit(self) -> None:
        self._txn("commit", self.p.commit_transaction())

    def abort(self) -> None:
        self._txn("abort", self.p.abort_transaction())


class _AsyncConsumer(ConsumerClient):
    def __init__(self, ctx: LoopContext, config: dict[str, Any],
                 listener: Listener | None) -> None:
        self.ctx = ctx
        self.c = Consumer(config)
        self.listener = _Listener(listener) if listener is not None else None
        ctx.run(self.c.start(), 30)

    def subscribe(self, topics: list[str]) -> None:
        self.ctx.call(self.c.subscribe, topics, None, self.listener)

    def assign(self, tps: list[TP]) -> None:
        self.ctx.call(self.c.assign, [TopicPartition(t, p) for t, p in tps])
        for t, p in tps:
            self.ctx.call(self.c.seek, TopicPartition(t, p), 0)

    def poll(self, timeout: float) -> list[Record]:
        got = self.ctx.run(self.c.getmany(timeout_ms=int(timeout * 1000)), timeout + 60)
        return [(tp.topic, tp.partition, r.offset, decode(r.value))
                for tp, records in got.items() for r in records]

    def commit(self, offsets: dict[TP, int]) -> None:
        self.ctx.run(self.c.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()}),
                     60)

    def commit_async(self, offsets: dict[TP, int], on_done: CommitDone) -> None:
        self.ctx.call(self.c.commit_async,
                      {TopicPartition(t, p): o for (t, p), o in offsets.items()},
                      _commit_callback(offsets, on_done))

    def seek(self, tp: TP, offset: int) -> None:
        self.ctx.call(self.c.seek, TopicPartition(*tp), offset)

    def close(self) -> None:
        self.ctx.run(self.c.close(), 30)

    def abandon(self) -> None:
        self.ctx.run(self.c.close(GroupMembershipOperation.REMAIN_IN_GROUP), 30)

    def events(self) -> list[tuple[float, str]]:
        return _events(self.c)


class _AsyncShareConsumer(ShareConsumerClient):
    def __init__(self, ctx: LoopContext, config: dict[str, Any], on_result: AckResult) -> None:
        self.ctx = ctx
        self.c: ShareConsumer[Any, Any] = ShareConsumer(config)
        self.c.set_acknowledgement_commit_callback(_ack_callback(on_result))
        self.last: dict[tuple[str, int, int], ShareRecord[Any, Any]] = {}
        self._unseen = _UnseenEvents()
        self.c.on_event(self._unseen)
        ctx.run(self.c.start(), 30)

    def subscribe(self, topics: list[str]) -> None:
        self.ctx.call(self.c.subscribe, topics)

    def poll(self, timeout: float) -> list[Delivery]:
        got = self.ctx.run(self.c.poll(int(timeout * 1000)), timeout + 60)
        self.last = {(r.topic, r.partition, r.offset): r for r in got}
        return [_delivery(r, self.c.acquisition_lock_deadline(r)) for r in got]

    def acknowledge(self, tp: TP, offset: int, type_: str) -> None:
        self.ctx.call(self.c.acknowledge, self.last[(tp[0], tp[1], offset)], ACK_TYPES[type_])

    def commit(self, asynchronous: bool) -> None:
        if asynchronous:
            self.ctx.call(self.c.commit_async)
        else:
            self.ctx.run(self.c.commit_sync(), 60)

    def close(self) -> None:
        self.ctx.run(self.c.close(), 60)

    def events(self) -> list[tuple[float, str]]:
        return _events(self.c)

    def unseen(self) -> list[tuple[float, str, int, tuple[int, ...], str]]:
        return _unseen(self._unseen.events)


class KafliteAsync(ClientFactory):
    group_protocols = ("classic", "cooperative", "consumer", "share")
    name = "kaflite"
    transactions = True
    async_commits = True

    def context(self) -> Context:
        return LoopContext()

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        return _AsyncProducer(cast(LoopContext, ctx), producer_config(servers, client_id, txn_id))

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient:
        return _AsyncConsumer(cast(LoopContext, ctx),
                              consumer_config(servers, client_id, group, isolation,
                                              self.group_protocol, self.max_poll_interval_ms),
                              listener)

    def share_consumer(self, ctx: Context, servers: str, client_id: str, group: str,
                       on_result: AckResult) -> ShareConsumerClient:
        return _AsyncShareConsumer(cast(LoopContext, ctx), share_config(
            servers, client_id, group, self.max_poll_interval_ms), on_result)


# -- the blocking façade --------------------------------------------------------------------

class _SyncProducer(ProducerClient):
    def __init__(self, config: dict[str, Any]) -> None:
        self.p = ksync.Producer(config)
        self.p.start()

    def send(self, topic: str, value: int, on_ack: AckFn, keyed: bool = False) -> None:
        self.p.produce(topic, encode(value), encode(value) if keyed else None,
                       on_delivery=_callback(on_ack))

    def flush(self, timeout: float) -> None:
        self.p.flush(timeout)

    def close(self) -> None:
        self.p.close()

    def events(self) -> list[tuple[float, str]]:
        return _events(self.p)


class _SyncConsumer(ConsumerClient):
    def __init__(self, config: dict[str, Any], listener: Listener | None) -> None:
        self.c = ksync.Consumer(config)
        self.listener = _Listener(listener) if listener is not None else None
        self.c.start()

    def subscribe(self, topics: list[str]) -> None:
        self.c.subscribe(topics, listener=self.listener)

    def assign(self, tps: list[TP]) -> None:
        self.c.assign([TopicPartition(t, p) for t, p in tps])
        for t, p in tps:
            self.c.seek(TopicPartition(t, p), 0)

    def poll(self, timeout: float) -> list[Record]:
        got = self.c.getmany(timeout_ms=int(timeout * 1000))
        return [(tp.topic, tp.partition, r.offset, decode(r.value))
                for tp, records in got.items() for r in records]

    def commit(self, offsets: dict[TP, int]) -> None:
        self.c.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})

    def commit_async(self, offsets: dict[TP, int], on_done: CommitDone) -> None:
        self.c.commit_async({TopicPartition(t, p): o for (t, p), o in offsets.items()},
                            _commit_callback(offsets, on_done))

    def seek(self, tp: TP, offset: int) -> None:
        self.c.seek(TopicPartition(*tp), offset)

    def close(self) -> None:
        self.c.close()

    def abandon(self) -> None:
        self.c.close(GroupMembershipOperation.REMAIN_IN_GROUP)

    def events(self) -> list[tuple[float, str]]:
        return _events(self.c)


class _SyncShareConsumer(ShareConsumerClient):
    def __init__(self, config: dict[str, Any], on_result: AckResult) -> None:
        self.c: ksync.ShareConsumer[Any, Any] = ksync.ShareConsumer(config)
        self.c.set_acknowledgement_commit_callback(_ack_callback(on_result))
        self.last: dict[tuple[str, int, int], ShareRecord[Any, Any]] = {}
        self._unseen = _UnseenEvents()
        self.c.on_event(self._unseen)
        self.c.start()

    def subscribe(self, topics: list[str]) -> None:
        self.c.subscribe(topics)

    def poll(self, timeout: float) -> list[Delivery]:
        got = self.c.poll(int(timeout * 1000))
        self.last = {(r.topic, r.partition, r.offset): r for r in got}
        return [_delivery(r, self.c.acquisition_lock_deadline(r)) for r in got]

    def acknowledge(self, tp: TP, offset: int, type_: str) -> None:
        self.c.acknowledge(self.last[(tp[0], tp[1], offset)], ACK_TYPES[type_])

    def commit(self, asynchronous: bool) -> None:
        if asynchronous:
            self.c.commit_async()
        else:
            self.c.commit_sync()

    def close(self) -> None:
        self.c.close()

    def events(self) -> list[tuple[float, str]]:
        return _events(self.c)

    def unseen(self) -> list[tuple[float, str, int, tuple[int, ...], str]]:
        return _unseen(self._unseen.events)


class KafliteSync(ClientFactory):
    group_protocols = ("classic", "cooperative", "consumer", "share")
    name = "kaflite-sync"
    async_commits = True

    def producer(self, ctx: Context, servers: str, client_id: str,
                 txn_id: str | None = None) -> ProducerClient:
        return _SyncProducer(producer_config(servers, client_id, txn_id))

    def consumer(self, ctx: Context, servers: str, client_id: str, group: str | None,
                 isolation: str, listener: Listener | None) -> ConsumerClient:
        return _SyncConsumer(consumer_config(servers, client_id, group, isolation,
                                              self.group_protocol, self.max_poll_interval_ms),
                              listener)

    def share_consumer(self, ctx: Context, servers: str, client_id: str, group: str,
                       on_result: AckResult) -> ShareConsumerClient:
        return _SyncShareConsumer(share_config(servers, client_id, group,
                                               self.max_poll_interval_ms), on_result)
