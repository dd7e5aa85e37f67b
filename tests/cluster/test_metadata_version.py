"""metadata.version: the record versions of kaflite's metadata log at each level, the
rules of changing the level (Kafka 4.4's ``FeatureControlManager``), and CIDR ACL hosts
from 4.4-IV1 on. Kafka's own DumpLogSegments reads the log these tests write in
tests/interop/test_metadata_log_decoder.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kaflite.cluster import features, metalog
from kaflite.cluster.controller import BrokerInfo, Controller
from kaflite.cluster.metalog import metadata_versions
from kaflite.protocol.messages._generated.feature_level_record import FeatureLevelRecord
from kaflite.protocol.messages._runtime import Struct
from kaflite.protocol.records import iter_batches
from kaflite.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    CidrNotSupported,
    InvalidAcl,
    PatternType,
    ResourceType,
    host_matches,
    validate_binding,
)
from tests.cluster.test_metadata_log import Quiet, make

MIGRATING = uuid.UUID(int=0)


def logged(directory: Path) -> list[tuple[str, int, Struct]]:
    """(record type, version, record) of every record of the log's segments, in order."""
    out = []
    for path in sorted(directory.glob("*.log")):
        for batch in iter_batches(path.read_bytes(), allow_partial=False):
            if batch.is_control:
                continue
            for rec in batch.records():
                value = bytes(rec.value or b"")
                record = metalog.decode_record(value)
                out.append((type(record).__name__, value[2], record))
    return out


