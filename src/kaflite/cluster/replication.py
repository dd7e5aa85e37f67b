"""Replica fetchers: how followers copy the leader's log, with Kafka's Fetch protocol.

A broker runs one fetcher per leader it follows. The fetcher keeps a real TCP
connection to that leader (a ``BrokerConnection``, the same class the client
uses) and loops: one Fetch for all its partitions, each at the follower's log
end offset, with the follower's replica id (``ReplicaState`` in v15+), its
current leader epoch and the epoch of its last fetched batch. The leader
long-polls it like any fetch.

What comes back is applied as it lies:

* records are appended as they are, offsets and epochs included;
* the high watermark the leader reports is adopted, capped by the local log end;
* a leader log start offset beyond ours (retention, DeleteRecords) moves ours;
* ``diverging_epoch`` means our tail was written under a leader that lost it:
  we truncate to where the epochs agree, then fetch again (KIP-595's
  Fetch-based truncation, replacing the old OffsetForLeaderEpoch round trip);
* OFFSET_OUT_OF_RANGE below the leader's log start: restart our log there.

Leadership errors are not acted on here: the controller will tell the broker
who leads now, and the broker moves the partition to another fetcher. Until it
does, a partition with an error is left out of the fetches for
``replica.fetch.backoff.ms`` (Kafka's delayed partitions), so that a leader that
keeps refusing it is not asked again in a tight loop; being added to a fetcher
again (a leadership change) ends the delay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from kaflite.cluster.acl import inter_broker
from kaflite.net.connection import BrokerConnection, ConnectionClosed
from kaflite.protocol import KafkaError, ProtocolError, errors
from kaflite.protocol.messages import FetchRequest, FetchResponse, ListOffsetsRequest
from kaflite.protocol.messages import fetch_request as fq
from kaflite.protocol.messages import fetch_response as fr
from kaflite.protocol.messages import list_offsets_request as loq

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition

__all__ = ["ReplicaFetcher"]

log = logging.getLogger("kaflite.cluster.replication")

EARLIEST = -2


class ReplicaFetcher:
    def __init__(self, broker: Broker, leader_id: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.task: asyncio.Task[None] | None = None
        self.conn: BrokerConnection | None = None
        self.wakeup = asyncio.Event()
        self.running = False
        self.delayed: dict[tuple[str, int], float] = {}   # partition -> monotonic time

    def add(self, p: Partition) -> None:
        self.delayed.pop(p.tp, None)
        self.partitions[p.tp] = p
        self.wakeup.set()

    def remove(self, p: Partition) -> None:
        self.partitions.pop(p.tp, None)
        self.delayed.pop(p.tp, None)

    def start(self) -> None:
        self.running = True
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self.running = False
        if self.conn is not None:
            self.conn.close()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task

    # -- the loop ------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = 0.05
        while self.running:
            if not self._fetchable():
                self.wakeup.clear()
                wait = self._next_undelay()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wakeup.wait(), wait)
                continue
            try:
                conn = await self._connection()
                await self._fetch_once(conn)
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except (ConnectionClosed, OSError, TimeoutError, ProtocolError, KafkaError) as exc:
                log.debug("broker %s fetching from %s: %r", self.broker.node_id,
                          self.leader_id, exc)
                if self.conn is not None:
                    self.conn.close()
                    self.conn = None
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)

    async def _connection(self) -> BrokerConnection:
        if self.conn is not None and self.conn.connected:
            return self.conn
        info = self.broker.controller.brokers.get(self.leader_id)
        if info is None or not info.alive or info.fenced_replication \
                or self._isolated():
            raise ConnectionClosed(f"leader {self.leader_id} unreachable")
        address = info.endpoint(self.broker.inter_broker_listener)
        if address is None:
            raise ConnectionClosed(f"leader {self.leader_id} has no inter-broker listener")
        tls, sasl = self.broker.inter_broker_security()
        self.conn = inter_broker(await BrokerConnection(
            *address, client_id=f"replica-fetcher-{self.broker.node_id}",
            ssl_context=tls, sasl=sasl,
            node_id=self.leader_id, request_timeout_ms=30_000,
        ).open())
        return self.conn

    def _fetchable(self) -> list[Partition]:
        if not self.delayed:
            return list(self.partitions.values())
        now = time.monotonic()
        for tp in [tp for tp, until in self.delayed.items() if until <= now]:
            del self.delayed[tp]
        return [p for tp, p in self.partitions.items() if tp not in self.delayed]

    def _next_undelay(self) -> float | None:
        """Seconds until a delayed partition may be fetched again (None: none is)."""
        pending = [until for tp, until in self.delayed.items() if tp in self.partitions]
        return max(min(pending) - time.monotonic(), 0.001) if pending else None

    def _isolated(self) -> bool:
        me = self.broker.controller.brokers.get(self.broker.node_id)
        return me is not None and me.fenced_replication

    async def _fetch_once(self, conn: BrokerConnection) -> None:
        if self._isolated():
            raise ConnectionClosed("replication isolated by fault injection")
        version = conn.version_for(1)
        cfg = self.broker.config
        by_topic: dict[str, list[Partition]] = {}
        sent_epochs: dict[tuple[str, int], int] = {}
        for p in self._fetchable():
            by_topic.setdefault(p.topic, []).append(p)
            sent_epochs[p.tp] = p.leader_epoch
        topics = []
        for name, parts in by_topic.items():
            topics.append(fq.FetchTopic(
                topic=name if version < 13 else "",
                topic_id=parts[0].topic_id,
                partitions=[fq.FetchPartition(
                    partition=p.index,
                    current_leader_epoch=p.leader_epoch,
                    fetch_offset=p.log_end_offset,
                    last_fetched_epoch=p.log.latest_epoch if version >= 12 else -1,
                    log_start_offset=p.log_start_offset,
                    partition_max_bytes=cfg.int("replica.fetch.max.bytes"),
                ) for p in parts],
            ))
        node = self.broker.node_id
        req = FetchRequest(
            replica_id=node if version <= 14 else -1,
            replica_state=fq.ReplicaState(node, -1) if version >= 15 else fq.ReplicaState(),
            max_wait_ms=cfg.int("replica.fetch.wait.max.ms"),
            min_bytes=1,
            max_bytes=max(cfg.int("replica.fetch.max.bytes"), 10 * 1024 * 1024),
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=topics,
        )
        resp: FetchResponse = await conn.request(req, version=version)
        if resp.error_code:
            raise errors.error_for_code(resp.error_code, "replica fetch")
        for t in resp.responses:
            name = t.topic
            if version >= 13:
                topic = self.broker.controller.topics_by_id.get(t.topic_id)
                if topic is None:
                    continue
                name = topic.name
            for pd in t.partitions:
                target = self.partitions.get((name, pd.partition_index))
                if target is None:
                    continue  # moved to another fetcher while we waited
                await self._apply(conn, target, pd, sent_epochs.get(target.tp, -1))

    async def _apply(self, conn: BrokerConnection, p: Partition, pd: fr.PartitionData,
                     sent_epoch: int) -> None:
        plog = p.log
        code = pd.error_code
        if code == errors.OffsetOutOfRangeError.code:
            await self._reset_out_of_range(conn, p)
            return
        if code:
            # Leadership changes arrive from the controller; until one does, wait. One
            # that came while this Fetch was out (a new epoch) is fetched at once.
            if p.leader_epoch == sent_epoch:
                self.delayed[p.tp] = time.monotonic() + \
                    self.broker.config.int("replica.fetch.backoff.ms") / 1000
            return
        diverging = pd.diverging_epoch
        if diverging.epoch != -1 or diverging.end_offset != -1:
            _, ours = plog.end_offset_for_epoch(diverging.epoch)
            target = min(diverging.end_offset, ours if ours >= 0 else diverging.end_offset)
            if target < p.log_end_offset:
                log.info("broker %s truncates %s-%s to %s (diverged at epoch %s)",
                         self.broker.node_id, p.topic, p.index, target, diverging.epoch)
            plog.truncate_to(max(target, p.log_start_offset))
            return
        records = pd.records
        if records:
            plog.append_as_follower(records)
            self.broker.metrics.replication_bytes_in += len(records)
        leader_start = pd.log_start_offset
        if leader_start > p.log_start_offset and leader_start <= p.log_end_offset:
            plog.delete_records_before(leader_start)
        p.set_follower_hw(pd.high_watermark)

    async def _reset_out_of_range(self, conn: BrokerConnection, p: Partition) -> None:
        req = ListOffsetsRequest(replica_id=self.broker.node_id, topics=[loq.ListOffsetsTopic(
            p.topic, [loq.ListOffsetsPartition(p.index, p.leader_epoch, EARLIEST)])])
        resp = await conn.request(req)
        part = resp.topics[0].partitions[0]
        if part.error_code:
            return
        leader_start = part.offset
        if leader_start > p.log_end_offset:
            plog = p.log
            plog.truncate_fully_and_start_at(leader_start)
