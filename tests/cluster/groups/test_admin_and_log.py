"""Group administration through kafka-python's admin client, and __consumer_offsets read raw.

The second half is the third-party reader check: the topic's records are
fetched by kafka-python like any topic and decoded twice, with kaflite's codec
and with a struct-level decoder written here from Kafka's schemas, and both
must agree, so any tool that knows Kafka's formats reads kaflite's groups.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.groups.records import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
)

pytestmark = pytest.mark.interop

CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3}
TOPIC, GROUP = "events", "readers"


# -- an independent decoder, straight from Kafka's record schemas -------------------------------------
class Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        out = self.data[self.pos:self.pos + n].decode()
        self.pos += n
        return out

    def blob(self) -> bytes:
        n = self.take(">i")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def done(self) -> bool:
        return self.pos == len(self.data)


def hand_key(data: bytes) -> tuple[Any, ...]:
    c = Cursor(data)
    version = c.take(">h")
    if version in (0, 1):  # OffsetCommitKey: group, topic, partition
        out: tuple[Any, ...] = ("offset", c.string(), c.string(), c.take(">i"))
    elif version == 2:  # GroupMetadataKey: group
        out = ("group", c.string())
    else:
        raise AssertionError(f"unexpected key version {version}")
    assert c.done()
    return out


def hand_offset_value(data: bytes) -> tuple[int, int, str | None, int]:
    c = Cursor(data)
    assert c.take(">h") == 3  # Kafka 4.0 writes OffsetCommitValue v3
    out = (c.take(">q"), c.take(">i"), c.string(), c.take(">q"))
    assert c.done()
    return out


def hand_group_value(data: bytes) -> dict[str, Any]:
    c = Cursor(data)
    assert c.take(">h") == 3  # GroupMetadataValue v3
    out: dict[str, Any] = {"protocol_type": c.string(), "generation": c.take(">i"),
                           "protocol": c.string(), "leader": c.string(),
                           "timestamp": c.take(">q"), "members": []}
    for _ in range(c.take(">i")):
        out["members"].append({
            "member_id": c.string(), "instance_id": c.string(), "client_id": c.string(),
            "client_host": c.string(), "rebalance_timeout": c.take(">i"),
            "session_timeout": c.take(">i"), "subscription": c.blob(), "assignment": c.blob()})
    assert c.done()
    return out


def subscription_topics(data: bytes) -> list[str | None]:
    c = Cursor(data)
    c.take(">h")  # ConsumerProtocolSubscription version
    return [c.string() for _ in range(c.take(">i"))]


def read_offsets_topic(bootstrap: str) -> Iterator[tuple[bytes, bytes | None]]:
    """Every record of __consumer_offsets, fetched by kafka-python like any topic."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    tps = [TopicPartition("__consumer_offsets", p) for p in range(3)]
    consumer.assign(tps)
    end = consumer.end_offsets(tps)
    out: list[tuple[bytes, bytes | None]] = []
    deadline = time.monotonic() + 30
    while any(consumer.position(tp) < end[tp] for tp in tps):
        assert time.monotonic() < deadline, "could not read __consumer_offsets"
        for records in consumer.poll(timeout_ms=200).values():
            out += [(r.key, r.value) for r in records]
    consumer.close()
    return iter(out)


