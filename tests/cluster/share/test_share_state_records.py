"""The share coordinator's records: ShareUpdates between ShareSnapshots, every
``share.coordinator.snapshot.update.records.per.snapshot`` updates; a replay of them,
and of what compaction leaves of them, gives back the state that was written."""

from __future__ import annotations

import asyncio
import itertools
import random
import struct
import time
import uuid
from pathlib import Path

import pytest

from kaflite.client import AcknowledgeType, Producer, ShareConsumer
from kaflite.cluster import Cluster
from kaflite.cluster.groups._timer import ManualTimer
from kaflite.cluster.share import AckType, BatchSpan, SharePartition
from kaflite.cluster.share._config import ShareConfig
from kaflite.cluster.share._partition import RecordState, StateBatch
from kaflite.cluster.share._persister import PersistedState
from kaflite.cluster.share._state import (
    ShareStateShard,
    StateKey,
    decode_state_record,
    delta,
    encode_snapshot,
    encode_update,
    merge_update,
)
from kaflite.protocol.records import encode_batch, iter_batches
from tests.conftest import wait_for

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
        skey, snapshot, update, _ = decode_state_record(*log.records[-1])
        assert (skey, snapshot) == (KEY, False)
        assert update is not None
        assert [(b.first, b.last, int(b.state)) for b in update.batches] == [(70, 70, 2)]
        sp.acknowledge("m", 80, 80, [AckType.ACCEPT])
        await shard.write(KEY, PersistedState(1, sp.start, sp.state_batches(), 0))  # update
        _, _, update, _ = decode_state_record(*log.records[-1])
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


def _states(cluster: Cluster, group: str) -> dict[StateKey, dict[int, tuple[int, int]]]:
    out: dict[StateKey, dict[int, tuple[int, int]]] = {}
    for broker in cluster.brokers.values():
        if broker.share_coordinator is not None:
            for key, state in broker.share_coordinator.states().items():
                if key[0] == group:
                    out[key] = {-1: (state.start_offset, state.state_epoch),
                                **per_offset(state)}
    return out


def _shards(cluster: Cluster, group: str) -> list[tuple[ShareStateShard, StateKey]]:
    assert all(b.share_coordinator is not None for b in cluster.brokers.values())
    return [(shard, key) for b in cluster.brokers.values() if b.share_coordinator is not None
            for shard in b.share_coordinator.active_shards() for key in shard.states
            if key[0] == group]


async def _accept_one_at_a_time(servers: str, topic: str, group: str,
                                count: int) -> set[bytes]:
    async with ShareConsumer({"bootstrap.servers": servers, "group.id": group,
                              "share.acknowledgement.mode": "explicit",
                              "max.poll.records": 3}) as consumer:
        consumer.subscribe([topic])
        done: set[bytes] = set()
        deadline = time.monotonic() + 30
        while len(done) < count and time.monotonic() < deadline:
            for record in await consumer.poll(200):
                if len(done) == count:    # the rest of this poll is released at close
                    break
                assert record.value not in done          # an accepted record never comes back
                # every third is released (delivered again), the others accepted
                again = record.delivery_count == 1 and int(record.value or b"0") % 3 == 0
                consumer.acknowledge(record, AcknowledgeType.RELEASE if again
                                     else AcknowledgeType.ACCEPT)
                if not again:
                    done.add(record.value or b"")
                results = await consumer.commit_sync()   # one state write per record
                assert all(e is None for e in results.values()), results
        assert len(done) == count
        return done


def test_a_restart_loads_the_state_written_as_updates_and_snapshots(tmp_path: Path) -> None:
    config = {"share.coordinator.snapshot.update.records.per.snapshot": 4}
    topic = group = "updates"
    with Cluster(brokers=1, data_dir=tmp_path, config=config) as cluster:
        cluster.create_topic(topic, 1, 1)
        share = cluster.brokers[0].share
        assert share is not None
        share.group_configs[group] = {"share.auto.offset.reset": "earliest"}
        asyncio.run(_produce(cluster.bootstrap_servers, topic, 30))
        done = asyncio.run(_accept_one_at_a_time(cluster.bootstrap_servers, topic, group, 24))
        before = _states(cluster, group)
        [(shard, key)] = _shards(cluster, group)
        snapshots = shard.snapshot_epochs[key] + 1
        assert snapshots >= 5                 # many writes: a snapshot after every 4 updates
        assert shard.update_counts[key] <= 4
    with Cluster(brokers=1, data_dir=tmp_path, config=config) as cluster:
        wait_for(lambda: _states(cluster, group) == before, "the share state to load")
        [(shard, key)] = _shards(cluster, group)
        # the log holds the snapshots with 4 updates before each (but the first)
        updates = shard.records_loaded - snapshots
        assert 4 * (snapshots - 1) <= updates <= 4 * snapshots
        share = cluster.brokers[0].share
        assert share is not None
        share.group_configs[group] = {"share.auto.offset.reset": "earliest"}
        # the records not yet accepted, and nothing else, are delivered after the restart
        rest = {str(i).encode() for i in range(30)} - done
        asyncio.run(_accept_rest(cluster.bootstrap_servers, topic, group, rest))


