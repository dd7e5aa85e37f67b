"""A share-partition's state writes land in the order they were made.

Each write is a whole state. In a 30-minute soak (seed 719805998) the write of an
acquisition was retried after a dropped connection and landed after the write of the
records' acceptance: ``__share_group_state`` went from start 118433 back to 118431 with
the two records acquired once, and the next leader delivered the accepted records again.
"""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any, cast

from kaflite.cluster.groups._timer import ManualTimer
from kaflite.cluster.share import SharePartition
from kaflite.cluster.share._manager import SharePartitionManager
from kaflite.cluster.share._persister import PersistedState


class SlowFirstWrite:
    """A persister whose first write waits until let go (a retry after a lost
    connection); every other write lands at once."""

    def __init__(self) -> None:
        self.stored: PersistedState | None = None
        self.sent: list[int] = []
        self.first = asyncio.Event()

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                    leader_epoch: int, state: PersistedState) -> int:
        self.sent.append(state.start_offset)
        if len(self.sent) == 1:
            await self.first.wait()
        self.stored = state
        return 0


def test_a_slow_write_never_undoes_a_later_one() -> None:
    async def scenario() -> tuple[list[int], int]:
        persister = SlowFirstWrite()
        broker = SimpleNamespace(config=SimpleNamespace(props={}), partition_hooks=[])
        mgr = SharePartitionManager(cast(Any, broker), cast(Any, persister))
        sp = SharePartition("g", "t", 0, ManualTimer(), start_offset=10)
        first = asyncio.create_task(mgr.persist(sp))       # the state at start 10
        await asyncio.sleep(0)
        sp.restore(12, [], sp.state_epoch)                  # then accepted up to 12
        second = asyncio.create_task(mgr.persist(sp))
        await asyncio.sleep(0.05)
        persister.first.set()                               # the first lands last
        assert await asyncio.wait_for(first, 5) == 0
        assert await asyncio.wait_for(second, 5) == 0
        assert persister.stored is not None
        return persister.sent, persister.stored.start_offset

    sent, stored = asyncio.run(scenario())
    assert sent == [10, 12]
    assert stored == 12, "an older state landed after a newer one"
