"""A partition leader asks the transaction coordinator before it appends a producer's
first transactional batch (KIP-890).

Transactions v1 (Produce up to v11): the producer added the partition itself with
AddPartitionsToTxn; the leader only checks that it did (``verify_only``), so that a
late batch from an aborted transaction cannot open a transaction that nobody will
ever end (part 1, the hanging-transaction fix). Transactions v2 (Produce v12 and
later): the producer does not add partitions; the leader adds the partition on its
behalf (part 2). Both are AddPartitionsToTxn v4+ to the coordinator, one
transactional id per request here, over the inter-broker connections; when this
broker is the coordinator it asks itself without the network.

A coordinator still writing the producer's last transaction's markers answers
CONCURRENT_TRANSACTIONS; a v2 producer's next transaction starts right after its
EndTxn, so the leader asks again every ``add.partitions.to.txn.retry.backoff.ms``
(20 ms) for up to ``add.partitions.to.txn.retry.backoff.max.ms`` (100 ms), as
Kafka's brokers do, before it answers the producer (NOT_ENOUGH_REPLICAS, retried
after the client's own, longer, backoff).

Once the producer's transaction is open in the partition's producer state, its
later batches there are appended without asking again. The leader refuses the
append if a marker of that producer was applied while it asked the last time (the
transaction it verified ended meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflite.cluster._peers import PeerConnections
from kaflite.cluster.internal_topics import TXN_TOPIC
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import KafkaError, ProtocolError, errors
from kaflite.protocol.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kaflite.protocol.messages import add_partitions_to_txn_request as apq

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["TxnVerifier", "produce_error", "txn_offset_commit_error"]

log = logging.getLogger("kaflite.cluster.txn")

TP = tuple[str, int]

# Kafka's translation of the coordinator's answers into Produce errors: those a
# producer of any version retries without a metadata refresh become
# NOT_ENOUGH_REPLICAS; a fenced producer sees INVALID_PRODUCER_EPOCH.
_RETRIABLE = {errors.ConcurrentTransactionsError.code, errors.NetworkExceptionError.code,
              errors.CoordinatorLoadInProgressError.code,
              errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code}
TRANSACTION_ABORTABLE_VERSION = 11      # Produce: the first version that knows the error
_CONCURRENT = errors.ConcurrentTransactionsError.code


def produce_error(code: int, produce_version: int) -> int:
    """The error a Produce answers for a failed verification (``code`` from the
    coordinator)."""
    if code in _RETRIABLE:
        return errors.NotEnoughReplicasError.code
    return _for_version(code, produce_version >= TRANSACTION_ABORTABLE_VERSION)


def _for_version(code: int, knows_abortable: bool) -> int:
    """What both requests answer alike: a fenced producer's INVALID_PRODUCER_EPOCH, and
    INVALID_TXN_STATE to a version that does not know TRANSACTION_ABORTABLE."""
    if code == errors.ProducerFencedError.code:
        return errors.InvalidProducerEpochError.code
    if code == errors.TransactionAbortableError.code and not knows_abortable:
        return errors.InvalidTxnStateError.code
    return code


IMPLICIT_OFFSETS_VERSION = 5          # TxnOffsetCommit: transactions v2 (no AddOffsetsToTxn)
TXN_ABORTABLE_OFFSETS_VERSION = 4


def txn_offset_commit_error(code: int, version: int) -> int:
    """The error a TxnOffsetCommit answers when its group's offsets partition could not be
    verified or added: what the coordinator could not answer yet is retried."""
    if code in _RETRIABLE and code != errors.ConcurrentTransactionsError.code:
        return errors.CoordinatorLoadInProgressError.code
    return _for_version(code, version >= TXN_ABORTABLE_OFFSETS_VERSION)


RETRY_BACKOFF = ("add.partitions.to.txn.retry.backoff.ms", 20)
RETRY_BACKOFF_MAX = ("add.partitions.to.txn.retry.backoff.max.ms", 100)


class TxnVerifier(PeerConnections):
    def __init__(self, broker: Broker, request_timeout_ms: int = 30_000) -> None:
        super().__init__(broker, f"txn-verifier-{broker.node_id}", request_timeout_ms)
        props = broker.config.props
        self.backoff_s = int(props.get(RETRY_BACKOFF[0], RETRY_BACKOFF[1])) / 1000
        self.backoff_max_s = int(props.get(RETRY_BACKOFF_MAX[0], RETRY_BACKOFF_MAX[1])) / 1000

    async def verify(self, tid: str, producer_id: int, producer_epoch: int, tps: list[TP],
                     add: bool, before_each: Callable[[], None] | None = None
                     ) -> dict[TP, int]:
        """Each partition's code from the coordinator (0: in the transaction now).
        ``before_each`` runs before every attempt: a leader takes its verification
        guard there, as Kafka's does at each retry."""
        deadline = time.monotonic() + self.backoff_max_s
        while True:
            if before_each is not None:
                before_each()
            codes = await self._ask(tid, producer_id, producer_epoch, tps, add)
            if _CONCURRENT not in codes.values() \
                    or time.monotonic() + self.backoff_s > deadline:
                return codes
            await asyncio.sleep(self.backoff_s)

    async def _ask(self, tid: str, producer_id: int, producer_epoch: int, tps: list[TP],
                   add: bool) -> dict[TP, int]:
        coordinator = self.broker.transactions
        if coordinator is None:
            return dict.fromkeys(tps, errors.CoordinatorNotAvailableError.code)
        state = self.broker.controller.partition(TXN_TOPIC, coordinator.partition_for(tid))
        if state is None or state.leader < 0:
            return dict.fromkeys(tps, errors.CoordinatorNotAvailableError.code)
        if state.leader == self.broker.node_id:
            return await coordinator.add_or_verify(tid, producer_id, producer_epoch, tps,
                                                   not add, 2)
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        req = AddPartitionsToTxnRequest(transactions=[apq.AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add, topics=[apq.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                         for t, ps in by_topic.items()])])
        try:
            conn = await self.connection(state.leader)
            resp = await conn.request(req)
        except (ConnectionClosed, OSError, TimeoutError, ProtocolError, KafkaError) as exc:
            log.debug("verifying %s with broker %s: %r", tid, state.leader, exc)
            self.drop(state.leader)
            return dict.fromkeys(tps, errors.NetworkExceptionError.code)
        assert isinstance(resp, AddPartitionsToTxnResponse)
        if resp.error_code:
            code = errors.InvalidTxnStateError.code \
                if resp.error_code == errors.ClusterAuthorizationFailedError.code \
                else resp.error_code
            return dict.fromkeys(tps, code)
        out = dict.fromkeys(tps, errors.UnknownServerError.code)
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    out[(t.name, p.partition_index)] = p.partition_error_code
        return out
