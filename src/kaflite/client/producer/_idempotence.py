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
current id and epoch); sequences then start again from 0 and unacknowledged
batches are re-sequenced as they are drained.

Transactions (a later issue) will add a ``transactional_id`` and the
transaction coordinator: the state here already carries the id and is where
the transaction state machine will live.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaflite.client.producer._accumulator import ProducerBatch

__all__ = ["IdempotenceState"]

TP = tuple[str, int]


@dataclass
class IdempotenceState:
    enabled: bool
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    next_sequence: dict[TP, int] = field(default_factory=dict)
    in_flight: dict[TP, list[ProducerBatch]] = field(default_factory=dict)
    retrying: set[TP] = field(default_factory=set)
    needs_bump: bool = False

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        changed = (producer_id, epoch) != (self.producer_id, self.producer_epoch)
        self.producer_id, self.producer_epoch = producer_id, epoch
        if changed:
            self.next_sequence.clear()
        self.needs_bump = False

    def muted(self) -> set[TP]:
        """Partitions that may not send: retrying with batches still in flight."""
        return {tp for tp in self.retrying if self.in_flight.get(tp)}

    def assign(self, batch: ProducerBatch) -> tuple[int, int, int]:
        """(producer id, epoch, base sequence) for a batch about to be sent."""
        if not self.enabled:
            return -1, -1, -1
        tp = (batch.topic, batch.partition)
        if batch.base_sequence >= 0 and batch.producer_epoch == self.producer_epoch \
                and batch.producer_id == self.producer_id:
            seq = batch.base_sequence
        else:
            seq = self.next_sequence.get(tp, 0)
            self.next_sequence[tp] = (seq + len(batch)) & 0x7FFFFFFF
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

    def earlier_failed(self, batch: ProducerBatch) -> bool:
        """Was an earlier batch of this partition already being retried?"""
        return (batch.topic, batch.partition) in self.retrying
