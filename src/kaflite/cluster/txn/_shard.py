"""One ``__transaction_state`` partition's transactional ids, and what clients ask of them.

A shard lives while this broker leads its partition at one leader epoch (the
coordinator epoch written into every marker it sends). It replays the log,
then answers InitProducerId, AddPartitionsToTxn (from producers, and from
partition leaders: transactions v2 and KIP-890's verification), AddOffsetsToTxn
and EndTxn with Kafka's checks, in Kafka's order: an unknown id or another producer id is
INVALID_PRODUCER_ID_MAPPING, an older epoch PRODUCER_FENCED, a transition in
flight (or a transaction still being completed) CONCURRENT_TRANSACTIONS.

Completing a transaction runs in the background: EndTxn is answered once the
PrepareCommit (or PrepareAbort) record is replicated, then the markers go out,
then CompleteCommit (CompleteAbort) is written. A new leader that loads a
Prepare* record finishes the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, NamedTuple, Protocol

from kaflite.cluster._internal_log import Record
from kaflite.cluster._sharded import ShardLifecycle, ShardState
from kaflite.cluster.txn._config import TxnConfig
from kaflite.cluster.txn._markers import MarkerChannel
from kaflite.cluster.txn._metadata import MAX_EPOCH, TxnMetadata
from kaflite.cluster.txn._records import (
    TxnState,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from kaflite.protocol import errors
from kaflite.protocol.records import RecordBatch

__all__ = ["EndTxnResult", "TxnShard"]

log = logging.getLogger("kaflite.cluster.txn")

TP = tuple[str, int]
# how long an AddPartitionsToTxn waits for a write of the same id in flight
PENDING_WAIT_S = 0.1
_PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
_DONE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_CONCURRENT = errors.ConcurrentTransactionsError.code
_FENCED = errors.ProducerFencedError.code
_MAPPING = errors.InvalidProducerIdMappingError.code
_INVALID_STATE = errors.InvalidTxnStateError.code
_ABORTABLE = errors.TransactionAbortableError.code


class EndTxnResult(NamedTuple):
    code: int
    producer_id: int = -1       # what the producer goes on with (v2: a bumped epoch)
    producer_epoch: int = -1


class AppendLog(Protocol):
    """Appends records to the shard's partition of the log; resolves to the end offset."""

    def __call__(self, records: list[Record]) -> asyncio.Future[int]: ...


def _now() -> int:
    return int(time.time() * 1000)