def versions(records: list[tuple[str, int, Struct]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for name, version, _ in records:
        out.setdefault(name, set()).add(version)
    return out


def test_kafka_44s_levels() -> None:
    """The levels as Kafka 4.4.0's MetadataVersion has them (javap of its jar)."""
    assert (metadata_versions.MINIMUM, metadata_versions.DEFAULT) == (22, 33)
    assert metadata_versions.name(33) == "4.4-IV2" and metadata_versions.name(22) == "4.0-IV0"
    assert metalog.METADATA_VERSION == 33
    changed = [v for v in range(23, 34) if metadata_versions.metadata_changed(v, v - 1)]
    assert changed == [23, 30, 32, 33]
    assert not metadata_versions.metadata_changed(29, 24)
    assert metadata_versions.metadata_changed(33, 22)


def test_a_new_log_is_written_at_4_4_iv2(tmp_path: Path) -> None:
    c = make(tmp_path)
    c.create_topic("t", [[0, 1, 2]])
    c.alter_isr("t", 0, leader=0, leader_epoch=0, isr=[0, 1])
    c.reassign("t", 0, [1, 0])             # completes at once: a change of replicas
    c.close()
    records = logged(tmp_path / metalog.DIRECTORY)
    first = records[0][2]
    assert isinstance(first, FeatureLevelRecord)
    assert (first.name, first.feature_level) == ("metadata.version", 33)
    seen = versions(records)
    assert seen["PartitionRecord"] == {2} and seen["PartitionChangeRecord"] == {2}
    assert seen["RegisterBrokerRecord"] == {4}
    partition = next(r for n, _, r in records if n == "PartitionRecord")
    assert partition.directories == [MIGRATING] * 3          # type: ignore[attr-defined]
    assert partition.eligible_leader_replicas is None         # type: ignore[attr-defined]
    changes = [r for n, _, r in records if n == "PartitionChangeRecord"]
    # a change of replicas names each one's directory; one of the ISR alone does not
    assert any(r.replicas == [1, 0] and r.directories == [MIGRATING] * 2     # type: ignore[attr-defined]
               for r in changes)
    assert all(r.directories is None for r in changes if r.replicas is None)  # type: ignore[attr-defined]


def test_an_older_log_keeps_its_level_until_it_is_upgraded(tmp_path: Path) -> None:
    c = make(tmp_path)
    c.set_feature("metadata.version", 22)     # as an older kaflite formatted it
    c.create_topic("old", [[0, 1]])
    c.close()
    again = make(tmp_path)        # brokers register again: at 22, RegisterBrokerRecord v3
    assert features.level(again, "metadata.version") == 22
    again.create_topic("still-old", [[1, 0]])
    assert features.check_update(again, "metadata.version", 33, features.UPGRADE) is None
    again.set_feature("metadata.version", 29)
    again.create_topic("new", [[0, 1]])
    again.set_feature("metadata.version", 30)
    again.register_broker(BrokerInfo(3, "127.0.0.1", 9095), Quiet())     # v4 from 30
    again.alter_isr("new", 0, leader=0, leader_epoch=0, isr=[0])
    again.close()
    records = logged(tmp_path / metalog.DIRECTORY)
    level = metadata_versions.MINIMUM
    for name, version, record in records:
        if name in ("PartitionRecord", "PartitionChangeRecord"):
            assert version == (1 if level < 23 else 2), (name, level)
        if name == "RegisterBrokerRecord":
            assert version == (3 if level < 30 else 4), (name, level)
        level = metadata_versions.after(record, level)
    assert level == 30
    seen = versions(records)
    assert seen["PartitionRecord"] == {1, 2} and seen["RegisterBrokerRecord"] == {3, 4}
    # a restart reads the level back, and a snapshot is written at it
    third = Controller(tmp_path)
    assert features.level(third, "metadata.version") == 30
    assert third.log is not None and third.log.metadata_version == 30
    third.log.write_snapshot_now(metalog.snapshot_records(third))
    third.close()
    (snapshot,) = [p for _, p in metalog.list_snapshots(tmp_path / metalog.DIRECTORY)]
    snap = []
    for batch in iter_batches(snapshot.read_bytes(), allow_partial=False):
        if not batch.is_control:
            snap += [bytes(r.value or b"") for r in batch.records()]
    assert metalog.decode_record(snap[0]) == metalog.decode_record(
        metalog.encode_record(metalog.decode_record(snap[0])))
    assert {v[2] for v in snap if v[1] == 3} == {2}      # PartitionRecord (3): v2 at 30


def test_metadata_version_changes_as_kafkas_controller_allows(tmp_path: Path) -> None:
    c = make(tmp_path)

    def why(level: int, kind: int) -> str | None:
        return (features.check_update(c, "metadata.version", level, kind)
                or features.check_metadata_version(c, level, kind))

    assert why(34, features.UPGRADE) == "kaflite supports levels 22 to 33 of this feature."
    assert why(21, features.SAFE_DOWNGRADE) == "kaflite supports levels 22 to 33 of this feature."
    # 4.4-IV2 changed the metadata: no downgrade below it, safe or not
    assert why(32, features.SAFE_DOWNGRADE) == (
        "Unsupported metadata.version downgrade from 33 to 32. Refusing to perform the "
        "requested downgrade because it might delete metadata information.")
    assert why(22, features.UNSAFE_DOWNGRADE) == (
        "Unsupported metadata.version downgrade from 33 to 22. Unsafe metadata downgrade "
        "is not supported in this version.")
    assert why(32, features.UPGRADE) is not None      # a downgrade needs its type
    c.set_feature("metadata.version", 29)
    # 24 to 29 changed nothing in the metadata: down to 23 is safe, and unsafe too
    assert why(23, features.SAFE_DOWNGRADE) is None
    assert why(23, features.UNSAFE_DOWNGRADE) is None
    assert why(22, features.SAFE_DOWNGRADE) is not None      # 23 did change it
    assert why(33, features.UPGRADE) is None
    assert why(33, features.SAFE_DOWNGRADE) == "Can't downgrade to a newer version."
    c.close()


def acl(host: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:alice", host,
                      AclOperation.READ, AclPermissionType.ALLOW)


def test_cidr_hosts_from_4_4_iv1() -> None:
    validate_binding(acl("10.0.0.0/8"))
    validate_binding(acl("2001:db8::/32"))
    validate_binding(acl("10.1.2.3/8"))      # host bits set: Kafka's SubnetUtils takes it
    with pytest.raises(CidrNotSupported, match=r"require metadata version 4\.4-IV1"):
        validate_binding(acl("10.0.0.0/8"), cidr_hosts=False)
    validate_binding(acl("10.0.0.1"), cidr_hosts=False)
    with pytest.raises(InvalidAcl, match=r"Invalid CIDR notation '10\.0\.0/33'"):
        validate_binding(acl("10.0.0/33"))
    assert not metadata_versions.cidr_acls(31) and metadata_versions.cidr_acls(32)
    assert host_matches("10.0.0.0/8", "10.200.3.4")
    assert host_matches("10.0.0.0/8", "10.0.0.0")             # inclusive host count
    assert not host_matches("10.0.0.0/8", "11.0.0.1")
    assert not host_matches("10.0.0.0/8", "::1")
    assert not host_matches("10.0.0.0/8", "not-an-address")
    assert host_matches("2001:db8::/32", "2001:db8::7")
    assert host_matches("*", "1.2.3.4") and host_matches("1.2.3.4", "1.2.3.4")
    assert not host_matches("1.2.3.4", "1.2.3.5")
