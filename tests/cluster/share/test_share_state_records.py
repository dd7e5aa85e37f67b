"""The share coordinator's records: ShareUpdates between ShareSnapshots, every
``share.coordinator.snapshot.update.records.per.snapshot`` updates; a replay of them,
and of what compaction leaves of them, gives back the state that was written."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest

from kaflite.cluster.groups._timer import ManualTimer
from kaflite.cluster.share import AckType, BatchSpan, SharePartition
from kaflite.cluster.share._config import ShareConfig
from kaflite.cluster.share._persister import PersistedState
from kaflite.cluster.share._state import (
    ShareStateShard,
    StateKey,
    decode_state_record,
    delta,
    merge_update,
)
from kaflite.protocol.records import encode_batch, iter_batches

KEY: StateKey = ("g", uuid.UUID(int=7), 0)
Record = tuple[bytes, bytes | None]


def per_offset(state: PersistedState) -> dict[int, tuple[int, int]]:
    return {o: (int(b.state), b.delivery_count) for b in state.batches
            for o in range(max(b.first, state.start_offset), b.last + 1)}


class Log:
    """The shard's partition: every record it appended."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    def write(self, records: list[Record]) -> asyncio.Future[int]:
        self.records.extend(records)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        fut.set_result(0)
        return fut

    def kinds(self) -> str:
        return "".join("S" if decode_state_record(k, v)[1] else "U" for k, v in self.records)


def compacted(records: list[Record]) -> list[Record]:
    """What compaction leaves: the last record of each key, in log order."""
    last = {k: i for i, (k, _) in enumerate(records)}
    return [r for i, r in enumerate(records) if last[r[0]] == i]


def replay(records: list[Record], per_snapshot: int) -> ShareStateShard:
    shard = ShareStateShard(0, 0, Log().write, per_snapshot)
    data = encode_batch([v for _, v in records], keys=[k for k, _ in records])
    for batch in iter_batches(data):
        shard.replay_batch(batch)
    shard.finish_loading()
    return shard


async def acknowledge_one_by_one(shard: ShareStateShard, count: int,
                                 rng: random.Random) -> SharePartition:
    """A leader acquires ``count`` records and acknowledges them one at a time, in a
    random order and of random types, writing its state after each (as it does)."""
    sp = SharePartition("g", "t", 0, ManualTimer(), lock_duration_ms=30_000,
                        delivery_count_limit=3, max_record_locks=2000, start_offset=0)
    assert await shard.initialize(KEY, 1, 0) == 0
    sp.acquire("m", [BatchSpan(0, count - 1)], count)
    order = list(range(count))
    rng.shuffle(order)
    for offset in order:
        kind = rng.choice([AckType.ACCEPT, AckType.ACCEPT, AckType.REJECT, AckType.RELEASE])
        sp.acknowledge("m", offset, offset, [kind])
        written = shard.write(KEY, PersistedState(1, sp.start, sp.state_batches(), 0))
        assert await written == 0
    return sp


@pytest.mark.parametrize("per_snapshot", [0, 1, 4, 500])
def test_updates_between_snapshots_and_a_replay_gives_the_same_state(per_snapshot: int) -> None:
    async def main() -> None:
        log = Log()
        shard = ShareStateShard(0, 0, log.write, per_snapshot)
        sp = await acknowledge_one_by_one(shard, 40, random.Random(per_snapshot))
        # one snapshot (the initialization), then per_snapshot updates, a snapshot, ...
        kinds = log.kinds()
        assert len(kinds) == 41
        expected = "S" + "".join("S" if i % (per_snapshot + 1) == per_snapshot else "U"
                                 for i in range(40))
        assert kinds == expected
        # what the leader wrote last is what the shard holds, and what a replay loads
        last = PersistedState(1, sp.start, sp.state_batches(), 0)
        assert shard.states[KEY].start_offset == last.start_offset
        assert per_offset(shard.states[KEY]) == per_offset(last)
        loaded = replay(log.records, per_snapshot)
        assert loaded.states[KEY].start_offset == sp.start
        assert per_offset(loaded.states[KEY]) == per_offset(last)
        assert loaded.states[KEY].state_epoch == 1
        # the cadence goes on after a load: the count of updates since the snapshot is kept
        assert loaded.update_counts[KEY] == shard.update_counts[KEY]
        assert loaded.snapshot_epochs[KEY] == shard.snapshot_epochs[KEY]
        # __share_group_state is compacted: the last snapshot and the last update suffice
        kept = compacted(log.records)
        assert len(kept) <= 2
        again = replay(kept, per_snapshot)
        assert again.states[KEY].start_offset == sp.start
        assert per_offset(again.states[KEY]) == per_offset(last)

    asyncio.run(main())