async def _produce(servers: str, topic: str, count: int) -> None:
    async with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as producer:
        for i in range(count):
            producer.produce(topic, str(i).encode(), partition=0)
        await producer.flush()


async def _accept_rest(servers: str, topic: str, group: str, rest: set[bytes]) -> None:
    async with ShareConsumer({"bootstrap.servers": servers, "group.id": group}) as consumer:
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < len(rest) and time.monotonic() < deadline:
            got.extend(r.value or b"" for r in await consumer.poll(200))
        got.extend(r.value or b"" for r in await consumer.poll(500))
        await consumer.commit_sync()
    assert sorted(got) == sorted(rest)


def test_value_layouts_of_kafka_4_1_and_the_4_0_ones_still_load() -> None:
    """Kafka 4.1 changed version 0 of both values in place: SnapshotEpoch an int32 (a
    uint16 before), and a snapshot's CreateTimestamp and WriteTimestamp after its start
    offset. kaflite writes the new layouts (Kafka 4.4's kafka-dump-log reads them:
    tests/interop/test_kafka_tools.py) and still loads what it wrote in 4.0's."""
    state = PersistedState(3, 10, [StateBatch(10, 12, RecordState.ACKNOWLEDGED, 1)], 4)
    batch = struct.pack(">qqbh", 10, 12, 2, 1) + b"\0"
    key, value = encode_snapshot(KEY, state, 70_000, created_ms=111, written_ms=222)
    assert value == struct.pack(">hiiiqqq", 0, 70_000, 3, 4, 10, 111, 222) + \
        bytes([2]) + batch + b"\0"
    assert decode_state_record(key, value) == (KEY, True, state, 111)
    old = struct.pack(">hHiiq", 0, 9, 3, 4, 10) + bytes([2]) + batch + b"\0"
    assert decode_state_record(key, old) == (KEY, True, state, -1)

    update = PersistedState(-1, 11, [StateBatch(11, 12, RecordState.ACKNOWLEDGED, 1)], 4)
    ubatch = struct.pack(">qqbh", 11, 12, 2, 1) + b"\0"
    key, value = encode_update(KEY, update, 70_000)
    assert value == struct.pack(">hiiq", 0, 70_000, 4, 11) + bytes([2]) + ubatch + b"\0"
    assert decode_state_record(key, value) == (KEY, False, update, -1)
    old = struct.pack(">hHiq", 0, 9, 4, 11) + bytes([2]) + ubatch + b"\0"
    assert decode_state_record(key, old) == (KEY, False, update, -1)


def _per_offset_merge(base: PersistedState, update: PersistedState) -> dict[int, tuple[str, int]]:
    """The rule, one offset at a time: the last batch over an offset from the start on wins."""
    start = update.start_offset if update.start_offset >= 0 else base.start_offset
    out: dict[int, tuple[str, int]] = {}
    for b in [*base.batches, *update.batches]:
        for o in range(max(b.first, start), b.last + 1):
            out[o] = (b.state.name, b.delivery_count)
    return out


def test_an_update_lays_its_batches_over_the_state_as_offsets_would() -> None:
    """``merge_update`` works on the batches' ends (a per-offset merge made a coordinator's
    load quadratic); seeded random states and updates give what the per-offset rule
    gives, and adjacent equal runs are joined."""
    rng = random.Random(20261130)
    states = [RecordState.AVAILABLE, RecordState.ACKNOWLEDGED, RecordState.ARCHIVED]

    def batches(n: int) -> list[StateBatch]:
        out = []
        for _ in range(n):
            first = rng.randrange(0, 60)
            out.append(StateBatch(first, first + rng.randrange(0, 12), rng.choice(states),
                                  rng.randrange(0, 3)))
        return out

    for _ in range(400):
        base = PersistedState(2, rng.randrange(0, 10), batches(rng.randrange(0, 6)), 3)
        update = PersistedState(-1, rng.choice([-1, rng.randrange(0, 40)]),
                                batches(rng.randrange(0, 6)), rng.randrange(0, 6))
        got = merge_update(base, update)
        per = {o: (b.state.name, b.delivery_count)
               for b in got.batches for o in range(b.first, b.last + 1)}
        assert per == _per_offset_merge(base, update), (base, update, got)
        pairs = list(itertools.pairwise(got.batches))
        assert all(a.last < b.first for a, b in pairs)
        assert not [(a, b) for a, b in pairs
                    if a.last + 1 == b.first and (a.state, a.delivery_count) ==
                    (b.state, b.delivery_count)], got.batches
        assert got.start_offset == (update.start_offset if update.start_offset >= 0
                                    else base.start_offset)
        assert got.leader_epoch == max(3, update.leader_epoch)
