"""The ``__consumer_offsets`` record formats, byte for byte as Kafka writes them.

Every record key and value starts with an int16 version, followed by the
struct of that version (Kafka's ``CoordinatorRecordSerde``). The key's version
doubles as the record type:

* 0 and 1: ``OffsetCommitKey`` (group, topic, partition); Kafka 4.0 writes 1.
  Its value is ``OffsetCommitValue`` v3 (offset, leader epoch, metadata, commit
  timestamp), or v1 when the commit carried an explicit expiry (OffsetCommit
  v2-v4 ``retention_time_ms``), the only version with ``expireTimestamp``.
* 2: ``GroupMetadataKey`` (group); value ``GroupMetadataValue`` v3.
* 3 and up: KIP-848 consumer-group and share-group records, which a classic
  coordinator skips. Their common form is ``CoordinatorRecord``: a key of the
  group id (and for some types a member id), and a value written at version 0.

A null value is a tombstone: the offset or the group is gone, and compaction
eventually drops the key too.

Reading follows KIP-915: a value version newer than the newest this code knows
is read with the newest known layout, and trailing bytes are tolerated, so a
log written by a newer coordinator still loads.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Self, TypeVar

from kaflite.protocol.messages import GroupMetadataKey, GroupMetadataValue, OffsetCommitKey, Struct
from kaflite.protocol.messages import OffsetCommitValue as _OffsetCommitValue
from kaflite.protocol.primitives import Reader

_S = TypeVar("_S", bound=Struct)

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "OFFSET_COMMIT_KEY_VERSION",
    "CoordinatorRecord",
    "GroupKey",
    "OffsetAndMetadata",
    "OffsetKey",
    "OtherKey",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "read_exactly",
    "split_version",
]

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OtherKey:
    """A record type a classic coordinator does not handle (KIP-848, share groups)."""

    version: int


@dataclass(frozen=True)
class CoordinatorRecord:
    """A record of type 3 and up: ``kind`` (the key's version), the ids its key holds, and
    its value (``None``: a tombstone). A subclass names its types' key and value classes;
    a key class has ``group_id``, and ``member_id`` too where the type is a member's."""

    KEYS: ClassVar[Mapping[int, type[Struct]]] = {}
    VALUES: ClassVar[Mapping[int, type[Struct]]] = {}
    # Types whose value layout changed in place (same version number) between Kafka
    # releases: an older body, rewritten in the current layout (see ``read_exactly``).
    UPGRADES: ClassVar[Mapping[int, Callable[[memoryview], bytes]]] = {}

    kind: int
    group_id: str
    member_id: str | None
    value: Struct | None

    def encode(self) -> tuple[bytes, bytes | None]:
        """The key and value bytes, each after its int16 version (the value's is 0)."""
        key_cls = self.KEYS[self.kind]
        make: Callable[..., Struct] = key_cls
        if any(f.name == "member_id" for f in key_cls.FIELDS):
            key = make(group_id=self.group_id, member_id=self.member_id or "")
        else:
            key = make(group_id=self.group_id)
        key_bytes = _versioned(self.kind, key.encode(self.kind))
        if self.value is None:
            return key_bytes, None
        return key_bytes, _versioned(0, self.value.encode(0))

    @classmethod
    def decode(cls, kind: int, key: Reader, value: bytes | memoryview | None) -> Self:
        """A record of type ``kind`` whose key (after the version) is in ``key``."""
        k = cls.KEYS[kind].read(key, kind)
        group_id = str(getattr(k, "group_id", ""))
        member = getattr(k, "member_id", None)
        member_id = None if member is None else str(member)
        if value is None:
            return cls(kind, group_id, member_id, None)
        view = memoryview(value)
        (version,) = _I16.unpack_from(view, 0)
        value_cls = cls.VALUES[kind]
        return cls(kind, group_id, member_id,
                   read_exactly(value_cls, view[2:], min(max(version, 0), value_cls.MAX_VERSION),
                                cls.UPGRADES.get(kind)))


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A committed offset as the coordinator keeps it (Kafka's ``OffsetAndMetadata``)."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # -1: expiry follows offsets.retention.minutes


def read_exactly(cls: type[_S], body: memoryview, version: int,
                 upgrade: Callable[[memoryview], bytes] | None = None) -> _S:
    """``cls`` read from all of ``body``. With ``upgrade``, a body that does not read as
    exactly one value (an older layout of the same version, as kaflite wrote before
    Kafka 4.1 changed the share-group records) is rewritten by it and read again."""
    r = Reader(body)
    try:
        value = cls.read(r, version)
        if r.at_end() or upgrade is None:
            return value
    except Exception:
        if upgrade is None:
            raise
    assert upgrade is not None
    return cls.read(Reader(upgrade(body)), version)


def _versioned(version: int, body: bytes) -> bytes:
    return _I16.pack(version) + body


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group, topic=topic, partition=partition)
    return _versioned(OFFSET_COMMIT_KEY_VERSION, key.encode(OFFSET_COMMIT_KEY_VERSION))


def encode_group_key(group: str) -> bytes:
    return _versioned(GROUP_METADATA_KEY_VERSION,
                      GroupMetadataKey(group=group).encode(GROUP_METADATA_KEY_VERSION))


def encode_offset_value(om: OffsetAndMetadata) -> bytes:
    version = OFFSET_COMMIT_VALUE_WITH_EXPIRY if om.expire_timestamp >= 0 \
        else OFFSET_COMMIT_VALUE_VERSION
    value = _OffsetCommitValue(offset=om.offset, leader_epoch=om.leader_epoch,
                               metadata=om.metadata, commit_timestamp=om.commit_timestamp,
                               expire_timestamp=om.expire_timestamp)
    return _versioned(version, value.encode(version))


def encode_group_value(value: GroupMetadataValue) -> bytes:
    return _versioned(GROUP_METADATA_VALUE_VERSION, value.encode(GROUP_METADATA_VALUE_VERSION))


def split_version(data: bytes | bytearray | memoryview) -> tuple[int, Reader]:
    """A coordinator record's int16 version, and a reader over what follows."""
    view = memoryview(data)
    if len(view) < 2:
        raise ValueError("a coordinator record needs its int16 version")
    (version,) = _I16.unpack_from(view, 0)
    return version, Reader(view[2:])


def decode_key(data: bytes | bytearray | memoryview) -> OffsetKey | GroupKey | OtherKey:
    version, r = split_version(data)
    if version in (0, 1):
        k = OffsetCommitKey.read(r, version)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupKey(GroupMetadataKey.read(r, GROUP_METADATA_KEY_VERSION).group)
    return OtherKey(version)


def decode_offset_value(data: bytes | bytearray | memoryview) -> OffsetAndMetadata:
    version, r = split_version(data)
    if version < 0:
        raise ValueError(f"bad OffsetCommitValue version {version}")
    v = _OffsetCommitValue.read(r, min(version, _OffsetCommitValue.MAX_VERSION))
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                             v.expire_timestamp)


def decode_group_value(data: bytes | bytearray | memoryview) -> GroupMetadataValue:
    version, r = split_version(data)
    if version < 0:
        raise ValueError(f"bad GroupMetadataValue version {version}")
    return GroupMetadataValue.read(r, min(version, GroupMetadataValue.MAX_VERSION))
