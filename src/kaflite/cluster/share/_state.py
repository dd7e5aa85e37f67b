"""The share coordinator's state: one ``__share_group_state`` partition's worth.

Kafka keeps every share-partition's durable state in ``__share_group_state``,
keyed by (group id, topic id, partition), in two record types: ShareSnapshot
(key version 0: the whole state) and ShareUpdate (key version 1: changed
batches, merged over the last snapshot). Values carry an int16 version (0).

A write is a ShareUpdate, as Kafka's ``ShareCoordinatorShard.generateShareStateRecord``
makes it, until ``share.coordinator.snapshot.update.records.per.snapshot`` (500,
0-500) updates followed the last snapshot: then the whole state goes out as a
ShareSnapshot (with the next snapshot epoch), and so does the first write of a key,
an initialization (a new state epoch) and a write no update can express (offsets the
state had that the new one lacks). Updates carry the snapshot epoch they follow.
Loading replays both, counting the updates since each key's last snapshot, so the
cadence goes on across coordinator moves.

One difference from Kafka, for compaction: kaflite's ``__share_group_state`` is
compacted (Kafka's is ``cleanup.policy=delete`` and its coordinator prunes the log
before the oldest snapshot it still needs). Compaction keeps the last record of each
key, and a ShareUpdate's key (version 1) is not its snapshot's (version 0), so an
update holds every offset changed since the last snapshot (not only since the
previous update): the last update alone over the last snapshot is the state, and a
replay of every update, in order, gives the same.

The shard fences writers as Kafka's ``ShareCoordinatorShard`` does: a write
with an older state epoch than the stored one gets FENCED_STATE_EPOCH (the
state was re-initialized since: AlterShareGroupOffsets,
DeleteShareGroupOffsets), one with an older leader epoch FENCED_LEADER_EPOCH
(a newer partition leader took over: its read moved the leader epoch on).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import struct
import time
import uuid
from collections.abc import Callable

from kaflite.cluster._sharded import ShardLifecycle, ShardState
from kaflite.cluster.groups._records import read_exactly, split_version
from kaflite.cluster.internal_topics import SHARE_STATE_TOPIC
from kaflite.cluster.log._files import format_topic_id
from kaflite.cluster.share._partition import RecordState, StateBatch
from kaflite.cluster.share._persister import PersistedState
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    ShareSnapshotKey,
    ShareSnapshotValue,
    ShareUpdateKey,
    ShareUpdateValue,
)
from kaflite.protocol.messages import share_snapshot_value as ssv
from kaflite.protocol.messages import share_update_value as suv
from kaflite.protocol.records import RecordBatch

__all__ = ["SHARE_STATE_TOPIC", "ShareStateShard", "StateKey", "decode_state_record",
           "delta", "encode_snapshot", "encode_update", "read_snapshot", "state_key"]

log = logging.getLogger("kaflite.cluster.share")

SNAPSHOT_KEY_VERSION, UPDATE_KEY_VERSION = 0, 1
VALUE_VERSION = 0
_I16 = struct.Struct(">h")

StateKey = tuple[str, uuid.UUID, int]
Record = tuple[bytes, bytes | None]


def state_key(group_id: str, topic_id: uuid.UUID, partition: int) -> str:
    """The FindCoordinator key (KeyType SHARE) of a share-partition: ``group:topicId:partition``."""
    return f"{group_id}:{format_topic_id(topic_id)}:{partition}"


def encode_snapshot(key: StateKey, state: PersistedState, snapshot_epoch: int,
                    created_ms: int = -1, written_ms: int = -1) -> Record:
    """A ShareSnapshot; ``created_ms`` is when the key's state was initialised."""
    k = _I16.pack(SNAPSHOT_KEY_VERSION) + ShareSnapshotKey(
        group_id=key[0], topic_id=key[1], partition=key[2]).encode(0)
    v = _I16.pack(VALUE_VERSION) + ShareSnapshotValue(
        snapshot_epoch=snapshot_epoch, state_epoch=state.state_epoch,
        leader_epoch=state.leader_epoch, start_offset=state.start_offset,
        create_timestamp=created_ms, write_timestamp=written_ms,
        state_batches=[ssv.StateBatch(b.first, b.last, int(b.state), b.delivery_count)
                       for b in state.batches]).encode(0)
    return k, v


