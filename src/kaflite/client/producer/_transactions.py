"""The transactional producer (KIP-98): one ``transactional.id``, one transaction at a time.

Theory of operation
-------------------
``init_transactions`` finds the transaction coordinator (FindCoordinator with
key type 1) and asks it for the id's producer id and epoch (InitProducerId).
A new epoch fences any older producer with the same transactional id, and
the coordinator aborts whatever transaction that one left open.

Inside a transaction, the first record for a partition adds the partition
to the transaction: the sender holds that partition's batches (it is
*muted*) until AddPartitionsToTxn has been answered, adding every partition
that is waiting in one request. ``send_offsets_to_transaction`` adds the
group's offsets partition (AddOffsetsToTxn) and writes the offsets to the
group coordinator (TxnOffsetCommit), where they stay pending until the
transaction ends. ``commit_transaction`` flushes, then ends the transaction
with EndTxn; ``abort_transaction`` fails what was not sent yet, waits for
what was, then ends it with EndTxn(abort).

Transactions v2 (KIP-890 part 2), when the coordinator's broker finalizes
``transaction.version`` 2 and speaks EndTxn v5: the producer adds nothing itself.
Produce v12 makes each partition's leader add the partition on its first batch,
TxnOffsetCommit v5 adds the group's offsets partition (no AddOffsetsToTxn), and
EndTxn v5 answers with the epoch the producer goes on with: each end bumps it.
Otherwise (v1) Produce stays at v11 and TxnOffsetCommit at v4, which Kafka
requires of a producer that adds partitions itself.

The coordinator's answers go through the recovery table: NOT_COORDINATOR and
COORDINATOR_NOT_AVAILABLE look the coordinator up again,
CONCURRENT_TRANSACTIONS and COORDINATOR_LOAD_IN_PROGRESS back off and retry,
until ``max.block.ms``. A failed batch makes the transaction *abortable*: it
can only be aborted. Being fenced (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) is
*fatal*: the producer can only be closed.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from kaflite.client._find_coordinator import GROUP, TRANSACTION, find_coordinator
from kaflite.client.events import Emit
from kaflite.client.pool import COORDINATOR
from kaflite.client.producer._idempotence import IdempotenceState
from kaflite.client.recovery import Action, action_for, error_name
from kaflite.net.connection import ConnectionClosed
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    InitProducerIdRequest,
    Request,
    Struct,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kaflite.protocol.messages import add_partitions_to_txn_request as apq
from kaflite.protocol.messages import txn_offset_commit_request as toq

if TYPE_CHECKING:
    from kaflite.client._base import BaseClient

__all__ = ["ConsumerGroupMetadata", "TransactionManager", "TransactionStateError", "TxnState"]

TP = tuple[str, int]
R = TypeVar("R", bound=Struct)
_FATAL = {errors.ProducerFencedError.code, errors.InvalidProducerEpochError.code,
          errors.TransactionCoordinatorFencedError.code,
          errors.TransactionalIdAuthorizationFailedError.code,
          errors.InvalidProducerIdMappingError.code, errors.UnsupportedVersionError.code}
CONCURRENT_BACKOFF = 0.02
_RETRY = {errors.ConcurrentTransactionsError.code, errors.CoordinatorLoadInProgressError.code,
          errors.OperationNotAttemptedError.code}


class TransactionStateError(RuntimeError):
    """A transactional method called in the wrong state (Java's IllegalStateException)."""


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


class ConsumerGroupMetadata:
    """What TxnOffsetCommit needs to know of the consumer (KIP-447)."""

    def __init__(self, group_id: str, generation_id: int = -1, member_id: str = "",
                 group_instance_id: str | None = None) -> None:
        self.group_id = group_id
        self.generation_id = generation_id
        self.member_id = member_id
        self.group_instance_id = group_instance_id


V1_MAX_PRODUCE = 11             # KIP-890: Produce v12 adds partitions (transactions v2)
V1_MAX_TXN_OFFSET_COMMIT = 4    # v5 adds the group's offsets partition
V2_END_TXN = 5                  # EndTxn that bumps the epoch and returns it


class TransactionManager:
    def __init__(self, producer: BaseClient, idem: IdempotenceState, transactional_id: str,
                 timeout_ms: int, wakeup: Callable[[], None], emit: Emit) -> None:
        self.producer = producer
        self.emit = emit                # the producer's event log
        self.idem = idem
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.wakeup = wakeup
        self.state = TxnState.UNINITIALIZED
        self.error: BaseException | None = None
        self.coordinator: int | None = None
        self.added: set[TP] = set()
        self.pending: set[TP] = set()
        self.offsets_added = False
        self.v2 = False     # transactions v2 (KIP-890 part 2), decided at InitProducerId
        self._adding: asyncio.Task[None] | None = None
        # set by the producer: fail the queued batches of partitions that were not added
        self.fail_queued: Callable[[set[TP], BaseException], None] | None = None
        cfg = producer.config
        self.backoff = cfg.int("retry.backoff.ms") / 1000
        self.max_block = cfg.int("max.block.ms") / 1000

    # -- state ----------------------------------------------------------------------------
    def _require(self, *states: TxnState) -> None:
        if self.state is TxnState.FATAL_ERROR:
            if isinstance(self.error, errors.KafkaError):
                raise self.error  # e.g. PRODUCER_FENCED: only closing the producer is left
            raise errors.KafkaError(f"the producer failed: {self.error!r}")
        if self.state not in states:
            if self.state is TxnState.ABORTABLE_ERROR and self.error is not None:
                raise errors.KafkaError(
                    f"the transaction must be aborted: {self.error!r}") from self.error
            names = ", ".join(s.value for s in states)
            raise TransactionStateError(f"cannot do that while {self.state.value} "
                                        f"(needs: {names})")

    def fail(self, exc: BaseException) -> None:
        """A batch or a request failed: the transaction can only be aborted now."""
        code = getattr(exc, "code", None)
        if code in _FATAL:
            self.state, self.error = TxnState.FATAL_ERROR, exc
        elif self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self.state, self.error = TxnState.ABORTABLE_ERROR, exc

    def check_open(self) -> None:
        """Records may only be sent inside a transaction."""
        self._require(TxnState.IN_TRANSACTION)

    def record_for(self, tp: TP) -> None:
        """A record is about to be appended to ``tp``: it must be in the transaction."""
        self.check_open()
        if tp in self.added:
            return
        if self.v2:
            self.added.add(tp)      # its leader adds it, on the first batch
        else:
            self.pending.add(tp)

    @property
    def produce_max_version(self) -> int | None:
        """The newest Produce this producer may send (None: what the broker speaks)."""
        return None if self.v2 else V1_MAX_PRODUCE

    def muted(self) -> set[TP]:
        """Partitions the sender must hold back; starts adding them to the transaction."""
        if self.pending and (self._adding is None or self._adding.done()) \
                and self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            self._adding = asyncio.get_running_loop().create_task(self._add_pending())
        return self.pending

    def roles(self, node_id: int, channel: str) -> list[str]:
        if channel == COORDINATOR and node_id == self.coordinator:
            return [f"txn coordinator ({self.transactional_id})"]
        return []

    # -- talking to the coordinator ----------------------------------------------------------
    async def _coordinator_request(self, make: Callable[[], Request[R]],
                                   code_of: Callable[[R], int],
                                   what: str, key: str | None = None,
                                   key_type: int = TRANSACTION,
                                   max_version: int | None = None) -> R:
        """Send to the coordinator of ``key`` and retry per the recovery table."""
        deadline = time.monotonic() + self.max_block
        key = self.transactional_id if key is None else key
        node: int | None = self.coordinator if key_type == TRANSACTION else None
        code = 0
        while True:
            try:
                if node is None:
                    node = await find_coordinator(self.producer, key, key_type)
                    if key_type == TRANSACTION:
                        self.coordinator = node
                conn = await self.producer.pool.get(node, COORDINATOR)
                req = make()
                version = conn.version_for(type(req).API_KEY)
                if max_version is not None:
                    version = min(version, max_version)
                resp = await conn.request(req, version=version)
                code = code_of(resp)
            except (ConnectionClosed, TimeoutError, OSError):
                code = errors.NetworkExceptionError.code
            except errors.KafkaError as exc:  # FindCoordinator's error
                code = exc.code
            if code == 0:
                return resp
            action = action_for(code)
            if action == Action.REDISCOVER_COORDINATOR or \
                    code == errors.NetworkExceptionError.code:
                node = None
                if key_type == TRANSACTION:
                    self.coordinator = None
            elif code not in _RETRY and action not in (Action.BACKOFF, Action.BACKOFF_REFRESH):
                raise errors.error_for_code(code, f"{what}: {error_name(code)}")
            if time.monotonic() > deadline:
                raise errors.error_for_code(code, f"{what} still failing after max.block.ms: "
                                                  f"{error_name(code)}")
            # The previous transaction's markers are usually written within milliseconds:
            # retry CONCURRENT_TRANSACTIONS sooner than other errors (Java's producer: 20 ms).
            await asyncio.sleep(min(self.backoff, CONCURRENT_BACKOFF)
                                if code == errors.ConcurrentTransactionsError.code
                                else self.backoff)

    async def init_producer_id(self) -> None:
        """InitProducerId for the transactional id (also the epoch bump after an abort)."""
        idem = self.idem
        pid, epoch = idem.producer_id, idem.producer_epoch
        resp = await self._coordinator_request(
            lambda: InitProducerIdRequest(transactional_id=self.transactional_id,
                                          transaction_timeout_ms=self.timeout_ms,
                                          producer_id=pid, producer_epoch=epoch),
            lambda r: r.error_code, "InitProducerId")
        idem.producer_id = idem.producer_epoch = -1
        idem.resequence |= set(idem.next_sequence)
        idem.set_producer_id(resp.producer_id, resp.producer_epoch)
        self.v2 = await self._speaks_v2()
        self.emit("producer", f"transactional id {self.transactional_id}: "
                                   f"producer id {resp.producer_id} epoch {resp.producer_epoch}",
                                   cause="InitProducerId")

    async def _speaks_v2(self) -> bool:
        """The coordinator's broker finalizes transaction.version 2 and speaks EndTxn v5."""
        if self.coordinator is None:
            return False
        try:
            conn = await self.producer.pool.get(self.coordinator, COORDINATOR)
        except (ConnectionClosed, TimeoutError, OSError):
            return False
        end_txn = conn.api_versions.get(EndTxnRequest.API_KEY, (0, 0))
        return conn.finalized_features.get("transaction.version", 0) >= 2 \
            and end_txn[1] >= V2_END_TXN

    async def _add_pending(self) -> None:
        tps = sorted(self.pending)
        by_topic: dict[str, list[int]] = {}
        for topic, index in tps:
            by_topic.setdefault(topic, []).append(index)
        idem = self.idem

        def codes(resp: AddPartitionsToTxnResponse) -> int:
            found = [r.partition_error_code for t in resp.results_by_topic_v3_and_below
                     for r in t.results_by_partition]
            return next((c for c in found if c and c != errors.OperationNotAttemptedError.code),
                        next((c for c in found if c), 0))

        try:
            await self._coordinator_request(
                lambda: AddPartitionsToTxnRequest(
                    v3_and_below_transactional_id=self.transactional_id,
                    v3_and_below_producer_id=idem.producer_id,
                    v3_and_below_producer_epoch=idem.producer_epoch,
                    v3_and_below_topics=[apq.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                         for t, ps in by_topic.items()]),
                # v4+ is the brokers' batched verification (KIP-890): clients send v0-v3
                codes, "AddPartitionsToTxn", max_version=3)
        except Exception as exc:
            self.fail(exc)
            if self.fail_queued is not None:
                self.fail_queued(set(tps), exc)  # their records can never be sent now
            return
        finally:
            self.wakeup()
        self.added.update(tps)
        self.pending.difference_update(tps)

    # -- the public operations ---------------------------------------------------------------
    async def init_transactions(self) -> None:
        self._require(TxnState.UNINITIALIZED)
        await self.init_producer_id()
        self.state = TxnState.READY

    def begin_transaction(self) -> None:
        self._require(TxnState.READY)
        self.added.clear()
        self.pending.clear()
        self.offsets_added = False
        self.error = None
        self.state = TxnState.IN_TRANSACTION

    async def send_offsets(self, offsets: Mapping[TP, int],
                           group: ConsumerGroupMetadata) -> None:
        self._require(TxnState.IN_TRANSACTION)
        idem = self.idem
        try:
            if not self.v2:     # v2: TxnOffsetCommit v5 adds the offsets partition
                await self._coordinator_request(
                    lambda: AddOffsetsToTxnRequest(
                        transactional_id=self.transactional_id, producer_id=idem.producer_id,
                        producer_epoch=idem.producer_epoch, group_id=group.group_id),
                    lambda r: r.error_code, "AddOffsetsToTxn")
            self.offsets_added = True
            by_topic: dict[str, list[toq.TxnOffsetCommitRequestPartition]] = {}
            for (topic, index), offset in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(toq.TxnOffsetCommitRequestPartition(
                    partition_index=index, committed_offset=offset))

            def codes(resp: TxnOffsetCommitResponse) -> int:
                return next((p.error_code for t in resp.topics for p in t.partitions
                             if p.error_code), 0)

            await self._coordinator_request(
                lambda: TxnOffsetCommitRequest(
                    transactional_id=self.transactional_id, group_id=group.group_id,
                    producer_id=idem.producer_id, producer_epoch=idem.producer_epoch,
                    generation_id_or_member_epoch=group.generation_id, member_id=group.member_id,
                    group_instance_id=group.group_instance_id,
                    topics=[toq.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                            for t, ps in by_topic.items()]),
                codes, "TxnOffsetCommit", key=group.group_id, key_type=GROUP,
                max_version=None if self.v2 else V1_MAX_TXN_OFFSET_COMMIT)
        except Exception as exc:
            self.fail(exc)
            raise

    async def commit(self, flush: Callable[[], Awaitable[None]]) -> None:
        self._require(TxnState.IN_TRANSACTION)
        self.state = TxnState.COMMITTING
        await flush()
        self._require(TxnState.COMMITTING)  # a batch that failed made it abortable
        await self._end(commit=True)

    async def abort(self, drop_unsent: Callable[[BaseException], None],
                    wait_in_flight: Callable[[], Awaitable[None]]) -> None:
        self._require(TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.COMMITTING)
        self.state = TxnState.ABORTING
        drop_unsent(errors.KafkaError("the transaction was aborted"))
        self.pending.clear()
        await wait_in_flight()
        failed = self.error is not None
        bumped = self.v2 and bool(self.added or self.offsets_added)
        await self._end(commit=False)
        if failed and not bumped:
            # Batches failed, so the partitions' sequences may have gaps: start the next
            # transaction under a new epoch (KIP-360). A v2 EndTxn bumped it already.
            await self.init_producer_id()

    async def _end(self, commit: bool) -> None:
        idem = self.idem
        if self.added or self.offsets_added:
            try:
                resp = await self._coordinator_request(
                    lambda: EndTxnRequest(transactional_id=self.transactional_id,
                                          producer_id=idem.producer_id,
                                          producer_epoch=idem.producer_epoch,
                                          committed=commit),
                    # v5 is transactions v2 (KIP-890): the coordinator bumps the epoch at
                    # every end and returns the new one. A v1 producer (explicit
                    # AddPartitionsToTxn, Produce <= v11) sends v4 at most, as the Java
                    # client does: Apache Kafka answered v5 with a new epoch and fenced
                    # the next AddPartitionsToTxn.
                    lambda r: r.error_code, "EndTxn",
                    max_version=V2_END_TXN if self.v2 else V2_END_TXN - 1)
                if self.v2 and resp.producer_id >= 0 and resp.producer_epoch >= 0:
                    idem.set_producer_id(resp.producer_id, resp.producer_epoch)
            except Exception as exc:
                self.fail(exc)
                if self.state is not TxnState.FATAL_ERROR:
                    self.state = TxnState.ABORTABLE_ERROR
                raise
        self.added.clear()
        self.offsets_added = False
        self.state = TxnState.READY
