"""read_committed: which batches of a fetched partition belong to aborted transactions.

A Fetch at isolation level READ_COMMITTED returns data up to the last stable
offset, plus the aborted transactions overlapping it: (producer id, first
offset) of each. Walking the batches in offset order, a producer is *aborting*
from the first offset of one of its aborted transactions until its ABORT
marker; its transactional batches in between are dropped (Kafka's consumer does
the same). Control batches are never data. The filter keeps its state across
calls, so batches may be handed to it a few at a time, but always in order.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterable

from kaflite.protocol import ProtocolError
from kaflite.protocol.messages import fetch_response as fr
from kaflite.protocol.records import RecordBatch, read_end_txn_marker

__all__ = ["AbortedFilter"]


class AbortedFilter:
    __slots__ = ("_aborting", "_pending")

    def __init__(self, aborted: Iterable[fr.AbortedTransaction]) -> None:
        self._pending = deque(sorted((a.first_offset, a.producer_id) for a in aborted))
        self._aborting: set[int] = set()

    @classmethod
    def of(cls, partition_data: fr.PartitionData) -> AbortedFilter | None:
        """The filter for one Fetch response partition; None when nothing was aborted."""
        aborted = partition_data.aborted_transactions
        return cls(aborted) if aborted else None

    def skip(self, batch: RecordBatch) -> bool:
        """Is ``batch`` a control batch, or data of an aborted transaction?"""
        pid = batch.producer_id
        if pid < 0:
            return batch.is_control
        pending = self._pending
        while pending and pending[0][0] <= batch.last_offset:
            self._aborting.add(pending.popleft()[1])
        if batch.is_control:
            if pid in self._aborting:
                with contextlib.suppress(ProtocolError):
                    if not read_end_txn_marker(batch).is_commit:
                        self._aborting.discard(pid)
            return True
        return batch.is_transactional and pid in self._aborting