def encode_update(key: StateKey, update: PersistedState, snapshot_epoch: int) -> Record:
    """A ShareUpdate: the changed batches, the start offset and the leader epoch."""
    k = _I16.pack(UPDATE_KEY_VERSION) + ShareUpdateKey(
        group_id=key[0], topic_id=key[1], partition=key[2]).encode(UPDATE_KEY_VERSION)
    v = _I16.pack(VALUE_VERSION) + ShareUpdateValue(
        snapshot_epoch=snapshot_epoch, leader_epoch=update.leader_epoch,
        start_offset=update.start_offset,
        state_batches=[suv.StateBatch(b.first, b.last, int(b.state), b.delivery_count)
                       for b in update.batches]).encode(0)
    return k, v


def _per_offset(state: PersistedState) -> dict[int, tuple[RecordState, int]]:
    return {o: (b.state, b.delivery_count) for b in state.batches
            for o in range(max(b.first, state.start_offset), b.last + 1)}


def delta(snapshot: PersistedState, current: PersistedState,
          new: PersistedState) -> PersistedState | None:
    """The ShareUpdate that takes both the last ``snapshot`` and the ``current`` state
    (the snapshot with the updates since) to ``new`` under ``merge_update``: every
    offset whose state or count differs from either, as runs. None when no update can
    say it (the state epoch moved, or ``new`` lacks offsets the others have at or past
    its start)."""
    if new.state_epoch != current.state_epoch or new.state_epoch != snapshot.state_epoch:
        return None
    after = _per_offset(new)
    bases = (_per_offset(snapshot), _per_offset(current))
    if any(o >= new.start_offset and o not in after for base in bases for o in base):
        return None
    out: list[StateBatch] = []
    for o in sorted(after):
        state, count = after[o]
        if all(base.get(o) == (state, count) for base in bases):
            continue
        last = out[-1] if out else None
        if last is not None and last.last == o - 1 and last.state is state \
                and last.delivery_count == count:
            out[-1] = StateBatch(last.first, o, state, count)
        else:
            out.append(StateBatch(o, o, state, count))
    return PersistedState(-1, new.start_offset, out, new.leader_epoch)


def _batches(raw: list[ssv.StateBatch]) -> list[StateBatch]:
    out = []
    for b in raw:
        try:
            state = RecordState(b.delivery_state)
        except ValueError:
            state = RecordState.AVAILABLE
        out.append(StateBatch(b.first_offset, b.last_offset, state, b.delivery_count))
    return out


# Kafka 4.0's layouts of the two values (as kaflite wrote them before): Kafka 4.1 made
# SnapshotEpoch an int32 (a uint16 first) and put CreateTimestamp and WriteTimestamp
# (unknown here) after a snapshot's StartOffset (18 bytes in).
def _upgrade_snapshot(body: memoryview) -> bytes:
    return b"\0\0" + bytes(body[:18]) + _UNKNOWN_TIMES + bytes(body[18:])


def _upgrade_update(body: memoryview) -> bytes:
    return b"\0\0" + bytes(body)


_UNKNOWN_TIMES = struct.pack(">qq", -1, -1)


def read_snapshot(value: bytes | memoryview) -> ShareSnapshotValue:
    """A ShareSnapshot's value (after its int16 version), in either layout of version 0."""
    return read_exactly(ShareSnapshotValue, memoryview(value)[2:], VALUE_VERSION,
                        _upgrade_snapshot)


def decode_state_record(key: bytes | memoryview, value: bytes | memoryview | None
                        ) -> tuple[StateKey, bool, PersistedState | None, int]:
    """(key, is_snapshot, state or None for a tombstone, a snapshot's create time or -1)."""
    version, r = split_version(key)
    if version == SNAPSHOT_KEY_VERSION:
        k = ShareSnapshotKey.read(r, 0)
        skey = (k.group_id, k.topic_id, k.partition)
        if value is None:
            return skey, True, None, -1
        s = read_snapshot(value)
        return skey, True, PersistedState(s.state_epoch, s.start_offset,
                                          _batches(s.state_batches), s.leader_epoch), \
            s.create_timestamp
    if version == UPDATE_KEY_VERSION:
        u = ShareUpdateKey.read(r, UPDATE_KEY_VERSION)
        skey = (u.group_id, u.topic_id, u.partition)
        if value is None:
            return skey, False, None, -1
        uv = read_exactly(ShareUpdateValue, memoryview(value)[2:], VALUE_VERSION, _upgrade_update)
        return skey, False, PersistedState(-1, uv.start_offset, _batches(
            [ssv.StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
             for b in uv.state_batches]), uv.leader_epoch), -1
    raise ValueError(f"unknown __share_group_state key version {version}")


