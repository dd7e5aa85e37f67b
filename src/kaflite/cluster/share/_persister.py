"""Where share-partition state is kept: Kafka's ``Persister`` interface.

A share-partition leader reads its state once when it takes the partition on
and writes it after every change. ``MemoryPersister`` keeps it in a dict (unit
tests, and a cluster without the share coordinator); ``CoordinatorPersister``
(``_coordinator``) keeps it in ``__share_group_state`` as Kafka does.

The state epoch fences writers: ``initialize`` and the offset admin APIs start a
new state epoch, and a write carrying an older one gets FENCED_STATE_EPOCH. The
leader epoch fences an old partition leader the same way (FENCED_LEADER_EPOCH).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Protocol

from kaflite.cluster.share._partition import StateBatch
from kaflite.protocol import errors

__all__ = ["MemoryPersister", "PersistedState", "Persister"]


@dataclass(frozen=True)
class PersistedState:
    state_epoch: int
    start_offset: int
    batches: list[StateBatch] = field(default_factory=list)
    leader_epoch: int = -1


class Persister(Protocol):
    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> PersistedState | None: ...

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int: ...

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                    leader_epoch: int, state: PersistedState) -> int: ...

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int: ...

    async def summary(self, group_id: str, topic_id: uuid.UUID,
                      partition: int) -> PersistedState | None: ...

    def close(self) -> None: ...


class MemoryPersister:
    def __init__(self) -> None:
        self.states: dict[tuple[str, uuid.UUID, int], PersistedState] = {}

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int,
                   leader_epoch: int) -> PersistedState | None:
        return self.states.get((group_id, topic_id, partition))

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int,
                         state_epoch: int, start_offset: int) -> int:
        self.states[(group_id, topic_id, partition)] = PersistedState(state_epoch, start_offset)
        return 0

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                    leader_epoch: int, state: PersistedState) -> int:
        key = (group_id, topic_id, partition)
        old = self.states.get(key)
        if old is None or state_epoch < old.state_epoch:
            return errors.FencedStateEpochError.code
        if old is not None and leader_epoch < old.leader_epoch:
            return errors.FencedLeaderEpochError.code
        self.states[key] = PersistedState(state_epoch, state.start_offset, list(state.batches),
                                          leader_epoch)
        return 0

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        self.states.pop((group_id, topic_id, partition), None)
        return 0

    async def summary(self, group_id: str, topic_id: uuid.UUID,
                      partition: int) -> PersistedState | None:
        return self.states.get((group_id, topic_id, partition))

    def close(self) -> None:
        self.states.clear()
