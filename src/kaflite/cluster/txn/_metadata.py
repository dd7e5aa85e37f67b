"""One transactional id's state, and the transitions Kafka allows between states.

Theory of operation
-------------------
A transactional id maps to a producer id and epoch, a timeout, a state and the
partitions its open transaction has touched. Every change is a
``TxnRecord`` written to ``__transaction_state`` first and applied to memory
only once it is replicated: ``prepare`` checks that the move is legal and
marks the metadata busy (``pending``), ``complete`` applies the written
record, ``abandon`` drops it after a failed write. A request that finds the
metadata busy is answered CONCURRENT_TRANSACTIONS and retried by the client.

The life of a transaction::

    Empty/Complete* --AddPartitions--> Ongoing --EndTxn--> PrepareCommit/PrepareAbort
    --markers written--> CompleteCommit/CompleteAbort

In transaction version 2 (KIP-890 part 2) the partitions are added by their
leaders, on the producer's behalf, when its first batch arrives, and every EndTxn
bumps the producer epoch: the Prepare record carries the new epoch, the markers
are written with it, and the producer goes on with it. An epoch that would reach
the limit moves to a new producer id instead (``next_producer_id`` in the
Prepare record, the producer id of the Complete record).

InitProducerId on an id whose transaction is still Ongoing fences the old
producer: the transaction goes to PrepareAbort under a bumped epoch (what
Kafka's in-memory PrepareEpochFence step leads to), so the old producer's
next request is fenced; a transaction open longer than its timeout is aborted
the same way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kaflite.cluster.txn._records import TxnRecord, TxnState

__all__ = ["MAX_EPOCH", "TxnMetadata", "valid_transition"]

MAX_EPOCH = 32767  # Short.MAX_VALUE: an epoch that cannot be bumped again gets a new id

_VALID_FROM: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                               TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    # from Empty/Complete*: a v2 producer aborting a transaction whose first batch never
    # reached a leader (the coordinator has no partitions; the epoch is bumped all the same)
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE,
                                       TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                       TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                              TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def valid_transition(source: TxnState, target: TxnState) -> bool:
    return source in _VALID_FROM[target]


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    last_update_ms: int = -1
    start_ms: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    pending: TxnRecord | None = None
    next_producer_id: int = -1
    client_tv: int = 0

    @classmethod
    def from_record(cls, transactional_id: str, rec: TxnRecord) -> TxnMetadata:
        return cls(transactional_id, rec.producer_id, rec.producer_epoch, rec.timeout_ms,
                   rec.state, set(rec.partitions), rec.last_update_ms, rec.start_ms,
                   last_producer_id=rec.previous_producer_id,
                   next_producer_id=rec.next_producer_id, client_tv=rec.client_tv)

    def record(self) -> TxnRecord:
        return TxnRecord(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                         frozenset(self.partitions), self.last_update_ms, self.start_ms,
                         self.last_producer_id, self.next_producer_id, self.client_tv)

    @property
    def v2(self) -> bool:
        """The open (or last) transaction was a v2 one: every end bumps the epoch."""
        return self.client_tv >= 2

    @property
    def busy(self) -> bool:
        return self.pending is not None

    def prepare(self, target: TxnRecord) -> TxnRecord:
        """Mark ``target`` as being written; raises ValueError for an illegal move."""
        if self.pending is not None:
            raise ValueError(f"{self.transactional_id}: a transition is already in progress")
        if not valid_transition(self.state, target.state):
            raise ValueError(f"{self.transactional_id}: {self.state.display} -> "
                             f"{target.state.display} is not a legal transition")
        self.pending = target
        return target

    def complete(self, target: TxnRecord) -> None:
        """Apply a record that was written (replicated) to the transaction log."""
        if target.producer_id != self.producer_id:
            self.last_producer_id = self.producer_id
        elif target.previous_producer_id >= 0:
            self.last_producer_id = target.previous_producer_id
        if (target.producer_id, target.producer_epoch) != (self.producer_id, self.producer_epoch):
            self.last_producer_epoch = self.producer_epoch  # only a new epoch moves it
        self.producer_id = target.producer_id
        self.producer_epoch = target.producer_epoch
        self.timeout_ms = target.timeout_ms
        self.state = target.state
        self.partitions = set(target.partitions)
        self.last_update_ms = target.last_update_ms
        self.start_ms = target.start_ms
        self.next_producer_id = target.next_producer_id
        self.client_tv = target.client_tv
        self.pending = None

    def abandon(self) -> None:
        self.pending = None

    def replace(self, **changes: Any) -> TxnRecord:
        """This metadata's record with some fields changed."""
        return dataclasses.replace(self.record(), **changes)