def merge_update(base: PersistedState, update: PersistedState) -> PersistedState:
    """A ShareUpdate over a state: its batches replace the offsets they cover.

    The batches are laid over one another in order (a later one wins where they overlap),
    from the update's start offset on, and neighbours with one state and count are joined.
    It works on the runs' ends, not on each offset: a partition's state is replayed once
    per ShareUpdate when a coordinator loads it, and a per-offset merge made that
    quadratic (a broker's stop after franz-go's share tests spent seconds here)."""
    start = update.start_offset if update.start_offset >= 0 else base.start_offset
    layers = [b for b in (*base.batches, *update.batches) if b.last >= start]
    ends = sorted({max(b.first, start) for b in layers} | {b.last + 1 for b in layers})
    opening: dict[int, list[int]] = {}
    closing: dict[int, list[int]] = {}
    for i, b in enumerate(layers):
        opening.setdefault(max(b.first, start), []).append(i)
        closing.setdefault(b.last + 1, []).append(i)
    active: list[int] = []     # a max-heap of the layers over the current run (negated)
    gone: set[int] = set()
    merged: list[StateBatch] = []
    for at, upto in itertools.pairwise(ends):
        gone.update(closing.get(at, ()))
        for i in opening.get(at, ()):
            heapq.heappush(active, -i)
        while active and -active[0] in gone:
            heapq.heappop(active)
        if not active:
            continue
        top = layers[-active[0]]
        last = merged[-1] if merged else None
        if last is not None and last.last == at - 1 and last.state is top.state \
                and last.delivery_count == top.delivery_count:
            merged[-1] = StateBatch(last.first, upto - 1, top.state, top.delivery_count)
        else:
            merged.append(StateBatch(at, upto - 1, top.state, top.delivery_count))
    return PersistedState(base.state_epoch, start, merged,
                          max(base.leader_epoch, update.leader_epoch))


