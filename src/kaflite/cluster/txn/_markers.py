"""Sending COMMIT/ABORT markers to the leaders of a transaction's partitions.

Once a transaction is PrepareCommit or PrepareAbort in the log, its outcome is
decided; what is left is to tell every partition it touched. The coordinator
sends WriteTxnMarkers to each partition's leader over an ordinary connection
(one per broker, opened on first use), as Kafka's marker channel does, and
retries what failed the way Kafka's completion handler does:

* leadership moved or replicas are missing (NOT_LEADER_OR_FOLLOWER,
  NOT_ENOUGH_REPLICAS, a timeout, a lost connection): look the leader up again
  and resend, with a growing backoff;
* the topic is gone: nothing is left to mark there;
* INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED: a newer producer
  epoch or a newer coordinator owns the transaction; stop, without completing.

``send_markers`` returns True once every partition has its marker.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflite.broker_clients import marker_sender_client_id
from kaflite.cluster._peers import PeerConnections
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import KafkaError, ProtocolError, errors
from kaflite.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kaflite.protocol.messages import write_txn_markers_request as wq

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["MarkerChannel"]

log = logging.getLogger("kaflite.cluster.txn")

_RETRY = {
    errors.NotLeaderOrFollowerError.code, errors.UnknownTopicOrPartitionError.code,
    errors.NotEnoughReplicasError.code, errors.NotEnoughReplicasAfterAppendError.code,
    errors.RequestTimedOutError.code, errors.KafkaStorageError.code,
    errors.CoordinatorLoadInProgressError.code, errors.CoordinatorNotAvailableError.code,
    errors.NotCoordinatorError.code, errors.FencedLeaderEpochError.code,
}
_STOP = {errors.InvalidProducerEpochError.code, errors.TransactionCoordinatorFencedError.code,
         errors.ProducerFencedError.code}

TP = tuple[str, int]


class MarkerChannel(PeerConnections):
    """The coordinator's connections to the brokers, for WriteTxnMarkers."""

    def __init__(self, broker: Broker, request_timeout_ms: int = 30_000) -> None:
        super().__init__(broker, marker_sender_client_id(broker.node_id), request_timeout_ms)

    def _leader(self, tp: TP) -> int:
        state = self.broker.controller.partition(*tp)
        return -2 if state is None else state.leader  # -2: the topic (or partition) is gone

    async def send_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, partitions: set[TP],
                           still_current: Callable[[], bool]) -> bool:
        """Write the marker to every partition; False if the coordinator must give up.

        As Kafka does, it keeps retrying for as long as this coordinator owns the
        transaction: the loop ends when every partition has its marker, or when the
        shard is closed (leadership moved, the broker stops) or the channel is.
        """
        left = set(partitions)
        backoff = 0.02
        while left:
            if self.closed or not still_current():
                return False
            by_leader: dict[int, list[TP]] = {}
            for tp in list(left):
                leader = self._leader(tp)
                if leader == -2:
                    left.discard(tp)
                elif leader >= 0:
                    by_leader.setdefault(leader, []).append(tp)
            results = await asyncio.gather(*(
                self._send(node, producer_id, producer_epoch, commit, coordinator_epoch, tps)
                for node, tps in by_leader.items()))
            for outcome in results:
                if outcome is None:
                    continue
                if any(code in _STOP for code in outcome.values()):
                    log.info("markers for producer %s epoch %s stopped: %s", producer_id,
                             producer_epoch, outcome)
                    return False
                for tp, code in outcome.items():
                    if code == 0 or code not in _RETRY:
                        if code:
                            log.warning("marker for producer %s on %s-%s failed: %s; dropped",
                                        producer_id, tp[0], tp[1], code)
                        left.discard(tp)
            if left:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
        return True

    async def _send(self, node: int, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, tps: list[TP]) -> dict[TP, int] | None:
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        req = WriteTxnMarkersRequest(markers=[wq.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[wq.WritableTxnMarkerTopic(name=t, partition_indexes=ids)
                    for t, ids in by_topic.items()],
            coordinator_epoch=coordinator_epoch)])
        try:
            conn = await self.connection(node)
            resp = await conn.request(req)
        except (ConnectionClosed, OSError, TimeoutError, ProtocolError, KafkaError) as exc:
            log.debug("markers to broker %s: %r", node, exc)
            self.drop(node)
            return None
        assert isinstance(resp, WriteTxnMarkersResponse)
        out: dict[TP, int] = {}
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = p.error_code
        return out
