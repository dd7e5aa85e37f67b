"""The __consumer_offsets codec (Kafka's byte layout) and loading a shard from a real log."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path

from kaflite.cluster.groups import CoordinatorShard, GroupConfig, GroupState
from kaflite.cluster.groups._consumer_records import ConsumerRecord
from kaflite.cluster.groups._records import (
    CoordinatorRecord,
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    OtherKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    split_version,
)
from kaflite.cluster.groups._shard import load_shard
from kaflite.cluster.groups._share_records import ShareRecord
from kaflite.cluster.groups._timer import ManualTimer
from kaflite.cluster.log import AppendOrigin, LogConfig, PartitionLog
from kaflite.protocol.messages import (
    GroupMetadataValue,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataValue,
)
from kaflite.protocol.messages import group_metadata_value as gmv
from kaflite.protocol.messages import share_group_state_partition_metadata_value as sspm
from kaflite.protocol.records import encode_batch

from .helpers import TOPIC, FakeLog, commit_req, join_dynamic, make_shard, run, settle, sync_req


def s16(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_offset_commit_key_and_value_bytes() -> None:
    # Kafka: OffsetCommitKey v1 = version, group, topic, partition (all big-endian).
    assert encode_offset_key("grp", "tp", 7) == \
        struct.pack(">h", 1) + s16("grp") + s16("tp") + struct.pack(">i", 7)
    # OffsetCommitValue v3 = version, offset, leader epoch, metadata, commit timestamp.
    om = OffsetAndMetadata(42, 5, "meta", 1_700_000_000_123)
    assert encode_offset_value(om) == \
        struct.pack(">hqi", 3, 42, 5) + s16("meta") + struct.pack(">q", 1_700_000_000_123)
    # With an explicit expiry Kafka writes v1: offset, metadata, commit ts, expire ts.
    om1 = OffsetAndMetadata(42, 5, "", 1000, 2000)
    assert encode_offset_value(om1) == struct.pack(">hq", 1, 42) + s16("") + \
        struct.pack(">qq", 1000, 2000)
    assert decode_offset_value(encode_offset_value(om)) == om
    assert decode_offset_value(encode_offset_value(om1)) == \
        OffsetAndMetadata(42, -1, "", 1000, 2000)  # v1 has no leader epoch


def test_group_metadata_key_bytes_and_other_record_types() -> None:
    assert encode_group_key("grp") == struct.pack(">h", 2) + s16("grp")
    assert decode_key(encode_group_key("grp")) == GroupKey("grp")
    # Key version 0 (pre-2.x Kafka) decodes as an offset key too.
    v0 = struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 1)
    assert decode_key(v0) == OffsetKey("g", "t", 1)
    # KIP-848 records (type 3+) are recognised and skipped by a classic coordinator.
    assert decode_key(struct.pack(">h", 3) + s16("g")) == OtherKey(3)


def test_consumer_and_share_group_record_bytes() -> None:
    """Types 3-8 and 10/11/14/15: key = type, group id (and member id for a member's
    type); value = version 0 and the struct. Each decodes back to the same record."""
    cases: list[tuple[type[CoordinatorRecord], set[int]]] = [
        (ConsumerRecord, {5, 7, 8}), (ShareRecord, {10, 14})]
    for cls, member_types in cases:
        assert set(cls.KEYS) == set(cls.VALUES)
        for kind, value_cls in cls.VALUES.items():
            member = "m" if kind in member_types else None
            rec = cls(kind, "g", member, value_cls())
            key, value = rec.encode()
            assert key == struct.pack(">h", kind) + s16("g") + (s16("m") if member else b"")
            assert value == struct.pack(">h", 0) + value_cls().encode(0)
            back = cls.decode(*split_version(key), value)
            assert type(back) is cls and back == rec
            tombstone = cls(kind, "g", member, None)
            assert tombstone.encode() == (key, None)
            assert cls.decode(*split_version(key), None) == tombstone


def test_share_group_values_in_kafka_4_1_layouts_and_4_0_ones_still_load() -> None:
    """Kafka 4.1 changed version 0 of two share-group values in place (ShareGroupMetadata
    gained an int64 MetadataHash after the epoch; ShareGroupStatePartitionMetadata a list
    of initializing topics ahead of the initialized ones): kaflite writes the new layouts
    (Kafka 4.4's kafka-dump-log reads them: tests/interop/test_kafka_tools.py), and still
    loads what it wrote in 4.0's."""
    epoch = ShareRecord(11, "g", None, ShareGroupMetadataValue(epoch=7, metadata_hash=0))
    key, value = epoch.encode()
    assert value == struct.pack(">hiqB", 0, 7, 0, 0)
    old = struct.pack(">hiB", 0, 7, 0)
    assert ShareRecord.decode(*split_version(key), old) == epoch

    tid = uuid.UUID(int=5)
    state = ShareRecord(15, "g", None, ShareGroupStatePartitionMetadataValue(
        initializing_topics=[], initialized_topics=[sspm.TopicPartitionsInfo(tid, "t", [0, 1])],
        deleting_topics=[]))
    key, value = state.encode()
    assert value is not None
    topics = bytes([2]) + tid.bytes + s16c("t") + bytes([3]) + struct.pack(">ii", 0, 1) + b"\0"
    assert value == struct.pack(">h", 0) + bytes([1]) + topics + bytes([1]) + b"\0"
    old = struct.pack(">h", 0) + topics + bytes([1]) + b"\0"      # initialized, deleting, tags
    assert ShareRecord.decode(*split_version(key), old) == state


def s16c(text: str) -> bytes:
    """A compact string."""
    return bytes([len(text) + 1]) + text.encode()


def test_newer_value_versions_still_load() -> None:
    """KIP-915: a flexible v4 value (with tagged fields) reads as the fields we know."""
    v4 = struct.pack(">hqi", 4, 9, -1) + bytes([len("x") + 1]) + b"x" + struct.pack(">q", 77) + \
        bytes([1, 0, 1, 0xFF])  # one unknown tagged field
    assert decode_offset_value(v4) == OffsetAndMetadata(9, -1, "x", 77)


@run
async def test_replay_rebuilds_groups_and_offsets() -> None:
    source, timer, log = make_shard()
    f = await join_dynamic(source, group="g", instance_id=None)
    timer.advance(0)
    me = f.result().member_id
    await source.classic.sync(sync_req("g", me, 1, {me: b"assignment"}))
    await settle()
    await source.offset_manager.commit(commit_req(member=me, generation=1,
                                                  offsets={0: 5, 1: 6}), 8)
    await source.offset_manager.commit(commit_req("simple", offsets={2: 9}), 8)
    await source.offset_manager.commit(commit_req("gone", offsets={0: 1}), 8)
    await source.offset_manager.delete_groups(["gone"])
    await source.offset_manager.delete_offsets("simple", [(TOPIC, [3])])  # nothing to delete

    target = CoordinatorShard(0, 1, FakeLog(), ManualTimer(), GroupConfig(), lambda t: True)
    for key, value in log.records:
        target.replay(key, value)
    target.finish_loading()
    g = target.groups["g"]
    assert g.state is GroupState.STABLE and g.generation_id == 1 and g.leader_id == me
    assert g.protocol_type == "consumer" and g.protocol_name == "range"
    assert bytes(g.members[me].assignment) == b"assignment"
    assert g.subscribed_topics == {TOPIC}
    assert target.offsets["g"] == source.offsets["g"]
    assert target.offsets["simple"] == source.offsets["simple"]
    assert target.groups["simple"].state is GroupState.EMPTY
    assert "gone" not in target.groups and "gone" not in target.offsets
    # Loaded members have running sessions again.
    assert target.timer.is_scheduled(f"heartbeat-g-{me}")


@run
async def test_load_shard_from_a_partition_log() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        plog = PartitionLog.open(Path(tmp) / "__consumer_offsets-0", LogConfig(), now_ms=0)
        offsets = [OffsetAndMetadata(i, -1, "", 1) for i in range(3)]
        batch = encode_batch([encode_offset_value(o) for o in offsets],
                             keys=[encode_offset_key("g", TOPIC, i) for i in range(3)],
                             base_timestamp=1)
        plog.append_as_leader(batch, 0, now_ms=1, origin=AppendOrigin.COORDINATOR)
        tomb = encode_batch([None], keys=[encode_offset_key("g", TOPIC, 1)], base_timestamp=2)
        plog.append_as_leader(tomb, 0, now_ms=2, origin=AppendOrigin.COORDINATOR)
        shard = CoordinatorShard(0, 0, FakeLog(), ManualTimer(), GroupConfig(), lambda t: True)
        assert shard.loading
        done = await load_shard(shard, plog, lambda: True, chunk_bytes=64)  # many small reads
        assert done
        assert sorted(shard.offsets["g"]) == [(TOPIC, 0), (TOPIC, 2)]
        abandoned = CoordinatorShard(0, 0, FakeLog(), ManualTimer(), GroupConfig(),
                                     lambda t: True)
        assert not await load_shard(abandoned, plog, lambda: False, chunk_bytes=64)
        plog.close()


def test_group_value_round_trip_fields() -> None:
    value = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range",
                               leader="m1", current_state_timestamp=5, members=[
                                   gmv.MemberMetadata("m1", "i1", "c", "/h", 30, 10, b"s", b"a")])
    data = encode_group_value(value)
    assert struct.unpack_from(">h", data)[0] == 3
    back = decode_group_value(data)
    assert back.members[0].group_instance_id == "i1" and bytes(back.members[0].assignment) == b"a"
