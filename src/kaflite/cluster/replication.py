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

The fetcher keeps an incremental fetch session (KIP-227, ``kaflite.net.fetch_session``)
with the leader, as Kafka's does: after the first full request, a Fetch names only
the partitions whose position (or epoch, or log start) moved since the last one,
and the leader answers only partitions with news. The fetcher tracks which of its
partitions changed (an append, a truncation, a new epoch, a partition added,
dropped or delayed), so a follower of thousands of idle partitions does
O(changed) work per fetch, not O(partitions); every ``RECHECK_S`` it compares
them all, in case something moved them behind its back.

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
import uuid
from typing import TYPE_CHECKING, NamedTuple

from kaflite.broker_clients import fetcher_client_id
from kaflite.cluster.acl import inter_broker
from kaflite.net.connection import BrokerConnection, ConnectionClosed
from kaflite.net.fetch_session import FetchSession
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
RECHECK_S = 5.0
RECHECK_CHUNK = 512    # partitions compared per request in a recheck pass


class ReplicaWanted(NamedTuple):
    """What a replica's Fetch asks of one partition (resent when any field changes)."""

    topic_id: uuid.UUID
    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int


def wanted_of(p: Partition) -> ReplicaWanted:
    return ReplicaWanted(p.topic_id, p.log_end_offset, p.leader_epoch, p.log.latest_epoch,
                         p.log_start_offset)


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
        self.session: FetchSession[tuple[str, int], ReplicaWanted] = FetchSession(leader_id)
        self._recheck_at = 0.0
        self._rechecking: list[tuple[str, int]] = []   # the pass's partitions still to compare

    def add(self, p: Partition) -> None:
        self.delayed.pop(p.tp, None)
        self.partitions[p.tp] = p
        self.session.want(p.tp, wanted_of(p))
        self.wakeup.set()

    def remove(self, p: Partition) -> None:
        self.partitions.pop(p.tp, None)
        self.delayed.pop(p.tp, None)
        self.session.drop(p.tp)

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
            self._undelay()
            if not self.session.wanted:
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
                self.session.reset()
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
            *address, client_id=fetcher_client_id(self.broker.node_id),
            ssl_context=tls, sasl=sasl,
            node_id=self.leader_id, request_timeout_ms=30_000,
        ).open())
        return self.conn

    def _undelay(self) -> None:
        """Partitions whose back-off ended are wanted again."""
        if not self.delayed:
            return
        now = time.monotonic()
        for tp in [tp for tp, until in self.delayed.items() if until <= now]:
            del self.delayed[tp]
            p = self.partitions.get(tp)
            if p is not None:
                self.session.want(tp, wanted_of(p))

    def _delay(self, p: Partition) -> None:
        self.delayed[p.tp] = time.monotonic() + \
            self.broker.config.int("replica.fetch.backoff.ms") / 1000
        self.session.drop(p.tp)

    def _recheck(self) -> None:
        """Every RECHECK_S: compare every partition, in case one moved unnoticed;
        RECHECK_CHUNK of them a request (at 20,000 partitions a pass over a follower's
        13,000 in one go held the loop the brokers share, issue 36)."""
        if not self._rechecking:
            now = time.monotonic()
            if now < self._recheck_at:
                return
            self._recheck_at = now + RECHECK_S
            self._rechecking = list(self.partitions)
        chunk = self._rechecking[-RECHECK_CHUNK:]
        del self._rechecking[-RECHECK_CHUNK:]
        for tp in chunk:
            p = self.partitions.get(tp)
            if p is not None and tp not in self.delayed:
                self.session.want(tp, wanted_of(p))

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
        req = self._request(version)
        session = self.session
        session.sent_request()
        try:
            resp: FetchResponse = await conn.request(req, version=version)
        except BaseException:
            session.reset()
            raise
        session.handle(resp.error_code, resp.session_id)
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
                sent = session.sent.get(target.tp)
                await self._apply(conn, target, pd, sent.leader_epoch if sent else -1)
                if target.tp in self.partitions and target.tp not in self.delayed:
                    session.want(target.tp, wanted_of(target))

    def _request(self, version: int) -> FetchRequest:
        """The next Fetch: what changed since the last one (all of it without a session)."""
        self._recheck()
        cfg = self.broker.config
        max_bytes = cfg.int("replica.fetch.max.bytes")
        send, forget, _full = self.session.build()
        by_topic: dict[str, list[fq.FetchPartition]] = {}
        ids: dict[str, uuid.UUID] = {}
        for (name, index), w in send.items():
            ids[name] = w.topic_id
            by_topic.setdefault(name, []).append(fq.FetchPartition(
                partition=index, current_leader_epoch=w.leader_epoch,
                fetch_offset=w.fetch_offset,
                last_fetched_epoch=w.last_fetched_epoch if version >= 12 else -1,
                log_start_offset=w.log_start_offset, partition_max_bytes=max_bytes))
        forgotten: dict[str, list[int]] = {}
        for (name, index), w in forget.items():
            ids[name] = w.topic_id
            forgotten.setdefault(name, []).append(index)
        node = self.broker.node_id
        return FetchRequest(
            replica_id=node if version <= 14 else -1,
            replica_state=fq.ReplicaState(node, -1) if version >= 15 else fq.ReplicaState(),
            max_wait_ms=cfg.int("replica.fetch.wait.max.ms"),
            min_bytes=1,
            max_bytes=max(max_bytes, 10 * 1024 * 1024),
            isolation_level=0,
            session_id=self.session.session_id,
            session_epoch=self.session.epoch if version >= 7 else -1,
            topics=[fq.FetchTopic(topic=name if version < 13 else "", topic_id=ids[name],
                                  partitions=parts) for name, parts in by_topic.items()],
            forgotten_topics_data=[
                fq.ForgottenTopic(topic=name if version < 13 else "", topic_id=ids[name],
                                  partitions=parts) for name, parts in forgotten.items()],
        )

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
                self._delay(p)
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
