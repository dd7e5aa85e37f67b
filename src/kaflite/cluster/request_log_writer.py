"""The brokers' request log: ``__kaflite_requests``, written off the request path.

Opt-in, with ``kaflite.request.log.enable=true`` (``kaflite up --request-log``).
Then the cluster creates the topic once its brokers are up (``ensure_topic``;
``kaflite.request.log.num.partitions``, 0 meaning one per broker, so each broker
leads one; ``...replication.factor``; ``...retention.ms``), and each broker keeps
a ``BrokerRequestLog``:

* the request path (``network.ServerConnection``) only builds the record
  (``request_log.build``) and adds it to a bounded buffer
  (``kaflite.request.log.buffer.records``): when it is full the record is dropped
  and counted, the request never waits;
* every ``kaflite.request.log.flush.ms`` a task appends what is buffered to the
  partitions of the topic this broker leads, through the coordinators' append
  path (``_internal_log.PartitionWriter``: a leader append, then the followers
  replicate it as any partition). A client's records go to one of them by a hash
  of its key, so they stay in order while leadership stays. A broker that leads
  none keeps its records buffered (and drops what no longer fits) until it does;
* a graceful stop flushes what is left; a kill loses it, as a crashed process would.

The log's own writes are appends, not requests, and requests that touch only the
log are not logged (``request_log.skipped``): nothing recurses.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kaflite.cluster._internal_log import PartitionWriter
from kaflite.cluster.observe import ConnectionRecord
from kaflite.cluster.request_log import (
    NO_MARK,
    REQUEST_LOG_TOPIC,
    GroupMark,
    Pending,
    RequestBuffer,
    Touched,
    pending,
    skipped,
)
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.controller import Controller

__all__ = ["ENABLE", "REQUEST_LOG_DEFAULTS", "BrokerRequestLog", "enabled", "ensure_topic"]

log = logging.getLogger("kaflite.cluster.request_log")

ENABLE = "kaflite.request.log.enable"
REQUEST_LOG_DEFAULTS: dict[str, str] = {
    ENABLE: "false",
    "kaflite.request.log.num.partitions": "0",          # 0: one per broker
    "kaflite.request.log.replication.factor": "1",
    "kaflite.request.log.retention.ms": "86400000",     # a day
    "kaflite.request.log.buffer.records": "10000",
    "kaflite.request.log.flush.ms": "500",
}
BATCH_RECORDS = 500          # records per appended batch
WRITE_TIMEOUT_MS = 5000


def _setting(props: Mapping[str, str], name: str) -> str:
    return props.get(name, REQUEST_LOG_DEFAULTS[name])


def enabled(props: Mapping[str, str]) -> bool:
    return _setting(props, ENABLE).lower() == "true"


def ensure_topic(controller: Controller, props: Mapping[str, str]) -> bool:
    """Create ``__kaflite_requests`` if the log is on and it does not exist yet."""
    if not enabled(props) or REQUEST_LOG_TOPIC in controller.topics:
        return False
    live = len(controller.live_brokers())
    if not live:
        return False
    partitions = int(_setting(props, "kaflite.request.log.num.partitions")) or live
    rf = max(1, min(int(_setting(props, "kaflite.request.log.replication.factor")), live))
    # A log of fewer replicas than the cluster's min.insync.replicas could take no write
    # (NOT_ENOUGH_REPLICAS): it asks for as many in-sync replicas as it has, at most.
    min_isr = min(rf, int(props.get("min.insync.replicas", "1")))
    configs = {"retention.ms": _setting(props, "kaflite.request.log.retention.ms"),
               "cleanup.policy": "delete", "min.insync.replicas": str(min_isr)}
    try:
        controller.create_topic(REQUEST_LOG_TOPIC,
                                controller.assign_replicas(partitions, rf, start=0), configs)
    except errors.TopicAlreadyExistsError:
        return False
    log.info("created %s with %s partitions, replication factor %s", REQUEST_LOG_TOPIC,
             partitions, rf)
    return True


class BrokerRequestLog:
    """One broker's buffer of request records and the task that writes them."""

    def __init__(self, broker: Broker, props: Mapping[str, str]) -> None:
        self.broker = broker
        self.buffer = RequestBuffer(int(_setting(props, "kaflite.request.log.buffer.records")))
        self.flush_s = int(_setting(props, "kaflite.request.log.flush.ms")) / 1000
        self._task: asyncio.Task[None] | None = None
        self._refusals: set[int] = set()      # error codes already logged

    # -- the request path ---------------------------------------------------------------
    def record(self, info: ConnectionRecord, api_key: int, version: int, latency_ms: float,
               throttle_ms: int, touched: Touched, mark: GroupMark = NO_MARK) -> None:
        if skipped(info, api_key, touched):
            return
        self.buffer.add(pending(info, api_key, version, latency_ms, throttle_ms, touched,
                                mark=mark))

    # -- the writer ----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            try:
                await self.flush(wait=False)
            except Exception:    # the log must never take the broker down
                log.exception("broker %s: request log flush failed", self.broker.node_id)

    def _led(self) -> list[int]:
        return sorted(i for (t, i), p in self.broker.partitions.items()
                      if t == REQUEST_LOG_TOPIC and p.is_leader)

    async def flush(self, wait: bool = True) -> int:
        """Append what is buffered to the partitions this broker leads; the number of
        records appended. ``wait``: until the followers have them (shutdown)."""
        led = self._led()
        if not led or not len(self.buffer):
            return 0
        records = self.buffer.drain()
        by_partition: dict[int, list[tuple[Pending, tuple[bytes, bytes]]]] = {}
        for r in records:
            encoded = r.encode()
            by_partition.setdefault(led[zlib.crc32(encoded[0]) % len(led)], []).append(
                (r, encoded))
        written = 0
        pending: list[asyncio.Future[int]] = []
        for index, recs in by_partition.items():
            p = self.broker.partitions.get((REQUEST_LOG_TOPIC, index))
            if p is None or not p.is_leader:
                self.buffer.put_back(r for r, _ in recs)
                continue
            writer = PartitionWriter(self.broker, REQUEST_LOG_TOPIC, index, p.leader_epoch,
                                     WRITE_TIMEOUT_MS)
            for start in range(0, len(recs), BATCH_RECORDS):
                chunk = recs[start:start + BATCH_RECORDS]
                fut = writer([e for _, e in chunk])
                if fut.done() and fut.result():    # refused at once
                    self._refused(index, fut.result())
                    self.buffer.put_back(r for r, _ in chunk)
                    continue
                written += len(chunk)
                pending.append(fut)
        self.buffer.written += written
        if wait and pending:
            await asyncio.wait(pending, timeout=WRITE_TIMEOUT_MS / 1000)
        return written

    def _refused(self, index: int, code: int) -> None:
        """Not led any more is routine; anything else is said once per error."""
        if code == errors.NotCoordinatorError.code or code in self._refusals:
            return
        self._refusals.add(code)
        log.warning("broker %s: %s-%s refuses the request log's records (%s); they wait in "
                    "the buffer", self.broker.node_id, REQUEST_LOG_TOPIC, index,
                    errors.error_class(code).name)

    async def close(self) -> None:
        """Stop the writer and flush what is left (a graceful stop)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            await self.flush(wait=True)
        except Exception:
            log.exception("broker %s: final request log flush failed", self.broker.node_id)

    def kill(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