def test_an_update_holds_what_changed_since_the_snapshot() -> None:
    async def main() -> None:
        log = Log()
        shard = ShareStateShard(0, 0, log.write, 2)
        sp = SharePartition("g", "t", 0, ManualTimer(), lock_duration_ms=30_000,
                            delivery_count_limit=5, max_record_locks=2000, start_offset=0)
        await shard.initialize(KEY, 1, 0)                                       # snapshot
        sp.acquire("m", [BatchSpan(0, 99)], 100)
        await shard.write(KEY, PersistedState(1, sp.start, sp.state_batches(), 0))  # update
        sp.acknowledge("m", 50, 50, [AckType.ACCEPT])
        await shard.write(KEY, PersistedState(1, sp.start, sp.state_batches(), 0))  # update
        sp.acknowledge("m", 60, 61, [AckType.REJECT, AckType.REJECT])
        await shard.write(KEY, PersistedState(1, sp.start, sp.state_batches(), 0))  # snapshot
        sp.acknowledge("m", 70, 70, [AckType.ACCEPT])
        await shard.write(KEY, PersistedState(1, sp.start, sp.state_batches(), 0))  # update
        assert log.kinds() == "SUUSU"
        skey, snapshot, update = decode_state_record(*log.records[-1])
        assert (skey, snapshot) == (KEY, False)
        assert update is not None
        assert [(b.first, b.last, int(b.state)) for b in update.batches] == [(70, 70, 2)]
        sp.acknowledge("m", 80, 80, [AckType.ACCEPT])
        await shard.write(KEY, PersistedState(1, sp.start, sp.state_batches(), 0))  # update
        _, _, update = decode_state_record(*log.records[-1])
        assert update is not None                # everything since the snapshot
        assert [(b.first, b.last, int(b.state)) for b in update.batches] == [
            (70, 70, 2), (80, 80, 2)]

    asyncio.run(main())


def test_delta_refuses_what_an_update_cannot_say() -> None:
    from kaflite.cluster.share import RecordState
    from kaflite.cluster.share._partition import StateBatch

    old = PersistedState(1, 0, [StateBatch(0, 9, RecordState.AVAILABLE, 1)], 0)
    shorter = PersistedState(1, 0, [StateBatch(0, 4, RecordState.AVAILABLE, 1)], 0)
    assert delta(old, old, shorter) is None                      # offsets 5-9 would stay
    assert delta(old, old, PersistedState(2, 0, old.batches, 0)) is None   # a new state epoch
    moved = PersistedState(1, 3, [StateBatch(3, 9, RecordState.AVAILABLE, 1)], 0)
    step = delta(old, old, moved)
    assert step is not None and step.batches == [] and step.start_offset == 3
    assert per_offset(merge_update(old, step)) == per_offset(moved)


def test_the_records_per_snapshot_setting_is_checked() -> None:
    assert ShareConfig.from_props({}).updates_per_snapshot == 500
    assert ShareConfig.from_props(
        {"share.coordinator.snapshot.update.records.per.snapshot": "0"}).updates_per_snapshot == 0
    with pytest.raises(ValueError, match=r"between \[0, 500\]"):
        ShareConfig.from_props({"share.coordinator.snapshot.update.records.per.snapshot": "501"})
