"""The client's metadata cache: brokers, topics, partition leaders and leader epochs.

Theory of operation
-------------------
The first refresh goes through ``ConnectionPool.bootstrap()``; every later one
goes to the least-loaded broker the client already knows. Under
``metadata.recovery.strategy=rebootstrap`` (the default) the client forgets those
brokers and goes back to ``bootstrap.servers``, as Java's ``NetworkClient`` does:

* when every known broker is unreachable (KIP-899);
* when a refresh has been due for longer than
  ``metadata.recovery.rebootstrap.trigger.ms`` without an answer from any of
  them (KIP-1102): the brokers accept connections but do not answer, say. The
  clock starts when a refresh is first attempted and stops at the next answer
  applied, so a request in flight is given up at that moment rather than at
  ``request.timeout.ms``; the client then closes its data connections;
* when a Metadata v13 answer's top-level error says REBOOTSTRAP_REQUIRED (KIP-1102).

Each re-bootstrap is a ``bootstrap`` event in the client's log, with its cause.
Under ``none`` none of this happens: the client keeps asking the brokers it knows.
An answer with a top-level error leaves the cache as it was; the refresh is asked for
again.

A refresh happens:

* every ``metadata.max.age.ms`` (a background task);
* when a topic nobody asked about before is used (``ensure_topic``);
* when the recovery table says so: NOT_LEADER_OR_FOLLOWER,
  UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH... (``request_update``).

Concurrent requests for a refresh share one Metadata round trip.

Leader epochs make the cache monotonic (as Java's ``Metadata`` does since
KIP-320): a partition whose leader epoch in a response is older than the one
cached is ignored, so a lagging broker can never route the client back to an
old leader. KIP-951 hints (the new leader and epoch in a Produce or Fetch
error response) are applied at once through ``apply_leader_hint`` under the
same rule, so the retry goes straight to the new leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kaflite.client._aio import cancel_and_wait, wait_event
from kaflite.client.events import EventLog, Phase
from kaflite.client.pool import BrokerAddress, ConnectionPool, NoBrokerAvailable
from kaflite.client.recovery import error_name
from kaflite.config import ClientConfig
from kaflite.net.connection import BrokerConnection, ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import MetadataRequest, MetadataResponse
from kaflite.protocol.messages import metadata_request as mq

__all__ = ["Metadata", "PartitionMetadata", "TopicMetadata"]

ZERO_UUID = uuid.UUID(int=0)


@dataclass(slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    offline: list[int] = field(default_factory=list)
    error_code: int = 0


@dataclass(slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionMetadata]
    internal: bool = False
    error_code: int = 0


class Metadata:
    def __init__(self, config: ClientConfig, pool: ConnectionPool, events: EventLog,
                 *, all_topics: bool = False) -> None:
        self.config = config
        self.pool = pool
        self.events = events
        self.topics: dict[str, TopicMetadata] = {}
        self.topics_by_id: dict[uuid.UUID, str] = {}
        self.topic_errors: dict[str, int] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.interest: set[str] = set()
        self.all_topics = all_topics
        # MetadataRequest.allow_auto_topic_creation (an admin client never asks for it)
        self.auto_create = bool(config.get("allow.auto.create.topics", True))
        self._asked_all = False  # whether the last request built asked for every topic
        self.version = 0
        self.last_refresh = 0.0
        self._pending_reason: str | None = None
        self._refreshing: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._maintainer: asyncio.Task[None] | None = None
        self._bootstrapped = False
        # when a refresh was first attempted with no answer applied since (Java's
        # metadataAttemptStartMs): metadata.recovery.rebootstrap.trigger.ms counts from it
        self._attempt_start: float | None = None
        self._closed = False
        # called after every refresh and every applied leader hint
        self.listeners: list[Callable[[], None]] = []
        pool.on_rebootstrap_required = self.rebootstrap

    # -- queries ----------------------------------------------------------------------
    def partitions(self, topic: str) -> list[PartitionMetadata] | None:
        t = self.topics.get(topic)
        return t.partitions if t is not None else None

    def partition_count(self, topic: str) -> int | None:
        t = self.topics.get(topic)
        return len(t.partitions) if t is not None else None

    def leader(self, topic: str, partition: int) -> PartitionMetadata | None:
        t = self.topics.get(topic)
        if t is None or partition >= len(t.partitions):
            return None
        p = t.partitions[partition]
        return p if p.leader >= 0 else None

    def topic_id(self, topic: str) -> uuid.UUID:
        t = self.topics.get(topic)
        return t.topic_id if t is not None else ZERO_UUID

    @property
    def stale(self) -> bool:
        age = self.config.int("metadata.max.age.ms") / 1000
        return self._pending_reason is not None or time.monotonic() - self.last_refresh > age

    # -- refresh triggers -----------------------------------------------------------------
    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track ``topics``; True when any was new (a refresh is then requested)."""
        new = set(topics) - self.interest
        if new:
            self.interest |= new
            self.request_update(f"new topic {', '.join(sorted(new))}")
        return bool(new)

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self.interest:
            added = topics - self.interest
            self.interest = topics
            if added:
                self.request_update(f"new topic {', '.join(sorted(added))}")

    def request_update(self, reason: str) -> None:
        """Ask for a refresh soon (the recovery table's "refresh metadata")."""
        if self._pending_reason is None:
            self._pending_reason = reason
        if self._wake is not None:
            self._wake.set()

    def apply_leader_hint(self, topic: str, partition: int, leader: int, epoch: int,
                          endpoints: Iterable[tuple[int, str, int, str | None]] = ()) -> bool:
        """KIP-951: take a new leader from an error response if its epoch is newer."""
        for node_id, host, port, rack in endpoints:
            if node_id not in self.pool.brokers:
                brokers = dict(self.pool.brokers)
                brokers[node_id] = BrokerAddress(node_id, host, port, rack)
                self.pool.update_brokers(brokers)
        t = self.topics.get(topic)
        if t is None or partition >= len(t.partitions) or leader < 0:
            return False
        p = t.partitions[partition]
        if epoch <= p.leader_epoch or leader not in self.pool.brokers:
            return False
        self.events.emit("leader", f"leader of {topic}-{partition} moved {p.leader}→{leader} "
                         f"(epoch {p.leader_epoch}→{epoch})", cause="KIP-951 leader hint",
                         broker=leader, topic=topic, partition=partition)
        p.leader, p.leader_epoch = leader, epoch
        self.version += 1
        self._notify()
        return True

    def _notify(self) -> None:
        for listener in list(self.listeners):
            listener()

    # -- refreshing ----------------------------------------------------------------------
    async def refresh(self, reason: str | None = None) -> None:
        """Refresh now (sharing a round trip already under way)."""
        if reason is not None and self._pending_reason is None:
            self._pending_reason = reason
        task = self._refreshing
        if task is not None and not task.done() and self.all_topics and not self._asked_all:
            # The round trip under way asked for fewer topics than are wanted now
            # (list_topics right after start): let it land, then ask again.
            with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
                await asyncio.shield(task)
        task = self._refreshing
        if task is None or task.done():
            task = asyncio.get_running_loop().create_task(self._refresh_once())
            self._refreshing = task
        await asyncio.shield(task)

    async def maybe_refresh(self) -> None:
        if self.stale:
            await self.refresh()

    def start(self) -> None:
        if self._maintainer is None:
            self._wake = asyncio.Event()
            self._maintainer = asyncio.get_running_loop().create_task(self._maintain())

    async def _maintain(self) -> None:
        assert self._wake is not None
        backoff = self.config.int("retry.backoff.ms") / 1000
        while not self._closed:
            age = self.config.int("metadata.max.age.ms") / 1000
            due = self.last_refresh + age - time.monotonic()
            if self._pending_reason is None and due > 0:
                await wait_event(self._wake, due)
            self._wake.clear()
            if self._closed:
                return
            if self._pending_reason is None and time.monotonic() - self.last_refresh < age:
                continue
            try:
                await self.refresh()
                backoff = self.config.int("retry.backoff.ms") / 1000
            except Exception:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.config.int("retry.backoff.max.ms") / 1000)
            else:
                # Do not refresh in a tight loop if the same errors keep asking.
                await asyncio.sleep(self.config.int("retry.backoff.ms") / 1000)

    async def _refresh_once(self) -> None:
        reason = self._pending_reason
        self._pending_reason = None
        conn: BrokerConnection | None = None
        if self._attempt_start is None:
            self._attempt_start = time.monotonic()
        try:
            if self._rebootstrap_due():
                self.rebootstrap(self._trigger_cause())
            # Java checks the trigger on every poll; here the attempt is cut short there
            async with asyncio.timeout_at(self._trigger_at()):
                conn = await self._metadata_connection()
                req = self._request()
                self._asked_all = self.all_topics
                resp: MetadataResponse = await conn.request(req, version=conn.version_for(3))
        except (ConnectionClosed, OSError, TimeoutError):
            self._pending_reason = self._pending_reason or reason or "refresh failed"
            if conn is not None:
                self.pool.discard(conn, "metadata request failed")
            if self._rebootstrap_due():
                self.rebootstrap(self._trigger_cause())
            raise
        if resp.error_code:
            self._top_level_error(resp.error_code, reason)
            return
        self._apply(resp, reason)
        self._attempt_start = None
        if not self._bootstrapped:
            self._bootstrapped = True
            self.pool.adopt_bootstrap()

    def _top_level_error(self, code: int, reason: str | None) -> None:
        """Metadata v13's top-level error: nothing is applied, the refresh stays due,
        and REBOOTSTRAP_REQUIRED sends it to the bootstrap servers."""
        self._pending_reason = self._pending_reason or reason or "metadata error"
        self.events.emit("metadata", f"metadata refresh answered {error_name(code)}",
                         cause="top-level error", error_code=code)
        if code == errors.RebootstrapRequiredError.code \
                and self.config["metadata.recovery.strategy"] == "rebootstrap":
            self.rebootstrap("the broker asked for it (REBOOTSTRAP_REQUIRED)")

    def _request(self) -> MetadataRequest:
        if self.all_topics:
            topics = None
        else:
            topics = [mq.MetadataRequestTopic(topic_id=ZERO_UUID, name=t)
                      for t in sorted(self.interest)]
        return MetadataRequest(topics=topics, allow_auto_topic_creation=self.auto_create)

    async def _metadata_connection(self) -> BrokerConnection:
        if not self._bootstrapped:
            return await self.pool.bootstrap()
        conn = self.pool.least_loaded()
        if conn is not None:
            return conn
        nodes = list(self.pool.brokers)
        random.shuffle(nodes)
        for node_id in nodes:
            if self.pool.ready_at(node_id) > time.monotonic():
                continue
            with contextlib.suppress(ConnectionClosed, OSError, TimeoutError, NoBrokerAvailable):
                return await self.pool.get(node_id)
        if self.config["metadata.recovery.strategy"] == "none":
            raise NoBrokerAvailable("no known broker is reachable")
        self.rebootstrap("every known broker is unreachable", disconnect=False)
        return await self.pool.bootstrap()

    # -- re-bootstrap (KIP-899, KIP-1102) -----------------------------------------------
    def rebootstrap(self, cause: str, *, disconnect: bool = True) -> None:
        """Forget the known brokers for discovery: the next refresh goes to
        ``bootstrap.servers``. ``disconnect`` closes the data connections first, as
        Java's client does when the trigger fires ("due to client rebootstrap")."""
        self.events.emit("bootstrap", "re-bootstrap", cause=cause, phase=Phase.ACTION)
        if disconnect:
            for node_id in list(self.pool.brokers):
                self.pool.close_connection(node_id, why="client re-bootstrap")
        self.pool.forget_bootstrap()
        self._bootstrapped = False
        self._attempt_start = time.monotonic()

    def _trigger_s(self) -> float:
        return self.config.int("metadata.recovery.rebootstrap.trigger.ms") / 1000

    def _rebootstrap_due(self) -> bool:
        """Has a refresh gone unanswered for longer than the trigger? (Java's
        ``needsRebootstrap``, which only the rebootstrap strategy asks.)"""
        return (self._bootstrapped and self._attempt_start is not None
                and self.config["metadata.recovery.strategy"] == "rebootstrap"
                and time.monotonic() - self._attempt_start > self._trigger_s())

    def _trigger_cause(self) -> str:
        return (f"no metadata from any known broker for more than "
                f"{self.config.int('metadata.recovery.rebootstrap.trigger.ms')} ms "
                "(metadata.recovery.rebootstrap.trigger.ms)")

    def _trigger_at(self) -> float | None:
        """The event loop's time at which the trigger fires, if it can (None: never)."""
        if (not self._bootstrapped or self._attempt_start is None
                or self.config["metadata.recovery.strategy"] != "rebootstrap"):
            return None
        left = self._attempt_start + self._trigger_s() - time.monotonic()
        return asyncio.get_running_loop().time() + max(left, 0.0) + 0.001

    def _apply(self, resp: MetadataResponse, reason: str | None) -> None:
        brokers = {b.node_id: BrokerAddress(b.node_id, b.host, b.port, b.rack)
                   for b in resp.brokers}
        self.pool.update_brokers(brokers)
        if self.cluster_id is not None and resp.cluster_id != self.cluster_id:
            # (Java's client logs the new "Cluster ID" so)
            self.events.emit("metadata", f"cluster id {self.cluster_id}→{resp.cluster_id}",
                             cause="another cluster answers")
        self.cluster_id = self.pool.cluster_id = resp.cluster_id
        self.controller_id = resp.controller_id
        moved: list[str] = []
        seen: set[str] = set()
        for t in resp.topics:
            name = t.name or self.topics_by_id.get(t.topic_id, "")
            if not name:
                continue
            seen.add(name)
            if t.error_code:
                self.topic_errors[name] = t.error_code
                if t.error_code != errors.LeaderNotAvailableError.code:
                    self.topics.pop(name, None)
                    continue
            else:
                self.topic_errors.pop(name, None)
            old = self.topics.get(name)
            if old is not None and old.topic_id != t.topic_id and t.topic_id != ZERO_UUID \
                    and old.topic_id != ZERO_UUID:
                old = None  # the topic was deleted and re-created
            parts: list[PartitionMetadata] = []
            for p in sorted(t.partitions, key=lambda p: p.partition_index):
                new = PartitionMetadata(name, p.partition_index, p.leader_id, p.leader_epoch,
                                        list(p.replica_nodes), list(p.isr_nodes),
                                        list(p.offline_replicas), p.error_code)
                prev = (old.partitions[p.partition_index]
                        if old is not None and p.partition_index < len(old.partitions) else None)
                if prev is not None and 0 <= new.leader_epoch < prev.leader_epoch:
                    # Stale metadata from a lagging broker: keep what we know (KIP-320).
                    parts.append(prev)
                    self._pending_reason = self._pending_reason or "stale leader epoch"
                    continue
                if prev is not None and prev.leader != new.leader:
                    moved.append(f"{name}-{new.partition} {prev.leader}→{new.leader}")
                parts.append(new)
            self.topics[name] = TopicMetadata(name, t.topic_id, parts, t.is_internal)
            if t.topic_id != ZERO_UUID:
                self.topics_by_id[t.topic_id] = name
        if self.all_topics:
            for gone in set(self.topics) - seen:
                del self.topics[gone]
        self.version += 1
        self.last_refresh = time.monotonic()
        msg = "metadata refresh" + (f" ({reason})" if reason else "")
        detail = f"{len(brokers)} brokers, {len(resp.topics)} topics"
        if moved:
            detail += "; leaders moved: " + ", ".join(moved)
        self.events.emit("metadata", msg, cause=detail, reason=reason)
        self._notify()

    # -- waiting for topics ---------------------------------------------------------------------
    async def ensure_topic(self, topic: str, timeout: float) -> TopicMetadata:
        """Metadata for ``topic``, refreshing until it is known or ``timeout`` passes."""
        t = self.topics.get(topic)
        if t is not None and topic in self.interest:
            return t
        self.add_topics([topic])
        deadline = time.monotonic() + timeout
        delay = self.config.int("retry.backoff.ms") / 1000
        while True:
            unreachable: BaseException | None = None
            try:
                await self.refresh(f"unknown topic {topic}")
            except (ConnectionClosed, OSError, TimeoutError) as exc:
                unreachable = exc   # no broker answers now: retry until the deadline,
                # as Java's waitOnMetadata does for max.block.ms
            t = self.topics.get(topic)
            if t is not None and t.partitions:
                return t
            code = self.topic_errors.get(topic)
            if code is not None and not errors.error_class(code).retriable \
                    and code != errors.UnknownTopicOrPartitionError.code:
                raise errors.error_for_code(code, f"topic {topic}")
            if time.monotonic() + delay > deadline:
                name = error_name(code) if code else \
                    f"no broker answered: {unreachable!r}" if unreachable else "not in metadata"
                raise errors.UnknownTopicOrPartitionError(
                    f"topic {topic} not available after {timeout:.1f}s ({name})")
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.config.int("retry.backoff.max.ms") / 1000)

    async def close(self) -> None:
        self._closed = True
        await cancel_and_wait(self._maintainer, self._refreshing)
