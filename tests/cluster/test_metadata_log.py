"""The controller's metadata log (KIP-500) and its snapshots (KIP-630): what a
restart recovers, what a change costs, torn writes, the JSON file of older kaflites."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import uuid
from pathlib import Path

import pytest

from kaflite.cluster import delegation_tokens, metadata_image, metalog
from kaflite.cluster.controller import BrokerInfo, Controller, PartitionState, TopicState
from kaflite.protocol.messages._runtime import Struct
from kaflite.protocol.records import iter_batches
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kaflite.security.scram import scram_credential


class Quiet:
    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None:
        pass

    def on_topic_deleted(self, topic: TopicState) -> None:
        pass


def make(data_dir: Path, brokers: int = 3, **kwargs: int) -> Controller:
    c = Controller(data_dir, **kwargs)
    for i in range(brokers):
        c.register_broker(BrokerInfo(i, "127.0.0.1", 9092 + i), Quiet())
        c.broker_started(i)
    return c


def state(c: Controller) -> dict[str, object]:
    """Everything a restart must bring back, in comparable form."""
    return {
        "cluster_id": c.cluster_id,
        "next_producer_id": c.next_producer_id,
        "topics": {name: (t.topic_id, dict(t.configs),
                          [(p.replicas, p.leader, p.leader_epoch, p.isr, p.partition_epoch,
                            p.adding, p.removing) for p in t.partitions])
                   for name, t in c.topics.items()},
        "by_id": {i: t.name for i, t in c.topics_by_id.items()},
        "scram": {u: {m: cred.to_kafka() for m, cred in creds.items()}
                  for u, creds in c.scram.items()},
        "quotas": {e: dict(v) for e, v in c.client_quotas.entries.items()},
        "acls": sorted(b.to_json() for b in c.acls),
        "acl_ids": sorted((str(i), b.to_json()) for i, b in c.acl_ids.items()),
        "groups": {g: dict(v) for g, v in c.group_configs.items()},
        "features": dict(c.features),
        "tokens": dict(c.tokens),
    }


def acl(name: str, principal: str = "User:alice") -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, PatternType.LITERAL, principal, "*",
                      AclOperation.READ, AclPermissionType.ALLOW)


def busy(c: Controller) -> None:
    """One change of every kind the controller records."""
    c.create_topic("a", [[0, 1, 2], [1, 2, 0]], {"retention.ms": "1000"})
    c.create_topic("b", [[2, 0, 1]])
    c.create_topic("gone", [[0, 1]])
    c.delete_topic("gone")
    c.create_partitions("b", [[0, 2, 1]])
    c.set_topic_configs("a", {"cleanup.policy": "compact"})
    c.alter_isr("a", 0, leader=0, leader_epoch=0, isr=[0, 2])
    c.broker_stopped(1)                       # leaderships move, ISRs shrink
    c.broker_started(1)
    c.move_leader("b", 0, to=0)
    c.reassign("a", 1, [2, 0])                # completes at once: no replica to add
    c.allocate_producer_id()
    c.allocate_producer_id()
    c.alter_scram([("alice", scram_credential("SCRAM-SHA-256", "pw", iterations=4096)),
                   ("bob", scram_credential("SCRAM-SHA-512", "pw2", iterations=4096))], [])
    c.alter_scram([], [("bob", "SCRAM-SHA-512")])
    c.create_acls([acl("a"), acl("b"), acl("b", "User:bob")])
    c.delete_acls([AclBindingFilter(name="b", principal="User:bob")])
    c.alter_client_quotas([((("user", "alice"),), {"producer_byte_rate": 1024.0}, set()),
                           ((("client-id", None),), {"consumer_byte_rate": 2048.0}, set())])
    c.alter_client_quotas([((("client-id", None),), {}, {"consumer_byte_rate"})])
    c.set_group_configs("g", {"consumer.session.timeout.ms": "45000"})
    c.set_group_configs("h", {"consumer.session.timeout.ms": "50000"})
    c.set_group_configs("h", {})
    settings = delegation_tokens.TokenSettings("k", 60_000, 30_000, 1_000)
    kept, renewed, gone = (delegation_tokens.create(settings, "User:alice", "User:admin",
                                                    ["User:bob"], -1, 1_000 + i)
                           for i in range(3))
    for t in (kept, renewed, gone):
        c.put_token(t)
    c.put_token(dataclasses.replace(renewed, expiry_ms=renewed.expiry_ms + 5))
    c.remove_tokens([gone.token_id, "never-there"])


def test_a_restart_recovers_every_kind_of_metadata_from_the_log(tmp_path: Path) -> None:
    c = make(tmp_path)
    busy(c)
    before = state(c)
    assert c.records_appended > 0 and c.snapshots_written == 0
    c.close()
    again = Controller(tmp_path)
    assert state(again) == before
    assert again.allocate_producer_id() == c.next_producer_id
    # the cluster id is kept apart from the log (meta.properties), as Kafka does
    assert "cluster.id=" + c.cluster_id in (tmp_path / "meta.properties").read_text()
    # registrations are not restored: brokers register again when they start
    assert again.brokers == {}


def test_a_restart_after_a_snapshot_recovers_from_snapshot_and_log(tmp_path: Path) -> None:
    c = make(tmp_path, snapshot_records=20)
    busy(c)
    for i in range(30):                        # the ISR of a-0 goes back and forth
        p = c.topics["a"].partitions[0]
        c.alter_isr("a", 0, p.leader, p.leader_epoch, [0, 1, 2] if i % 2 else [0, 2])
    c.flush()
    # busy() alone appends more than 20 records: one snapshot at least, in the
    # background (while one is written, the next waits for it: how many is timing)
    assert c.snapshots_written >= 1
    log_dir = tmp_path / metalog.DIRECTORY
    snapshots = metalog.list_snapshots(log_dir)
    assert len(snapshots) == 1            # older ones are removed once a newer is written
    newest = snapshots[0][0]
    # segments wholly below the snapshot are gone; the rest of the log is after it
    bases = sorted(int(p.stem) for p in log_dir.glob("*.log"))
    assert bases and bases[0] == newest
    before = state(c)
    c.close()
    again = Controller(tmp_path, snapshot_records=20)
    assert state(again) == before
    assert again.log is not None and again.log.snapshot_offset == newest


def test_a_snapshot_is_taken_once_n_records_were_appended(tmp_path: Path) -> None:
    c = make(tmp_path, snapshot_records=100)
    while c.records_appended < 99:
        c.allocate_producer_id()               # one record a change
    c.flush()
    assert c.snapshots_written == 0
    c.allocate_producer_id()                   # the 100th record
    c.flush()
    assert c.snapshots_written == 1
    assert c.log is not None and c.log.snapshot_offset == 100
    assert [offset for offset, _ in metalog.list_snapshots(tmp_path / metalog.DIRECTORY)] == [100]
    c.allocate_producer_id()                   # after the snapshot: in the new segment
    before = state(c)
    c.close()
    again = Controller(tmp_path)
    assert state(again) == before
    assert again.log is not None and again.log.recovered_records == 1


def test_a_snapshot_alone_recovers_the_state_it_was_taken_at(tmp_path: Path) -> None:
    c = make(tmp_path)
    busy(c)
    assert c.log is not None
    c.log.start_snapshot()
    c.flush()
    assert c.snapshots_written == 1
    before = state(c)
    c.close()
    log_dir = tmp_path / metalog.DIRECTORY
    for segment in log_dir.glob("*.log"):      # nothing after the snapshot is appended
        assert segment.stat().st_size == 0
    assert state(Controller(tmp_path)) == before


def test_one_isr_change_costs_the_same_bytes_at_10_and_2000_partitions(tmp_path: Path) -> None:
    costs = []
    for n in (10, 2000):
        c = make(tmp_path / str(n))
        c.create_topic("t", c.assign_replicas(n, 3, start=0))
        records = c.records_appended
        p = c.topics["t"].partitions[7]
        c.alter_isr("t", 7, p.leader, p.leader_epoch, p.isr[:2])
        assert c.records_appended == records + 1
        costs.append(c.last_change_bytes)
        c.close()
    assert costs[0] == costs[1]
    assert costs[0] < 200     # one small PartitionChangeRecord in one batch


def test_a_torn_last_batch_is_ignored_on_recovery(tmp_path: Path) -> None:
    c = make(tmp_path)
    c.create_topic("t", [[0, 1, 2]])
    c.alter_isr("t", 0, leader=0, leader_epoch=0, isr=[0, 1])
    kept = state(c)
    c.alter_isr("t", 0, leader=0, leader_epoch=0, isr=[0])     # this batch gets torn
    torn = c.last_change_bytes
    c.close()
    segment = max((tmp_path / metalog.DIRECTORY).glob("*.log"))
    size = segment.stat().st_size
    os.truncate(segment, size - torn // 2)
    again = Controller(tmp_path)
    assert state(again) == kept
    assert again.log is not None and again.log.truncated_bytes == torn - torn // 2
    # the log goes on from the last whole batch
    for i in range(3):
        again.register_broker(BrokerInfo(i, "127.0.0.1", 9092 + i), Quiet())
        again.broker_started(i)
    again.alter_isr("t", 0, leader=0, leader_epoch=0, isr=[0, 2])
    after = state(again)
    again.close()
    assert state(Controller(tmp_path)) == after


def test_an_older_json_metadata_file_is_read_once_then_the_log_takes_over(
        tmp_path: Path) -> None:
    topic_id = uuid.uuid4()
    credential = scram_credential("SCRAM-SHA-256", "pw", iterations=4096)
    (tmp_path / "__cluster_metadata.json").write_text(json.dumps({
        "cluster_id": "legacy-cluster", "next_producer_id": 5000,
        "scram": {"alice": {"SCRAM-SHA-256": credential.to_kafka()}},
        "client_quotas": [{"entity": [["user", "alice"]], "values": {"producer_byte_rate": 10.0}}],
        "acls": [acl("t").to_json()],
        "group_configs": {"g": {"consumer.session.timeout.ms": "45000"}},
        "topics": {"t": {"topic_id": str(topic_id), "configs": {"retention.ms": "5"},
                         "partitions": [{"replicas": [0, 1], "leader": 1, "leader_epoch": 3,
                                         "isr": [1], "partition_epoch": 7, "adding": [],
                                         "removing": []}]}},
    }, indent=1))
    c = Controller(tmp_path)
    assert c.cluster_id == "legacy-cluster" and c.next_producer_id == 5000
    assert c.topics["t"].topic_id == topic_id
    assert (c.topics["t"].partitions[0].leader_epoch, c.topics["t"].partitions[0].isr) == (3, [1])
    assert c.snapshots_written == 1
    assert not (tmp_path / "__cluster_metadata.json").exists()
    assert (tmp_path / "__cluster_metadata.json.migrated").exists()
    c.register_broker(BrokerInfo(0, "127.0.0.1", 9092), Quiet())
    c.broker_started(0)                        # 0 joins as a follower
    c.create_topic("u", [[0]])
    before = state(c)
    c.close()
    again = Controller(tmp_path)
    assert state(again) == before
    assert again.scram_credential("alice", "SCRAM-SHA-256") == credential


def test_records_are_kafkas_metadata_records_in_v2_batches(tmp_path: Path) -> None:
    c = make(tmp_path)
    c.create_topic("t", [[0, 1, 2]])
    c.alter_isr("t", 0, leader=0, leader_epoch=0, isr=[0, 1])
    c.close()
    data = (tmp_path / metalog.DIRECTORY / f"{0:020d}.log").read_bytes()
    batches = list(iter_batches(data, allow_partial=False))
    assert all(b.crc_ok() and not b.is_control for b in batches)
    last = batches[-1].records()
    assert len(last) == 1 and last[0].key is None and last[0].value is not None
    value = bytes(last[0].value)
    # ApiMessageAndVersion: frame version 1, PartitionChangeRecord (5), version 2 (the
    # version Kafka's controller writes at metadata.version 4.0-IV1 and later)
    assert value[:3] == bytes([1, 5, 2])
    record = metalog.decode_record(value)
    assert record.isr == [0, 1]               # type: ignore[attr-defined]
    assert record.leader == -2                # type: ignore[attr-defined]  (no leader change)
    assert metalog.encode_record(record) == value
    first = metalog.decode_record(bytes(batches[0].records()[0].value or b""))
    assert type(first).__name__ == "FeatureLevelRecord"


def test_no_fsync_runs_on_the_thread_that_changes_metadata(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        threads.append(threading.get_ident())
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    c = make(tmp_path, snapshot_records=10)
    busy(c)
    c.flush()
    assert threads and c.snapshots_written >= 1
    assert threading.get_ident() not in threads


def test_a_broker_replica_replaying_the_records_keeps_the_controllers_image(
        tmp_path: Path) -> None:
    """A broker process's replica starts from the image, then replays each change's
    metadata records (brokers' entries, and the cluster's with the metadata offset, come
    as image deltas): it must end equal."""
    c = make(tmp_path)
    c.create_acls([acl("before")])       # known to the replica from the image only
    replica = Controller(None)
    metadata_image.apply(replica, metadata_image.image(c))

    def feed(records: list[Struct]) -> None:
        metadata_image.apply_records(replica, metadata_image.records_for_brokers(records))

    c.observe_records(feed)
    busy(c)
    c.delete_acls([AclBindingFilter(name="before")])   # removed by its id
    image = metadata_image.image(c)
    metadata_image.apply(replica, {k: v for k, v in image.items()
                                   if k.startswith("broker/") or k == "cluster"})
    assert metadata_image.image(replica) == image
    # one ISR change sends one small record, whatever the size of its topic
    sent: list[str] = []
    c.observe_records(lambda records: sent.extend(metadata_image.records_for_brokers(records)))
    c.create_topic("big", c.assign_replicas(2000, 3, start=0))
    sent.clear()
    p = c.topics["big"].partitions[1500]
    c.alter_isr("big", 1500, p.leader, p.leader_epoch, p.isr[:2])
    assert len(sent) == 1 and len(sent[0]) < 100