def test_admin_operations_and_the_offsets_topic_as_a_third_party_reads_it() -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, MemberToRemove

    with Cluster(brokers=1, config=CONFIG) as c:
        c.create_topic(TOPIC, 4, 1)
        bootstrap = c.bootstrap_servers
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for i in range(32):
            producer.send(TOPIC, value=b"x", partition=i % 4)
        producer.flush()
        producer.close()
        consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                                 group_instance_id="static-1", client_id="reader-1",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 session_timeout_ms=6000, heartbeat_interval_ms=500)
        read = 0
        deadline = time.monotonic() + 30
        while read < 32:
            assert time.monotonic() < deadline
            read += sum(len(v) for v in consumer.poll(200).values())
        consumer.commit()
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            # ListGroups with and without a state filter (v4+).
            assert [(g["group_id"], g["group_state"]) for g in admin.list_groups()] == \
                [(GROUP, "Stable")]
            assert admin.list_groups(states_filter=["Empty"]) == []
            described = admin.describe_groups([GROUP, "nobody"])
            group = described[GROUP]
            assert (group["group_state"], group["protocol_type"], group["protocol_data"]) == \
                ("Stable", "consumer", "range")
            [member] = group["members"]
            assert member["group_instance_id"] == "static-1"
            assert member["member_id"].startswith("static-1-")
            assert (member["client_id"], member["client_host"]) == ("reader-1", "/127.0.0.1")
            assert member["member_assignment"]["assigned_partitions"] == \
                [{"topic": TOPIC, "partitions": [0, 1, 2, 3]}]
            assert described["nobody"]["group_state"] == "Dead"
            # A group with members cannot be deleted, nor lose its subscribed offsets.
            assert admin.delete_groups([GROUP]) == {GROUP: "NonEmptyGroupError"}
            tp0 = TopicPartition(TOPIC, 0)
            assert admin.delete_group_offsets(GROUP, [tp0])[tp0].__name__ == \
                "GroupSubscribedToTopicError"
            offsets = admin.list_group_offsets({GROUP: None})[GROUP]
            assert {tp.partition: om.offset for tp, om in offsets.items()} == \
                {0: 8, 1: 8, 2: 8, 3: 8}
            # KIP-345: remove a static member by its group.instance.id (LeaveGroup v3+ batch).
            removed = admin.remove_group_members(GROUP, [MemberToRemove(group_instance_id="static-1"),
                                                         MemberToRemove(group_instance_id="ghost")])
            assert {k: v.__name__ for k, v in removed.items()} == \
                {"static-1": "NoError", "ghost": "UnknownMemberIdError"}
            consumer.close()
            assert admin.describe_groups([GROUP])[GROUP]["group_state"] == "Empty"
            assert admin.delete_group_offsets(GROUP, [tp0])[tp0].__name__ == "NoError"
            offsets = admin.list_group_offsets({GROUP: None})[GROUP]
            assert sorted(tp.partition for tp in offsets) == [1, 2, 3]

            # The raw topic, decoded twice.
            records = list(read_offsets_topic(bootstrap))
            latest: dict[bytes, bytes | None] = {}
            generations = []
            for key, value in records:
                ours = decode_key(key)
                theirs = hand_key(key)
                latest[key] = value
                if isinstance(ours, OffsetKey):
                    assert theirs == ("offset", ours.group, ours.topic, ours.partition)
                    if value is not None:
                        om = decode_offset_value(value)
                        assert hand_offset_value(value) == \
                            (om.offset, om.leader_epoch, om.metadata, om.commit_timestamp)
                else:
                    assert isinstance(ours, GroupKey) and theirs == ("group", ours.group)
                    if value is not None:
                        gv, hv = decode_group_value(value), hand_group_value(value)
                        assert (hv["protocol_type"], hv["generation"], hv["protocol"],
                                hv["leader"]) == (gv.protocol_type, gv.generation, gv.protocol,
                                                  gv.leader)
                        assert [m["member_id"] for m in hv["members"]] == \
                            [m.member_id for m in gv.members]
                        generations.append(hv)
            stable = [g for g in generations if g["members"]]
            assert stable, "no GroupMetadata record with members"
            m = stable[-1]["members"][0]
            assert (m["instance_id"], m["client_id"], m["session_timeout"]) == \
                ("static-1", "reader-1", 6000)
            assert subscription_topics(m["subscription"]) == [TOPIC]
            assert stable[-1]["protocol"] == "range" and stable[-1]["leader"] == m["member_id"]
            assert generations[-1]["members"] == [] and generations[-1]["protocol"] is None
            live = {hand_key(k): hand_offset_value(v)[0] for k, v in latest.items()
                    if v is not None and hand_key(k)[0] == "offset"}
            assert live == {("offset", GROUP, TOPIC, p): 8 for p in (1, 2, 3)}
            assert latest[next(k for k in latest if hand_key(k) ==
                               ("offset", GROUP, TOPIC, 0))] is None  # the OffsetDelete tombstone

            # DeleteGroups: tombstones for the remaining offsets and the group itself.
            assert admin.delete_groups([GROUP]) == {GROUP: "OK"}
            assert admin.describe_groups([GROUP])[GROUP]["group_state"] == "Dead"
            tail = {hand_key(k): v for k, v in read_offsets_topic(bootstrap)}
            assert tail[("group", GROUP)] is None
            assert all(tail[("offset", GROUP, TOPIC, p)] is None for p in range(4))
        finally:
            admin.close()
