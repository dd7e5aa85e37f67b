"""``ShareConsumer``: read topics as a member of a share group (KIP-932, queues).

    async with ShareConsumer({"bootstrap.servers": s, "group.id": "workers"}) as consumer:
        consumer.subscribe(["jobs"])
        while True:
            for record in await consumer.poll(1000):
                handle(record)          # accepted by the next poll (implicit mode)

Many members read the same partitions; the partition leaders hand each record
to one of them at a time, locked for ``group.share.record.lock.duration.ms``
(a broker setting), and the member acknowledges it:

* ``ACCEPT``: done, never delivered again;
* ``RELEASE``: delivered again, to any member (its delivery count goes up);
* ``REJECT``: archived, never delivered again;
* ``RENEW`` (KIP-1222): keep it, with a fresh lock; acknowledge it later.

A record not acknowledged before its lock expires is delivered again, and one
delivered ``group.share.delivery.count.limit`` times is archived.

``share.acknowledgement.mode`` is Java's: ``implicit`` (the default) accepts
everything a poll returned when the next poll or commit runs, and
``acknowledge`` is refused; ``explicit`` wants every record of a poll
acknowledged before the next poll (else ``IllegalStateError``). A record
renewed counts as acknowledged for that rule: the member keeps it, across
later polls, until it acknowledges it for good (ACCEPT, RELEASE or REJECT). Acknowledgements
ride on the next ShareFetch to the partition's leader; ``commit_sync`` and
``commit_async`` send them at once (ShareAcknowledge) and report each
partition's outcome, as does the callback of
``set_acknowledgement_commit_callback``. ``close`` sends what is pending,
closes the share sessions (the brokers release what the member still holds)
and leaves the group.

Configuration: the consumer's properties, without those share groups have no
use for (Java's ``ShareConsumerConfig`` refuses them), plus
``share.acknowledgement.mode`` and ``share.acquire.mode`` (KIP-1206:
``batch_optimized``, the default, or ``record_limit``, which makes the broker
acquire at most ``max.poll.records`` records per ShareFetch).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, Self

from kaflite.client._base import BaseClient
from kaflite.client.consumer._group_client import MemberHooks
from kaflite.client.consumer._subscription import IllegalStateError, SubscriptionState
from kaflite.client.consumer._types import GroupMembershipOperation, K, TopicPartition, V
from kaflite.client.pool import DATA
from kaflite.client.share._fetcher import ACQUIRE_MODES, ShareFetcher
from kaflite.client.share._membership import ShareMembership
from kaflite.client.share._types import AcknowledgementCommitCallback, AcknowledgeType, ShareRecord
from kaflite.config import PROPERTIES, ConfigError
from kaflite.protocol import errors

__all__ = ["UNSUPPORTED", "ShareConsumer"]

# Java's ShareConsumerConfig: consumer properties a share consumer refuses
UNSUPPORTED = ("auto.offset.reset", "enable.auto.commit", "group.instance.id", "isolation.level",
               "partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms",
               "group.protocol", "group.remote.assignor")
MODES = ("implicit", "explicit")
Results = dict[TopicPartition, errors.KafkaError | None]


def _split_config(config: Mapping[str, object] | None, kwargs: dict[str, object]
                  ) -> tuple[dict[str, object], str, str]:
    """(the consumer's properties, share.acknowledgement.mode, share.acquire.mode)."""
    given = dict(config or {})
    for key, value in kwargs.items():
        given[key if key in PROPERTIES else key.replace("_", ".")] = value
    mode = str(given.pop("share.acknowledgement.mode", "implicit")).strip().lower()
    if mode not in MODES:
        raise ConfigError("share.acknowledgement.mode", f"must be one of {', '.join(MODES)}, "
                          f"got {mode!r}")
    acquire = str(given.pop("share.acquire.mode", "batch_optimized")).strip().lower()
    if acquire not in ACQUIRE_MODES:
        raise ConfigError("share.acquire.mode", f"must be one of {', '.join(ACQUIRE_MODES)}, "
                          f"got {acquire!r}")
    refused = [n for n in UNSUPPORTED if n in given]
    if refused:
        raise ConfigError(refused[0], "the following configurations are not supported by the "
                          f"share consumer: {', '.join(refused)}")
    if not given.get("group.id"):
        raise ConfigError("group.id", "is required for a share consumer")
    return given, mode, acquire


class ShareConsumer(BaseClient, Generic[K, V]):
    """Generic in the types of the keys and values it hands out, like ``Consumer``."""

    ROLE = "consumer"

    def __init__(self, config: Mapping[str, object] | None = None, *,
                 key_deserializer: Callable[[bytes], K] | None = None,
                 value_deserializer: Callable[[bytes], V] | None = None,
                 **kwargs: object) -> None:
        given, self.acknowledgement_mode, acquire = _split_config(config, kwargs)
        if key_deserializer is not None:
            given["key.deserializer"] = key_deserializer
        if value_deserializer is not None:
            given["value.deserializer"] = value_deserializer
        super().__init__(given)
        self._subs = SubscriptionState("earliest")
        hooks = MemberHooks(self._subs, self._events.emit, self._revoke, self._assigned,
                            self._revoke, self._wake)
        self._member = ShareMembership(self, hooks)
        self._fetcher: ShareFetcher[K, V] = ShareFetcher(
            self, self._member.group_id, lambda: self._member.member_id, self._events.emit,
            self._on_result)
        self._fetcher.acquire_mode = ACQUIRE_MODES[acquire]
        self._explicit = self.acknowledgement_mode == "explicit"
        self._max_poll_records = self.config.int("max.poll.records")
        self._api_timeout = self.config.int("default.api.timeout.ms") / 1000
        # delivered by the last poll(s), not yet acknowledged for good:
        # partition -> offset -> the type the application chose (None: none yet;
        # RENEW: kept, with a renewed lock, for a final acknowledgement later)
        self._delivered: dict[TopicPartition, dict[int, int | None]] = {}
        self._renew: dict[TopicPartition, dict[int, int]] = {}
        # when the acquisition lock of each delivered record ends, at the earliest
        self._lock_ends: dict[TopicPartition, dict[int, float]] = {}
        self._callback: AcknowledgementCommitCallback | None = None
        self._commit_tasks: set[asyncio.Task[Results]] = set()
        self._polled = False

    async def _on_start(self) -> None:
        self.pool.role_providers.append(self._roles)
        self.pool.role_providers.append(self._member.roles)

    def _roles(self, node_id: int, channel: str) -> list[str]:
        if channel != DATA:
            return []
        led = sorted(str(tp) for tp in self._fetcher.assignment
                     if (m := self.metadata.leader(tp.topic, tp.partition)) is not None
                     and m.leader == node_id)
        return [f"share-partition leader for {', '.join(led)}"] if led else []

    # -- subscription ---------------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the share group for ``topics`` (replacing any earlier subscription)."""
        self._check_open()
        names = list(topics)
        if not names:
            self.unsubscribe()
            return
        self._subs.subscribe(names, None, None)
        self.metadata.add_topics(self._subs.topics)
        self._member.request_rejoin("subscription changed")

    def unsubscribe(self) -> None:
        self._subs.unsubscribe()
        self._fetcher.drop(set(self._fetcher.assignment))
        self._fetcher.assignment = set()

    def subscription(self) -> set[str]:
        return set(self._subs.topics)

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetcher.assignment)

    @property
    def member_id(self) -> str:
        return self._member.member_id

    async def _assigned(self, tps: set[TopicPartition], epoch: int, _cooperative: bool) -> None:
        self._subs.set_assignment(tps)
        self._fetcher.assignment = set(tps)
        self._events.emit("rebalance", f"share assignment (member epoch {epoch}): "
                          f"[{', '.join(sorted(map(str, tps)))}]")

    async def _revoke(self, tps: set[TopicPartition], why: str) -> None:
        keep = set(self._fetcher.assignment) - tps
        self._fetcher.drop(tps)
        self._fetcher.assignment = keep
        self._subs.set_assignment(keep)
        if tps:
            self._events.emit("rebalance", f"unassigned [{', '.join(sorted(map(str, tps)))}]",
                              cause=why)

    def _wake(self) -> None:
        self._fetcher.data_ready.set()

    # -- acknowledging --------------------------------------------------------------------------
    def acknowledge(self, record: ShareRecord[K, V],
                    type: AcknowledgeType = AcknowledgeType.ACCEPT) -> None:
        """Acknowledge one record of the last poll (explicit mode only). It is sent with
        the next poll or commit; RENEW keeps the record (acknowledge it again later).

        As Kafka 4.4's ``KafkaShareConsumer``: acknowledged again before then, the later
        type replaces the earlier one (``ShareInFlightBatch`` puts it in a map by offset),
        and only it is sent. Once an ACCEPT, RELEASE or REJECT was sent, or for a record
        of an earlier poll, it is refused (``IllegalStateError``; Java:
        ``IllegalStateException``, "The record cannot be acknowledged.")."""
        self._check_open()
        if not self._explicit:
            raise IllegalStateError("acknowledge() needs share.acknowledgement.mode=explicit "
                                    "(implicit acknowledgement is in use)")
        kind = AcknowledgeType(type)
        tp = TopicPartition(record.topic, record.partition)
        delivered = self._delivered.get(tp)
        if delivered is None or record.offset not in delivered:
            raise IllegalStateError(f"{tp} offset {record.offset} cannot be acknowledged: it is "
                                    "not a record of the last poll, or its acknowledgement "
                                    "went already (with a poll or a commit)")
        if kind is AcknowledgeType.RENEW:
            self._renew.setdefault(tp, {})[record.offset] = int(kind)
            delivered[record.offset] = int(kind)
        else:
            delivered[record.offset] = int(kind)
            self._renew.get(tp, {}).pop(record.offset, None)

    def acquisition_lock_timeout_ms(self) -> int | None:
        """The acquisition lock duration the brokers last gave (``AcquisitionLockTimeoutMs``
        of ShareFetch and ShareAcknowledge), None before any: Java's
        ``KafkaShareConsumer.acquisitionLockTimeoutMs()``. An application that holds
        records longer renews them with ``acknowledge(record, RENEW)``; nothing renews
        them by itself."""
        timeout = self._fetcher.lock_timeout_ms
        return timeout if timeout > 0 else None

    def acquisition_lock_deadline(self, record: ShareRecord[K, V]) -> float | None:
        """The ``time.monotonic()`` at which the acquisition lock of a record of the last
        poll(s) ends at the earliest: when the ShareFetch that acquired it was sent, plus
        the lock duration the broker gave (the broker took the lock no sooner). None for
        a record this consumer holds no longer (acknowledged, or never delivered here).
        A RENEW does not move it: the broker's answer alone knows the new lock."""
        return self._lock_ends.get(TopicPartition(record.topic, record.partition), {}).get(
            record.offset)

    def set_acknowledgement_commit_callback(self, callback: AcknowledgementCommitCallback | None
                                            ) -> None:
        """``callback({partition: offsets}, error)`` once a leader answered each
        partition's acknowledgements (None clears it)."""
        self._callback = callback

    def _on_result(self, tp: TopicPartition, offsets: set[int],
                   exc: errors.KafkaError | None) -> None:
        callback = self._callback
        if callback is None:
            return
        try:
            callback({tp: offsets}, exc)
        except Exception as err:
            self._events.emit("share", "acknowledgement commit callback raised", cause=repr(err))

    def _collect(self, *, all_records: bool) -> None:
        """Move chosen acknowledgements to the fetcher; in implicit mode every delivered
        record is accepted. ``all_records``: a poll (explicit mode wants them all)."""
        if self._explicit and all_records:
            missing = sum(1 for d in self._delivered.values() for t in d.values() if t is None)
            if missing:
                raise IllegalStateError(f"All records must be acknowledged in explicit "
                                        f"acknowledgement mode: {missing} records of the "
                                        "last poll are not")
        renew, self._renew = self._renew, {}
        if renew:
            self._fetcher.acknowledge(renew)
        if not self._explicit:
            accepted = {tp: dict.fromkeys(d, int(AcknowledgeType.ACCEPT))
                        for tp, d in self._delivered.items()}
            self._delivered, self._lock_ends = {}, {}
            self._fetcher.acknowledge(accepted)
            self._fetcher.polled(set())
            return
        chosen: dict[TopicPartition, dict[int, int]] = {}
        for tp, d in list(self._delivered.items()):
            done = {o: t for o, t in d.items()
                    if t is not None and t != AcknowledgeType.RENEW}
            if done:
                chosen[tp] = done
                ends = self._lock_ends.get(tp, {})
                for o in done:
                    del d[o]
                    ends.pop(o, None)
            if not d:
                del self._delivered[tp]
                self._lock_ends.pop(tp, None)
        self._fetcher.acknowledge(chosen)
        self._fetcher.polled(set(self._delivered))

    # -- polling --------------------------------------------------------------------------------
    async def poll(self, timeout_ms: int = 1000) -> list[ShareRecord[K, V]]:
        """The next records (at most ``max.poll.records``), waiting up to ``timeout_ms``."""
        self._check_open()
        if not self._subs.subscribed:
            raise IllegalStateError("the share consumer is not subscribed to any topics")
        await self.start()
        self._collect(all_records=True)
        deadline = time.monotonic() + timeout_ms / 1000
        fetcher = self._fetcher
        member = self._member
        while True:
            fetcher.raise_errors()
            member.last_poll = time.monotonic()
            await member.ensure_active_group(deadline - time.monotonic())
            timed = fetcher.drain(self._max_poll_records) if fetcher.records else []
            if timed:
                for lock_ends, r in timed:
                    tp = TopicPartition(r.topic, r.partition)
                    self._delivered.setdefault(tp, {})[r.offset] = None
                    self._lock_ends.setdefault(tp, {})[r.offset] = lock_ends
                fetcher.polled(set(self._delivered))
                fetcher.send()   # the acknowledgements of the last poll go now
                return [r for _, r in timed]
            fetcher.data_ready.clear()
            fetcher.send()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            try:
                async with asyncio.timeout(remaining):
                    await fetcher.data_ready.wait()
            except TimeoutError:
                fetcher.raise_errors()
                return []

    # -- committing -----------------------------------------------------------------------------
    async def commit_sync(self, timeout_ms: int | None = None) -> Results:
        """Send the acknowledgements so far and wait for the leaders' answers: each
        partition's error, or None."""
        self._check_open()
        await self.start()
        self._collect(all_records=False)
        return await self._fetcher.flush(self._api_timeout if timeout_ms is None
                                         else timeout_ms / 1000)

    def commit_async(self) -> asyncio.Task[Results]:
        """``commit_sync`` without waiting; the callback reports the outcome."""
        self._check_open()
        self._collect(all_records=False)
        task = asyncio.get_running_loop().create_task(self._fetcher.flush(self._api_timeout))
        self._commit_tasks.add(task)
        task.add_done_callback(self._commit_tasks.discard)
        return task

    # -- lifecycle --------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("this share consumer is closed")

    async def __aenter__(self) -> Self:
        return await self.start()

    async def close(self, timeout: float | None = None) -> None:
        """Send pending acknowledgements, close the share sessions, leave the group."""
        if self._closed:
            return
        limit = 30.0 if timeout is None else timeout
        if self._started:
            self._collect(all_records=False)
            if self._commit_tasks:
                await asyncio.wait(list(self._commit_tasks), timeout=limit)
            await self._fetcher.close(limit)
            await self._member.close(GroupMembershipOperation.DEFAULT)
        await super().close()