class ShareStateShard(ShardLifecycle):
    def __init__(self, index: int, epoch: int,
                 write: Callable[[list[Record]], asyncio.Future[int]],
                 updates_per_snapshot: int = 500) -> None:
        self.index = index
        self.epoch = epoch
        self.write_records = write
        self.updates_per_snapshot = updates_per_snapshot
        self.states: dict[StateKey, PersistedState] = {}
        self.snapshot_epochs: dict[StateKey, int] = {}
        self.snapshots: dict[StateKey, PersistedState] = {}    # each key's last snapshot
        self.update_counts: dict[StateKey, int] = {}    # ShareUpdates since the last snapshot
        self.created_ms: dict[StateKey, int] = {}    # when each key's state was initialised
        self.records_loaded = 0

    # -- loading --------------------------------------------------------------------------------
    def replay_batch(self, batch: RecordBatch) -> None:
        if batch.is_control:
            return
        cols = batch.columns()
        for key, value in zip(cols.keys, cols.values, strict=True):
            if key is None:
                continue
            try:
                skey, snapshot, state, created_ms = decode_state_record(key, value)
            except Exception as exc:  # one bad record must not lose the partition
                log.warning("%s-%s: skipping unreadable record: %s", SHARE_STATE_TOPIC,
                            self.index, exc)
                continue
            self._apply(skey, snapshot, state)
            if snapshot and state is not None:
                self.created_ms[skey] = created_ms
            self.records_loaded += 1

    def _apply(self, key: StateKey, snapshot: bool, state: PersistedState | None) -> None:
        if state is None:
            self.states.pop(key, None)
            self.snapshot_epochs.pop(key, None)
            self.snapshots.pop(key, None)
            self.update_counts.pop(key, None)
            self.created_ms.pop(key, None)
        elif snapshot:
            self.states[key] = self.snapshots[key] = state
            self.snapshot_epochs[key] = self.snapshot_epochs.get(key, -1) + 1
            self.update_counts[key] = 0
        else:
            base = self.states.get(key)
            if base is not None:
                self.states[key] = merge_update(base, state)
                self.update_counts[key] = self.update_counts.get(key, 0) + 1

    def finish_loading(self) -> None:
        self.state = ShardState.ACTIVE

    def close(self) -> None:
        self.state = ShardState.CLOSED

    def summary(self) -> str:
        return f"{self.records_loaded} records, {len(self.states)} share-partitions"

    # -- the Persister operations -------------------------------------------------------------
    def read(self, key: StateKey, leader_epoch: int) -> tuple[PersistedState | None,
                                                              asyncio.Future[int] | None]:
        """ReadShareGroupState: the state, after moving its leader epoch on (written)."""
        state = self.states.get(key)
        if state is None:
            return None, None
        if leader_epoch < 0:     # a tool's look (kaflite groups): nothing is fenced or moved
            return state, None
        if leader_epoch < state.leader_epoch:
            raise errors.FencedLeaderEpochError(
                f"Leader epoch {leader_epoch} is older than {state.leader_epoch}.")
        if leader_epoch == state.leader_epoch:
            return state, None
        moved = PersistedState(state.state_epoch, state.start_offset, state.batches, leader_epoch)
        return moved, self._change(key, moved)

    def write(self, key: StateKey, state: PersistedState) -> asyncio.Future[int]:
        """WriteShareGroupState: fenced by the state epoch, then by the leader epoch."""
        old = self.states.get(key)
        if old is None:   # deleted (DeleteGroups) since the leader read it: start over
            return _done(errors.FencedStateEpochError.code)
        if state.state_epoch < old.state_epoch:
            return _done(errors.FencedStateEpochError.code)
        if state.leader_epoch < old.leader_epoch:
            return _done(errors.FencedLeaderEpochError.code)
        return self._change(key, state)

    def initialize(self, key: StateKey, state_epoch: int, start_offset: int) -> asyncio.Future[int]:
        """InitializeShareGroupState: a new state epoch starting at ``start_offset``."""
        old = self.states.get(key)
        if old is not None and state_epoch < old.state_epoch:
            return _done(errors.FencedStateEpochError.code)
        leader = -1 if old is None else old.leader_epoch
        self.created_ms[key] = _now_ms()
        return self._store(key, PersistedState(state_epoch, start_offset, [], leader))

    def delete(self, key: StateKey) -> asyncio.Future[int]:
        """DeleteShareGroupState: a tombstone."""
        if key not in self.states:
            return _done(0)
        k = _I16.pack(SNAPSHOT_KEY_VERSION) + ShareSnapshotKey(
            group_id=key[0], topic_id=key[1], partition=key[2]).encode(0)
        self._apply(key, True, None)
        return self.write_records([(k, None)])

    def bump_state_epoch(self, key: StateKey) -> asyncio.Future[int] | None:
        """Fault injection: the state epoch moves on, the state kept (as if re-initialized
        where it stood): the partition leader's next write gets FENCED_STATE_EPOCH."""
        old = self.states.get(key)
        if old is None:
            return None
        return self._store(key, PersistedState(old.state_epoch + 1, old.start_offset,
                                               old.batches, old.leader_epoch))

    def _store(self, key: StateKey, state: PersistedState) -> asyncio.Future[int]:
        """A ShareSnapshot of the whole state."""
        self._apply(key, True, state)
        now = _now_ms()
        created = self.created_ms.setdefault(key, now)
        return self.write_records([encode_snapshot(key, state, self.snapshot_epochs[key],
                                                   created, now)])

    def _change(self, key: StateKey, state: PersistedState) -> asyncio.Future[int]:
        """A write: a ShareUpdate with what changed since the last snapshot, or a
        ShareSnapshot every ``updates_per_snapshot`` updates (or when no update can
        express it)."""
        old, last = self.states.get(key), self.snapshots.get(key)
        if old is None or last is None \
                or self.update_counts.get(key, 0) >= self.updates_per_snapshot:
            return self._store(key, state)
        update = delta(last, old, state)
        if update is None:
            return self._store(key, state)
        self._apply(key, False, update)
        return self.write_records([encode_update(key, update, self.snapshot_epochs[key])])


def _now_ms() -> int:
    return int(time.time() * 1000)


def _done(code: int) -> asyncio.Future[int]:
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    fut.set_result(code)
    return fut
