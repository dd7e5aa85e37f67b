"""Acknowledgements on the wire, and the share sessions they travel in.

An acknowledgement names an offset and a type. On the wire they go as
``AcknowledgementBatch``es: a run of consecutive offsets with one type is one
batch carrying that type once (Kafka's form: a single type applies to the
whole range), so a poll of 500 records accepted in one go is a single batch.

A share session (KIP-932) is kept per partition leader, like a fetch session:
the first ShareFetch opens it with epoch 0 and names every partition; each
answered request moves the epoch on by one, and later requests name only the
partitions that joined (and those with acknowledgements), listing the ones that
left as forgotten. Acknowledgements may not ride on the opening request (the
broker has no acquired records for a session that does not exist yet), so they
wait for the next one. SHARE_SESSION_NOT_FOUND and INVALID_SHARE_SESSION_EPOCH
start a new session; a request with epoch -1 closes it, and the broker then
releases every record the member still holds there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kaflite.client.consumer._types import TopicPartition
from kaflite.protocol import errors

__all__ = ["CLOSE_EPOCH", "SESSION_ERRORS", "ShareSession", "ack_ranges", "merge"]

CLOSE_EPOCH = -1
SESSION_ERRORS = frozenset({errors.ShareSessionNotFoundError.code,
                            errors.InvalidShareSessionEpochError.code})

# acknowledgements of one partition: offset -> type
Acks = dict[int, int]


def ack_ranges(acks: Mapping[int, int]) -> list[tuple[int, int, int]]:
    """``(first, last, type)`` runs of consecutive offsets with the same type."""
    out: list[tuple[int, int, int]] = []
    for offset in sorted(acks):
        kind = acks[offset]
        if out and out[-1][1] == offset - 1 and out[-1][2] == kind:
            first, _, _ = out[-1]
            out[-1] = (first, offset, kind)
        else:
            out.append((offset, offset, kind))
    return out


def merge(into: dict[TopicPartition, Acks], more: Mapping[TopicPartition, Acks]) -> None:
    """Add ``more`` to ``into`` (a later type for an offset wins)."""
    for tp, acks in more.items():
        if acks:
            into.setdefault(tp, {}).update(acks)


@dataclass
class ShareSession:
    """The client side of one leader's share session."""

    node_id: int
    epoch: int = 0
    partitions: set[TopicPartition] = field(default_factory=set)   # in the broker's session

    @property
    def open(self) -> bool:
        return self.epoch > 0

    def changes(self, wanted: Iterable[TopicPartition]
                ) -> tuple[set[TopicPartition], set[TopicPartition]]:
        """(partitions to name, partitions to forget) for the next ShareFetch."""
        want = set(wanted)
        if not self.open:
            return want, set()
        return want - self.partitions, self.partitions - want

    def answered(self, wanted: Iterable[TopicPartition] | None) -> None:
        """The broker answered without a session error: the epoch moves on."""
        if wanted is not None:
            self.partitions = set(wanted)
        self.epoch = 1 if self.epoch >= 0x7FFFFFFF else self.epoch + 1

    def reset(self) -> None:
        self.epoch, self.partitions = 0, set()
