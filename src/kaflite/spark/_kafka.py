"""The Kafka side of the data source: a client per process, and the driver's offset reader.

Spark runs the data source in several processes: the driver's planner, the
streaming source runner (one per query, long-lived) and the executors'
Python workers (reused from task to task). Each keeps its kaflite clients in
a process-wide cache, keyed by configuration, on one private event-loop
thread, so a worker that reads a hundred offset ranges connects to each
broker once.

``OffsetReader`` is the driver's view (Spark's ``KafkaOffsetReaderAdmin``):
which partitions the subscription covers now, and their earliest, latest or
by-timestamp offsets, fetched with ListOffsets from the partition leaders.
Every call is retried ``fetchOffset.numRetries`` times, ``fetchOffset.
retryIntervalMs`` apart, as Spark does. It never joins a group and never
commits an offset.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from kaflite._loop import SharedLoop
from kaflite.client import BaseClient, TopicPartition
from kaflite.client.consumer import EARLIEST, LATEST, list_offsets
from kaflite.client.recovery import backoff_delay
from kaflite.spark.options import (
    EARLIEST as SPEC_EARLIEST,
)
from kaflite.spark.options import (
    LATEST as SPEC_LATEST,
)
from kaflite.spark.options import (
    Assign,
    EarliestOffsets,
    GlobalTimestamp,
    LatestOffsets,
    OffsetSpec,
    SourceOptions,
    SpecificOffsets,
    SpecificTimestamps,
    Subscribe,
    SubscribePattern,
    client_config,
)

__all__ = ["DataLossError", "OffsetReader", "SparkKafkaClient", "client_for", "run", "touch"]

log = logging.getLogger("kaflite.spark")
T = TypeVar("T")

INSTRUCTION_FAIL_TRUE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "false".')
INSTRUCTION_FAIL_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".')


class DataLossError(RuntimeError):
    """Records the query needed are gone (Spark's IllegalStateException on data loss)."""


def report_data_loss(fail: bool, message: str) -> None:
    """Raise (failOnDataLoss=true) or log a warning (false), with Spark's instructions."""
    if fail:
        raise DataLossError(f"{message}. {INSTRUCTION_FAIL_TRUE}")
    log.warning("%s. %s", message, INSTRUCTION_FAIL_FALSE)


# -- one event loop thread per process ----------------------------------------------------
_lock = threading.Lock()
_LOOP = SharedLoop("kaflite-spark")     # every client of this process runs on it
_clients: OrderedDict[tuple[tuple[str, str], ...], SparkKafkaClient] = OrderedDict()
_last_used: dict[tuple[tuple[str, str], ...], float] = {}
CACHE_CAPACITY = 64        # clients kept per process (spark.kafka.consumer.cache.capacity)
CACHE_TIMEOUT_S = 300.0    # idle time before one is closed (spark.kafka.consumer.cache.timeout)


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    return _LOOP.get().submit(coro)


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    return submit(coro).result(timeout)


class SparkKafkaClient(BaseClient):
    """The connections, metadata and config the data source reads with (no group)."""

    ROLE = "consumer"


def client_for(config: Mapping[str, object]) -> SparkKafkaClient:
    """The process's started client for ``config`` (created on first use).

    Clients stay cached from task to task and from query to query, as Spark's
    executors keep their consumers: one that has not been asked for in
    ``CACHE_TIMEOUT_S``, or the least recently used beyond ``CACHE_CAPACITY``,
    is closed (Spark's ``spark.kafka.consumer.cache.timeout`` and ``.capacity``
    defaults).
    """
    key = tuple(sorted((k, str(v)) for k, v in config.items()))
    with _lock:
        client = _clients.get(key)
        if client is not None and client._closed:
            del _clients[key]
            client = None
        if client is not None:
            _used(key)
    _evict(keep=key)
    if client is not None:
        return client

    async def make() -> SparkKafkaClient:
        # Spark's consumers and admin clients connect lazily and retry: a task or a
        # planning step that begins while no broker answers waits, up to
        # default.api.timeout.ms, for one to come back.
        deadline: float | None = None
        for attempt in itertools.count(1):
            c = SparkKafkaClient(dict(config))
            try:
                await c.start()
                return c
            except (OSError, TimeoutError):      # ConnectionClosed, NoBrokerAvailable
                await c.close()
                cfg = c.config
                if deadline is None:
                    deadline = time.monotonic() + cfg.int("default.api.timeout.ms") / 1000
                delay = backoff_delay(cfg.int("retry.backoff.ms"),
                                      cfg.int("retry.backoff.max.ms"), attempt)
                if time.monotonic() + delay > deadline:
                    raise
                log.info("no broker answers (attempt %d); retrying", attempt)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    client = run(make())
    with _lock:
        _clients[key] = client
        _used(key)
    _evict(keep=key)
    return client


def touch(client: SparkKafkaClient) -> None:
    """Note that ``client`` is in use (a long task keeps its client from expiring)."""
    with _lock:
        for key, c in _clients.items():
            if c is client:
                _used(key)
                return


def _used(key: tuple[tuple[str, str], ...]) -> None:
    """Mark ``key`` the most recently used (caller holds the lock)."""
    _clients.move_to_end(key)
    _last_used[key] = time.monotonic()


def _evict(keep: tuple[tuple[str, str], ...]) -> None:
    """Close the clients idle too long, or the least recently used beyond the capacity."""
    now = time.monotonic()
    stale = []
    with _lock:
        for key in list(_clients):     # least recently used first
            expired = now - _last_used.get(key, now) > CACHE_TIMEOUT_S
            if key != keep and (expired or len(_clients) > CACHE_CAPACITY):
                stale.append(_clients.pop(key))
                _last_used.pop(key, None)
    for old in stale:
        submit(old.close())           # no need to wait for it


def close_client(client: SparkKafkaClient) -> None:
    with _lock:
        for key, c in list(_clients.items()):
            if c is client:
                del _clients[key]
                _last_used.pop(key, None)
    run(client.close())


# -- the driver's offset reader -------------------------------------------------------------
class OffsetReader:
    """Partitions and offsets for a subscription, as the driver needs them."""

    def __init__(self, opts: SourceOptions, role: str = "driver-0") -> None:
        self.opts = opts
        self.config = client_config(opts.kafka_params, "consumer", opts.client_id(role),
                                    allow_auto_create_topics=False)
        self._client: SparkKafkaClient | None = None

    @property
    def client(self) -> SparkKafkaClient:
        if self._client is None or self._client._closed:
            self._client = client_for(self.config)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            close_client(self._client)
            self._client = None

    def _retrying(self, what: str, fn: Callable[[], T]) -> T:
        attempts = max(self.opts.fetch_offset_num_retries, 1)
        for attempt in range(1, attempts + 1):
            try:
                return fn()
            except Exception as exc:
                if attempt >= attempts:
                    raise
                log.warning("Error in attempt %d getting Kafka %s: %r", attempt, what, exc)
                time.sleep(self.opts.fetch_offset_retry_interval_ms / 1000)
        raise AssertionError("unreachable")

    # -- partitions --------------------------------------------------------------------------
    def partitions(self) -> set[TopicPartition]:
        """The partitions the subscription covers right now."""
        strategy = self.opts.strategy
        if isinstance(strategy, Assign):
            return set(strategy.partitions)
        return self._retrying("partitions", lambda: run(self._discover(self.client)))

    async def _refresh(self, client: SparkKafkaClient) -> None:
        """A metadata round trip, retried until ``default.api.timeout.ms`` while no broker
        answers, as Spark's admin client retries (``fetchOffset.numRetries`` comes on top)."""
        cfg = client.config
        deadline = time.monotonic() + cfg.int("default.api.timeout.ms") / 1000
        for attempt in itertools.count(1):
            try:
                await client.metadata.refresh("partition discovery")
                return
            except (OSError, TimeoutError):      # ConnectionClosed, NoBrokerAvailable
                delay = backoff_delay(cfg.int("retry.backoff.ms"),
                                      cfg.int("retry.backoff.max.ms"), attempt)
                if time.monotonic() + delay > deadline:
                    raise
                await asyncio.sleep(delay)

    async def _discover(self, client: SparkKafkaClient) -> set[TopicPartition]:
        md = client.metadata
        strategy = self.opts.strategy
        if isinstance(strategy, Subscribe):
            md.add_topics(strategy.topics)
            await self._refresh(client)
            names: Iterable[str] = strategy.topics
        else:
            assert isinstance(strategy, SubscribePattern)
            md.all_topics = True
            await self._refresh(client)
            names = [n for n, t in md.topics.items()
                     if not t.internal and strategy.matches(n)]
        out: set[TopicPartition] = set()
        for name in names:
            t = md.topics.get(name)
            if t is not None:
                out.update(TopicPartition(name, p.partition) for p in t.partitions)
        return out

    # -- offsets -------------------------------------------------------------------------------
    def _list(self, query: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        if not query:
            return {}
        timeout = self.client.config.int("default.api.timeout.ms") / 1000

        def ask() -> dict[TopicPartition, int | None]:
            client = self.client  # (connects on first use: not inside the coroutine)
            found = run(list_offsets(client, dict(query), self.opts.isolation_level, timeout))
            return {tp: (None if v is None else v.offset) for tp, v in found.items()}

        return self._retrying("offsets", ask)

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: off if off is not None else 0
                for tp, off in self._list(dict.fromkeys(tps, EARLIEST)).items()}

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: off if off is not None else 0
                for tp, off in self._list(dict.fromkeys(tps, LATEST)).items()}

    def resolve(self, spec: OffsetSpec, is_start: bool,
                partitions: set[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Concrete offsets for every partition of the subscription."""
        tps = self.partitions() if partitions is None else partitions
        if isinstance(spec, EarliestOffsets):
            return self.earliest(tps)
        if isinstance(spec, LatestOffsets):
            return self.latest(tps)
        if isinstance(spec, SpecificOffsets):
            given = spec.offsets
            if set(given) != tps:
                raise AssertionError(
                    "If startingOffsets contains specific offsets, you must specify all "
                    "TopicPartitions.\nUse -1 for latest, -2 for earliest.\n"
                    f"Specified: {_tps(given)} Assigned: {_tps(tps)}")
            out = dict(given)
            out.update(self.earliest(tp for tp, o in given.items() if o == SPEC_EARLIEST))
            out.update(self.latest(tp for tp, o in given.items() if o == SPEC_LATEST))
            return out
        if isinstance(spec, SpecificTimestamps):
            if set(spec.timestamps) != tps:
                raise AssertionError(
                    "If starting/endingOffsetsByTimestamp contains specific offsets, you must "
                    f"specify all topics. Specified: {_tps(spec.timestamps)} "
                    f"Assigned: {_tps(tps)}")
            return self._by_timestamp(dict(spec.timestamps), is_start, spec.strategy)
        assert isinstance(spec, GlobalTimestamp)
        return self._by_timestamp(dict.fromkeys(tps, spec.timestamp), is_start, spec.strategy)

    def _by_timestamp(self, query: dict[TopicPartition, int], is_start: bool,
                      strategy: str) -> dict[TopicPartition, int]:
        found = self._list(query)
        missing = [tp for tp, off in found.items() if off is None]
        if missing and is_start and strategy == "error":
            tp = sorted(missing)[0]
            raise ValueError(f"No offset matched from request of topic-partition {tp} and "
                             f"timestamp {query[tp]}.")
        # No record at or after the timestamp: start (strategy latest) or end at latest.
        out = {tp: off for tp, off in found.items() if off is not None}
        out.update(self.latest(missing))
        return out


def _tps(tps: Iterable[TopicPartition]) -> str:
    return "Set(" + ", ".join(sorted(map(str, tps))) + ")"
