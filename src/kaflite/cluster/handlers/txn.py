"""Producer ids and transactions, the coordinator's side: InitProducerId (22, for
idempotent and transactional producers), AddPartitionsToTxn (24), AddOffsetsToTxn
(25), EndTxn (26), DescribeTransactions (65) and ListTransactions (66).

AddPartitionsToTxn v0-v3 come from producers of transaction version 1; v4-v5
from partition leaders (KIP-890), batched by transactional id: ``verify_only``
asks whether a v1 producer added the partitions before its first batch there
(part 1), otherwise the leader adds them for a v2 producer (part 2). EndTxn v5
is transaction version 2's: the coordinator bumps the producer epoch at every
end, and answers with the producer id and epoch to go on with.

InitProducerId v6 (KIP-939, unstable in Kafka 4.4: ``unstable.api.versions.enable``)
carries Enable2Pc and KeepPreparedTxn. kaflite has no two-phase commit
(``transaction.two.phase.commit.enable`` cannot be turned on), so it answers as Kafka
4.4's coordinator does with it off, before looking at the transactional id's state:
Enable2Pc gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KeepPreparedTxn UNSUPPORTED_VERSION
(Kafka 4.4 does not implement keeping a prepared transaction either). An idempotent
producer's (no transactional id) flags are ignored.

ListTransactions v2 (KIP-1152) filters by a transactional id pattern, a Java regular
expression matched against the whole id; an empty or null pattern matches all, and a
pattern that does not compile gets INVALID_REGULAR_EXPRESSION.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.internal_topics import OFFSETS_TOPIC
from kaflite.cluster.txn import MAX_EPOCH, TransactionCoordinator, TxnShard, TxnState
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kaflite.protocol.messages import add_partitions_to_txn_response as apr
from kaflite.protocol.messages import describe_transactions_response as dtr
from kaflite.protocol.messages import list_transactions_response as ltr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS", "init_transactional"]


def _coordinator(broker: Broker) -> TransactionCoordinator:
    coordinator = broker.transactions
    if coordinator is None:
        raise errors.NotCoordinatorError("no transaction coordinator on this broker")
    return coordinator


def _shard(broker: Broker, tid: str) -> TxnShard:
    if not tid:
        raise errors.InvalidRequestError("the transactional id must not be empty")
    return _coordinator(broker).shard_for(tid)


def _init_error(code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


async def init_transactional(broker: Broker, conn: ServerConnection,
                             req: InitProducerIdRequest) -> InitProducerIdResponse:
    tid = req.transactional_id or ""
    if tid and req.enable2_pc:
        return _init_error(errors.TransactionalIdAuthorizationFailedError.code)
    if tid and req.keep_prepared_txn:
        return _init_error(errors.UnsupportedVersionError.code)
    try:
        shard = _shard(broker, tid)
        limit = _coordinator(broker).config.max_timeout_ms
        if not 0 < req.transaction_timeout_ms <= limit:
            raise errors.InvalidTransactionTimeoutError(
                f"transaction.timeout.ms {req.transaction_timeout_ms} is not in (0, {limit}]")
    except errors.KafkaError as exc:
        return _init_error(exc.code)
    code, pid, epoch = await shard.init_producer_id(tid, req.transaction_timeout_ms,
                                                    req.producer_id, req.producer_epoch)
    return InitProducerIdResponse(error_code=code, producer_id=pid, producer_epoch=epoch)


def _partition_results(codes: dict[tuple[str, int], int]
                       ) -> list[apr.AddPartitionsToTxnTopicResult]:
    results: dict[str, list[apr.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, index), code in codes.items():
        results.setdefault(topic, []).append(apr.AddPartitionsToTxnPartitionResult(
            partition_index=index, partition_error_code=code))
    return [apr.AddPartitionsToTxnTopicResult(name=t, results_by_partition=r)
            for t, r in results.items()]


async def _add_or_verify(broker: Broker, tid: str, producer_id: int, producer_epoch: int,
                         wanted: list[tuple[str, int]], verify_only: bool,
                         client_tv: int) -> dict[tuple[str, int], int]:
    try:
        coordinator = _coordinator(broker)
    except errors.KafkaError as exc:
        return dict.fromkeys(wanted, exc.code)
    return await coordinator.add_or_verify(tid, producer_id, producer_epoch, wanted,
                                           verify_only, client_tv)


async def handle_add_partitions(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    if header.request_api_version <= 3:      # from a producer of transaction version 1
        wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        codes = await _add_or_verify(broker, req.v3_and_below_transactional_id,
                                     req.v3_and_below_producer_id,
                                     req.v3_and_below_producer_epoch, wanted, False, 1)
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_partition_results(codes))
    out = []
    for txn in req.transactions:             # from partition leaders
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        codes = await _add_or_verify(broker, txn.transactional_id, txn.producer_id,
                                     txn.producer_epoch, wanted, txn.verify_only, 2)
        out.append(apr.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                topic_results=_partition_results(codes)))
    return AddPartitionsToTxnResponse(results_by_transaction=out)


async def handle_add_offsets(broker: Broker, conn: ServerConnection, header: RequestHeader,
                             req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    try:
        shard = _shard(broker, req.transactional_id)
        groups = broker.groups
        if groups is None:
            raise errors.CoordinatorNotAvailableError("no group coordinator")
        # the group's offsets partition, by the configured count if the topic is not
        # created yet (its FindCoordinator, which comes next, creates it)
        tp = (OFFSETS_TOPIC, groups.partition_for(req.group_id))
    except errors.KafkaError as exc:
        return AddOffsetsToTxnResponse(error_code=exc.code)
    code = await shard.add_partitions(req.transactional_id, req.producer_id,
                                      req.producer_epoch, {tp})
    return AddOffsetsToTxnResponse(error_code=code)


async def handle_end_txn(broker: Broker, conn: ServerConnection, header: RequestHeader,
                         req: EndTxnRequest) -> EndTxnResponse:
    try:
        shard = _shard(broker, req.transactional_id)
    except errors.KafkaError as exc:
        return EndTxnResponse(error_code=exc.code)
    result = await shard.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                 req.committed, 2 if header.request_api_version >= 5 else 1)
    return EndTxnResponse(error_code=result.code, producer_id=result.producer_id,
                          producer_epoch=result.producer_epoch)


def _describe_one(broker: Broker, tid: str) -> dtr.TransactionState:
    try:
        shard = _coordinator(broker).shard_for(tid)
        meta = shard.txns.get(tid)
        if meta is None:
            raise errors.TransactionalIdNotFoundError(tid)
    except errors.KafkaError as exc:
        return dtr.TransactionState(error_code=exc.code, transactional_id=tid,
                                    transaction_state="", producer_id=-1, producer_epoch=-1)
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(index)
    return dtr.TransactionState(
        transactional_id=tid, transaction_state=meta.state.display,
        transaction_timeout_ms=meta.timeout_ms, transaction_start_time_ms=meta.start_ms,
        producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
        topics=[dtr.TopicData(topic=t, partitions=ids) for t, ids in by_topic.items()])


async def handle_describe_transactions(broker: Broker, conn: ServerConnection,
                                       header: RequestHeader, req: DescribeTransactionsRequest
                                       ) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(
        transaction_states=[_describe_one(broker, tid) for tid in req.transactional_ids])


async def handle_list_transactions(broker: Broker, conn: ServerConnection,
                                   header: RequestHeader, req: ListTransactionsRequest
                                   ) -> ListTransactionsResponse:
    states = {s: TxnState.from_display(s) for s in req.state_filters}
    unknown = [s for s, state in states.items() if state is None]
    wanted = {state for state in states.values() if state is not None}
    try:
        metas = _coordinator(broker).all_transactions()
        # (Kafka compiles it with RE2/J; Python's re agrees on the common syntax)
        pattern = re.compile(req.transactional_id_pattern) \
            if req.transactional_id_pattern else None
    except errors.KafkaError as exc:
        return ListTransactionsResponse(error_code=exc.code, unknown_state_filters=unknown)
    except re.error:
        return ListTransactionsResponse(error_code=errors.InvalidRegularExpressionError.code)
    now = int(time.time() * 1000)
    out = []
    for m in metas:
        if req.state_filters and m.state not in wanted:
            continue
        if req.producer_id_filters and m.producer_id not in req.producer_id_filters:
            continue
        if pattern is not None and not pattern.fullmatch(m.transactional_id):
            continue
        if req.duration_filter >= 0 and (m.state is not TxnState.ONGOING
                                         or now - m.start_ms < req.duration_filter):
            continue
        out.append(ltr.TransactionState(transactional_id=m.transactional_id,
                                        producer_id=m.producer_id,
                                        transaction_state=m.state.display))
    return ListTransactionsResponse(unknown_state_filters=unknown, transaction_states=out)


async def handle_init_producer_id(broker: Broker, conn: ServerConnection, header: RequestHeader,
                                  req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return await init_transactional(broker, conn, req)
    controller = broker.controller
    if req.producer_id >= 0 and req.producer_epoch >= 0:
        # KIP-360: an idempotent producer bumps its epoch after an unknown-producer error.
        if req.producer_epoch + 1 > MAX_EPOCH:
            return InitProducerIdResponse(producer_id=controller.allocate_producer_id(),
                                          producer_epoch=0)
        return InitProducerIdResponse(producer_id=req.producer_id,
                                      producer_epoch=req.producer_epoch + 1)
    return InitProducerIdResponse(producer_id=controller.allocate_producer_id(), producer_epoch=0)


HANDLERS = [
    Handler(InitProducerIdRequest, 0, 6, handle_init_producer_id),
    Handler(AddPartitionsToTxnRequest, 0, 5, handle_add_partitions),
    Handler(AddOffsetsToTxnRequest, 0, 4, handle_add_offsets),
    Handler(EndTxnRequest, 0, 5, handle_end_txn),
    Handler(DescribeTransactionsRequest, 0, 0, handle_describe_transactions),
    Handler(ListTransactionsRequest, 0, 2, handle_list_transactions),
]
