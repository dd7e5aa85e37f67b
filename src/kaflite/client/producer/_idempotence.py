"""The idempotent producer's state: producer id, epoch and a sequence per partition.

Theory of operation
-------------------
``InitProducerId`` gives the producer an id and an epoch. Each batch sent to
a partition carries the next sequence number for that partition (its first
record's), so a broker that sees a batch twice (a retry after a lost response)
recognises it and does not append it again, and one that sees a gap rejects
it with OUT_OF_ORDER_SEQUENCE_NUMBER. Up to five batches per partition may be
in flight: the broker remembers the last five, which is why
``max.in.flight.requests.per.connection`` may not exceed 5 with idempotence.

Sequences are assigned when a batch is first drained and kept across
retries, so a retried batch is the same batch to the broker. When one batch of
a partition fails, the partition is *muted*: nothing new is drained for it
until every batch in flight has come back, and the failed ones are re-queued
in sequence order, so retries never overtake each other.

UNKNOWN_PRODUCER_ID (the broker no longer has state for the id, after
retention or truncation) and an OUT_OF_ORDER_SEQUENCE_NUMBER not caused by an
earlier failure of our own bump the epoch (KIP-360: InitProducerId with the
current id and epoch). Only the partitions that asked for the bump start
their sequences again from 0 under the new epoch, their unacknowledged
batches re-sequenced as they are drained. Every other partition keeps its
sequence space until it is settled, as Kafka's producer does: a batch already
sent once may have been appended (its answer was lost with a failed leader),
so it is retried under the epoch and sequence it was first sent with, where
the broker can recognise it as a duplicate. A new batch of such a partition
waits until none of its batches with the old epoch is in flight; then the
partition moves to the new epoch, from sequence 0.

A batch can be overtaken: a broker with no state for the producer on a
partition accepts any sequence (KIP-360, as Kafka's does), so when the first
of two batches in flight fails (NOT_LEADER_OR_FOLLOWER, say) and the second
succeeds, the second is in the log first and the first comes back
OUT_OF_ORDER_SEQUENCE_NUMBER when retried. Sent again under a new epoch it
would land after the second, acknowledged out of send order. ``overtaken``
tells the sender so, from the last sequence acknowledged per partition, and the
batch fails instead, as Java's producer ends up failing it (after retrying it
until ``delivery.timeout.ms``).

A transactional producer keeps this state too (its id and epoch come from
the transaction coordinator); the transaction's own states live in
``_transactions``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaflite.client.producer._accumulator import ProducerBatch

__all__ = ["IdempotenceState", "after"]

TP = tuple[str, int]


@dataclass
class IdempotenceState:
    enabled: bool
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    next_sequence: dict[TP, int] = field(default_factory=dict)
    # the (producer id, epoch) each partition's sequences count under
    sequence_owner: dict[TP, tuple[int, int]] = field(default_factory=dict)
    in_flight: dict[TP, list[ProducerBatch]] = field(default_factory=dict)
    retrying: set[TP] = field(default_factory=set)
    needs_bump: bool = False
    # partitions whose error asked for the next bump: they restart from sequence 0
    resequence: set[TP] = field(default_factory=set)
    # partitions with batches in flight when the epoch changed, until those are back
    # (a batch of an older epoch sent later is a retry: ``retrying`` mutes it)
    settling: set[TP] = field(default_factory=set)
    # (producer id, epoch, last sequence) of the newest batch acknowledged per partition
    acked: dict[TP, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def request_bump(self, tp: TP) -> None:
        """UNKNOWN_PRODUCER_ID or OUT_OF_ORDER on ``tp``: bump the epoch, resequence ``tp``."""
        self.needs_bump = True
        self.resequence.add(tp)

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        self.producer_id, self.producer_epoch = producer_id, epoch
        for tp in self.resequence:
            self.next_sequence[tp] = 0
            self.sequence_owner[tp] = (producer_id, epoch)
        self.resequence.clear()
        self.settling = {tp for tp, flying in self.in_flight.items() if flying}
        self.needs_bump = False

    def _stale(self, batch: ProducerBatch) -> bool:
        return batch.producer_epoch != self.producer_epoch \
            or batch.producer_id != self.producer_id

    def muted(self) -> set[TP]:
        """Partitions that may not send: retrying with batches still in flight, or
        with batches of an older epoch in flight (a new batch would start the new
        epoch before they are settled)."""
        out = {tp for tp in self.retrying if self.in_flight.get(tp)}
        for tp in list(self.settling):
            if any(self._stale(b) for b in self.in_flight.get(tp, ())):
                out.add(tp)
            else:
                self.settling.discard(tp)
        return out

    def assign(self, batch: ProducerBatch) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence) for a batch about to be sent."""
        if not self.enabled:
            return -1, -1, -1
        tp = (batch.topic, batch.partition)
        current = (self.producer_id, self.producer_epoch)
        owner = self.sequence_owner.get(tp)
        if batch.base_sequence >= 0 and (batch.producer_id, batch.producer_epoch) == owner:
            # sent before under the partition's sequence space: the same batch again
            self.in_flight.setdefault(tp, []).append(batch)
            return batch.producer_id, batch.producer_epoch, batch.base_sequence
        if owner != current:
            self.sequence_owner[tp] = current
            self.next_sequence[tp] = 0
        seq = self.next_sequence.get(tp, 0)
        self.next_sequence[tp] = (seq + len(batch)) & 0x7FFFFFFF
        batch.refused_out_of_order = False   # a new sequence: no answer for it yet
        self.in_flight.setdefault(tp, []).append(batch)
        return self.producer_id, self.producer_epoch, seq

    def done(self, batch: ProducerBatch, ok: bool) -> None:
        tp = (batch.topic, batch.partition)
        flying = self.in_flight.get(tp)
        if flying and batch in flying:
            flying.remove(batch)
        if not ok:
            self.retrying.add(tp)
        elif not flying:
            self.retrying.discard(tp)

    def acknowledged(self, batch: ProducerBatch) -> None:
        """``batch`` was written: remember its last sequence (when newer)."""
        if batch.base_sequence < 0:
            return
        tp = (batch.topic, batch.partition)
        last = (batch.base_sequence + len(batch) - 1) & 0x7FFFFFFF
        seen = self.acked.get(tp)
        if seen is None or seen[:2] != (batch.producer_id, batch.producer_epoch) \
                or after(last, seen[2]):
            self.acked[tp] = (batch.producer_id, batch.producer_epoch, last)

    def overtaken(self, batch: ProducerBatch) -> bool:
        """Was a later batch of this partition, of the same producer id and epoch,
        acknowledged already? Then ``batch`` can no longer be written in order."""
        seen = self.acked.get((batch.topic, batch.partition))
        return batch.base_sequence >= 0 and seen is not None \
            and seen[:2] == (batch.producer_id, batch.producer_epoch) \
            and after(seen[2], batch.base_sequence)


def after(a: int, b: int) -> bool:
    """Is sequence ``a`` at or after ``b`` (sequences wrap at 2**31)?"""
    return (a - b) & 0x7FFFFFFF < 0x40000000