class TxnShard(ShardLifecycle):
    def __init__(self, index: int, epoch: int, write: AppendLog, channel: MarkerChannel,
                 allocate_producer_id: Callable[[], int], config: TxnConfig) -> None:
        self.index = index
        self.epoch = epoch
        self.txns: dict[str, TxnMetadata] = {}
        self.records_loaded = 0
        self._write_log = write
        self._channel = channel
        self._allocate = allocate_producer_id
        self._config = config
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed: dict[str, asyncio.Event] = {}     # set when a write of the id ends
        # partitions that AddPartitionsToTxn requests waiting for a write want added,
        # by (transactional id, producer id, epoch): the next write adds them all
        self._adds_waiting: dict[tuple[str, int, int], set[TP]] = {}

    # -- loading ---------------------------------------------------------------------------
    def replay_batch(self, batch: RecordBatch) -> None:
        if batch.is_control:
            return
        cols = batch.columns()
        for key, value in zip(cols.keys, cols.values, strict=True):
            if key is None:
                continue
            try:
                tid = decode_txn_key(key)
                if value is None:
                    self.txns.pop(tid, None)
                else:
                    self.txns[tid] = TxnMetadata.from_record(tid, decode_txn_value(value))
                self.records_loaded += 1
            except Exception as exc:  # one bad record must not lose the partition
                log.warning("__transaction_state-%s: skipping unreadable record: %s",
                            self.index, exc)

    def summary(self) -> str:
        return f"{self.records_loaded} records, {len(self.txns)} transactional ids"

    def finish_loading(self) -> None:
        self.state = ShardState.ACTIVE
        for meta in self.txns.values():
            if meta.state in _PREPARING:
                self._spawn(self._complete(meta))

    def close(self) -> None:
        self.state = ShardState.CLOSED
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _settle(self, tid: str) -> None:
        """A write for ``tid`` finished: wake whoever waits for its state to change."""
        event = self._changed.pop(tid, None)
        if event is not None:
            event.set()

    async def _changes(self, tid: str, timeout: float) -> None:
        """Wait (at most ``timeout``) for the next write of ``tid`` to finish."""
        event = self._changed.setdefault(tid, asyncio.Event())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), timeout)

    def _current(self, meta: TxnMetadata) -> bool:
        return self.active and self.txns.get(meta.transactional_id) is meta

    # -- writing ---------------------------------------------------------------------------
    async def _transit(self, meta: TxnMetadata, **changes: object) -> int:
        target = meta.prepare(meta.replace(last_update_ms=_now(), **changes))
        try:
            code = await self._write_log([(encode_txn_key(meta.transactional_id),
                                           encode_txn_value(target))])
        except BaseException:
            meta.abandon()
            raise
        finally:
            self._settle(meta.transactional_id)
        if code == 0 and not self._current(meta):
            code = errors.NotCoordinatorError.code
        if code:
            meta.abandon()
        else:
            meta.complete(target)
        return code

    # -- InitProducerId --------------------------------------------------------------------
    async def init_producer_id(self, tid: str, timeout_ms: int, expected_id: int = -1,
                               expected_epoch: int = -1) -> tuple[int, int, int]:
        """(error code, producer id, epoch) for a transactional producer starting up."""
        meta = self.txns.get(tid)
        if meta is None:
            meta = TxnMetadata(tid, self._allocate(), -1, timeout_ms, TxnState.EMPTY,
                               last_update_ms=_now())
            self.txns[tid] = meta
        if meta.busy:
            return _CONCURRENT, -1, -1
        expected = (expected_id, expected_epoch)
        if expected_id >= 0 and expected != (meta.producer_id, meta.producer_epoch):
            previous = ((meta.last_producer_id, meta.last_producer_epoch),
                        (meta.producer_id, meta.last_producer_epoch))
            if expected not in previous:
                return _FENCED, -1, -1
            if meta.state in _DONE:
                # the bump this producer asked for was already made (a retry, or the
                # coordinator bumped it to abort its transaction): the current epoch
                return 0, meta.producer_id, meta.producer_epoch
            return _CONCURRENT, -1, -1  # that abort is still being completed
        if meta.state in _PREPARING:
            return _CONCURRENT, -1, -1
        if meta.state is TxnState.ONGOING:
            # Fence the old producer: abort its transaction under a bumped epoch. The client
            # retries and gets an epoch of its own once the abort is complete.
            self._spawn(self._abort(meta, bump=True))
            return _CONCURRENT, -1, -1
        if meta.state not in _DONE:
            return _CONCURRENT, -1, -1
        pid, epoch = meta.producer_id, meta.producer_epoch + 1
        if epoch >= MAX_EPOCH - 1:
            pid, epoch = self._allocate(), 0
        code = await self._transit(meta, producer_id=pid, producer_epoch=epoch,
                                   timeout_ms=timeout_ms, state=TxnState.EMPTY,
                                   partitions=frozenset(), start_ms=-1)
        return (code, -1, -1) if code else (0, pid, epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------
    def _check(self, tid: str, producer_id: int, producer_epoch: int) -> TxnMetadata | int:
        meta = self.txns.get(tid)
        if meta is None or meta.producer_id != producer_id:
            return _MAPPING
        if meta.producer_epoch != producer_epoch:
            return _FENCED
        if meta.busy or meta.state in _PREPARING:
            return _CONCURRENT
        return meta

    async def add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                             partitions: set[TP], client_tv: int = 1) -> int:
        """AddPartitionsToTxn (v1: from the producer; v2: from a partition's leader, on the
        producer's first batch there) and AddOffsetsToTxn.

        While another write of the id is in flight (the leaders of a v2 transaction's
        partitions add them at the same time; the last transaction's end is still
        written) the request waits for it, up to ``PENDING_WAIT_S``, instead of being
        answered CONCURRENT_TRANSACTIONS at once and retried after a backoff; the
        requests waiting together are added in one write."""
        deadline = time.monotonic() + PENDING_WAIT_S
        key = (tid, producer_id, producer_epoch)
        waiting = self._adds_waiting.setdefault(key, set())
        waiting |= partitions
        try:
            while True:
                # what the other requests waiting here want goes in the same write
                wanted = partitions | waiting
                code = await self._add_partitions(tid, producer_id, producer_epoch, wanted,
                                                  client_tv)
                if code == 0:
                    waiting -= wanted
                left = deadline - time.monotonic()
                if code != _CONCURRENT or left <= 0 or tid not in self.txns:
                    return code
                await self._changes(tid, left)
        finally:
            if not waiting or self._adds_waiting.get(key) is not waiting:
                self._adds_waiting.pop(key, None)

    async def _add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                              partitions: set[TP], client_tv: int) -> int:
        meta = self._check(tid, producer_id, producer_epoch)
        if isinstance(meta, int):
            return meta
        if not partitions:
            return 0  # nothing to add: no transaction starts
        if meta.state is TxnState.ONGOING:
            if partitions <= meta.partitions:
                return 0
            return await self._transit(meta, partitions=frozenset(meta.partitions | partitions))
        if meta.state not in _DONE:
            return _CONCURRENT
        return await self._transit(meta, state=TxnState.ONGOING, partitions=frozenset(partitions),
                                   start_ms=_now(), client_tv=client_tv, next_producer_id=-1)

    def verify_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                          partitions: set[TP]) -> dict[TP, int]:
        """KIP-890 part 1: are these partitions in the producer's open transaction? (A
        leader asks before it appends a v1 producer's first transactional batch.)"""
        meta = self.txns.get(tid)
        code = 0
        if meta is None or meta.producer_id != producer_id:
            code = _MAPPING
        elif meta.producer_epoch != producer_epoch:
            code = _FENCED
        elif meta.state in _PREPARING:
            code = _CONCURRENT
        if code or meta is None:
            return dict.fromkeys(partitions, code)
        return {tp: 0 if tp in meta.partitions else _ABORTABLE for tp in partitions}

    # -- EndTxn ----------------------------------------------------------------------------
    async def end_txn(self, tid: str, producer_id: int, producer_epoch: int,
                      commit: bool, client_tv: int = 1) -> EndTxnResult:
        """(error code, producer id, epoch): the producer's id and epoch from now on (in
        transaction version 2 each end bumps the epoch), or -1, -1 with an error."""
        meta = self.txns.get(tid)
        if meta is None:
            return EndTxnResult(_MAPPING)
        wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        # a v2 retry: the end it repeats bumped the epoch (or moved to a new producer id)
        retried_bump = meta.v2 and meta.producer_epoch == producer_epoch + 1 \
            and meta.producer_id == producer_id
        retried_overflow = meta.v2 and meta.last_producer_id == producer_id \
            and producer_epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0
        if meta.producer_id != producer_id and not retried_overflow:
            return EndTxnResult(_MAPPING)
        if retried_bump or retried_overflow:
            if meta.busy or meta.state in _PREPARING:
                return EndTxnResult(_CONCURRENT if meta.busy or meta.state is wanted
                                    else _INVALID_STATE)
            if meta.state is done:
                return EndTxnResult(0, meta.producer_id, meta.producer_epoch)
            return EndTxnResult(_INVALID_STATE)
        if producer_epoch != meta.producer_epoch:
            return EndTxnResult(_FENCED)
        if meta.busy:
            return EndTxnResult(_CONCURRENT)
        if meta.state in _PREPARING:
            # v1: the same epoch repeats this end (or contradicts it); v2: the Prepare
            # record carries the bumped epoch, so this is the next transaction's end,
            # which waits for the markers of the last one
            return EndTxnResult(_CONCURRENT if meta.state is wanted or meta.v2
                                else _INVALID_STATE)
        v2 = client_tv >= 2
        if meta.state is TxnState.ONGOING or (v2 and not commit and meta.state in _DONE):
            # v2: an abort with nothing added (the first batch never reached its leader)
            # still ends the transaction, and bumps the epoch as every v2 end does
            changes: dict[str, object] = {"state": wanted}
            if v2:
                changes["client_tv"] = client_tv
                if meta.producer_epoch >= MAX_EPOCH - 1:   # Kafka's "epoch exhausted"
                    changes["next_producer_id"] = self._allocate()
                changes["producer_epoch"] = meta.producer_epoch + 1
            code = await self._transit(meta, **changes)
            if code:
                return EndTxnResult(code)
            self._spawn(self._complete(meta))
            if meta.next_producer_id >= 0:
                return EndTxnResult(0, meta.next_producer_id, 0)
            return EndTxnResult(0, meta.producer_id, meta.producer_epoch)
        if meta.state is done:
            return EndTxnResult(0, meta.producer_id, meta.producer_epoch)
        return EndTxnResult(_INVALID_STATE)

    # -- completing --------------------------------------------------------------------------
    async def _abort(self, meta: TxnMetadata, bump: bool) -> None:
        """Abort an Ongoing transaction from the coordinator's side (fencing or a timeout)."""
        if meta.busy or meta.state is not TxnState.ONGOING or not self._current(meta):
            return
        epoch = meta.producer_epoch + 1 if bump and meta.producer_epoch < MAX_EPOCH else \
            meta.producer_epoch
        code = await self._transit(meta, producer_epoch=epoch, state=TxnState.PREPARE_ABORT)
        if code == 0:
            await self._complete(meta)
        else:
            log.info("aborting %s failed: error %s", meta.transactional_id, code)

    async def _complete(self, meta: TxnMetadata) -> None:
        commit = meta.state is TxnState.PREPARE_COMMIT
        done = await self._channel.send_markers(
            meta.producer_id, meta.producer_epoch, commit, self.epoch, set(meta.partitions),
            lambda: self._current(meta))
        if not done:
            return  # a new coordinator (or a newer epoch) takes over from the Prepare record
        final = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        for attempt in range(50):
            if not self._current(meta) or meta.state is final:
                return
            if not meta.busy:
                moved = {} if meta.next_producer_id < 0 else {   # a v2 epoch overflow
                    "producer_id": meta.next_producer_id, "producer_epoch": 0,
                    "next_producer_id": -1}
                code = await self._transit(meta, state=final, partitions=frozenset(), **moved)
                if code == 0 or code == errors.NotCoordinatorError.code:
                    return
            await asyncio.sleep(min(0.05 * (attempt + 1), 1.0))

    async def expire_ids(self, now_ms: int) -> int:
        """Forget transactional ids idle for ``transactional.id.expiration.ms`` (a tombstone
        in the log); returns how many were removed."""
        idle = [m for m in self.txns.values()
                if m.state in _DONE and not m.busy
                and now_ms - m.last_update_ms >= self._config.id_expiration_ms]
        if not idle:
            return 0
        for meta in idle:
            meta.prepare(meta.replace(state=TxnState.DEAD, last_update_ms=now_ms))
        code = await self._write_log([(encode_txn_key(m.transactional_id), None) for m in idle])
        for meta in idle:
            meta.abandon()
            if code == 0 and self._current(meta):
                del self.txns[meta.transactional_id]
        return len(idle) if code == 0 else 0

    async def abort_timed_out(self, now_ms: int) -> int:
        """Start aborting every transaction open for longer than its timeout."""
        started = 0
        for meta in list(self.txns.values()):
            if meta.state is TxnState.ONGOING and not meta.busy \
                    and meta.start_ms >= 0 and now_ms > meta.start_ms + meta.timeout_ms:
                log.info("aborting %s: open for longer than its %s ms timeout",
                         meta.transactional_id, meta.timeout_ms)
                self._spawn(self._abort(meta, bump=True))
                started += 1
        return started
