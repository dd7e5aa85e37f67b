"""``metadata.version`` (Kafka's ``MetadataVersion``): its levels, and what each one
changes in the records of the metadata log.

Theory of operation
-------------------
A level names a format of the metadata log: the version of each record type the
controller writes from it on, and a few behaviours of the controller. Kafka's levels
and kaflite's range of them (Kafka 4.4.0's ``MetadataVersion``, read from its jar):

=====  =========  ========  ==============================================================
level  Kafka      metadata  what changes
-----  ---------  --------  --------------------------------------------------------------
22     4.0-IV0    no        kaflite's oldest level (what it wrote before 4.4's levels)
23     4.0-IV1    yes       PartitionRecord and PartitionChangeRecord v2 (KIP-966's ELR
                            fields, tagged and null unless eligible.leader.replicas.version
                            is 1, which kaflite leaves at 0)
24     4.0-IV2    no        transaction.version 2 a new cluster's default (KIP-890)
25     4.0-IV3    no        ListOffsets v10 between brokers
26     4.1-IV0    no        eligible.leader.replicas.version 1 a new cluster's default
27     4.1-IV1    no        Fetch v18 between brokers
28     4.2-IV0    no        share.version 1 a new cluster's default
29     4.2-IV1    no        streams.version 1 a new cluster's default; ListOffsets v11
30     4.3-IV0    yes       RegisterBrokerRecord v4 (CordonedLogDirs, KIP-1066); the
                            ``cordoned.log.dirs`` broker config may be set
31     4.4-IV0    no        share.version 2 a new cluster's default
32     4.4-IV1    yes       ACLs whose host is a CIDR block (``10.0.0.0/8``)
33     4.4-IV2    yes       UnregisterController (Kafka 4.4's latest production level)
=====  =========  ========  ==============================================================

Levels below 22 are older than every kaflite log and are not supported. From 17
(3.7-IV2, KIP-858) on, PartitionRecord and PartitionChangeRecord carry a log
directory per replica: kaflite's brokers register no directories (one data
directory each, with no directory id), so each replica's directory is Kafka's
``DirectoryId.MIGRATING`` (the zero uuid), which is what Kafka's controller writes
for a broker registered without directories and reads from a record without them.

A FeatureLevelRecord of ``metadata.version`` changes the versions of the records
after it, in its batch and later ones: the log's writer follows the records it
writes (``after``). A downgrade across a level whose metadata changed could lose
information, and Kafka's controller refuses it (``metadata_changed``).
"""

from __future__ import annotations

import uuid

from kaflite.protocol.messages._generated.feature_level_record import FeatureLevelRecord
from kaflite.protocol.messages._runtime import Struct

__all__ = [
    "DEFAULT",
    "LEVELS",
    "MIGRATING_DIRECTORY",
    "MINIMUM",
    "after",
    "cidr_acls",
    "cordoned_log_dirs",
    "metadata_changed",
    "name",
    "record_version",
]

FEATURE = "metadata.version"
#: level -> (Kafka's name of it, whether the metadata changed at it)
LEVELS: dict[int, tuple[str, bool]] = {
    22: ("4.0-IV0", False), 23: ("4.0-IV1", True), 24: ("4.0-IV2", False),
    25: ("4.0-IV3", False), 26: ("4.1-IV0", False), 27: ("4.1-IV1", False),
    28: ("4.2-IV0", False), 29: ("4.2-IV1", False), 30: ("4.3-IV0", True),
    31: ("4.4-IV0", False), 32: ("4.4-IV1", True), 33: ("4.4-IV2", True),
}
MINIMUM = min(LEVELS)
#: a new cluster's level: Kafka 4.4's latest production one
DEFAULT = max(LEVELS)
ELR_RECORDS = 23            # MetadataVersion.isElrSupported
CORDONED_LOG_DIRS = 30      # isCordonedLogDirsSupported
CIDR_ACLS = 32              # isCidrAclSupported
#: DirectoryId.MIGRATING: a replica on a broker that registered no log directories
MIGRATING_DIRECTORY = uuid.UUID(int=0)


def name(level: int) -> str:
    """Kafka's name of a level (``4.4-IV2``)."""
    return LEVELS[level][0] if level in LEVELS else str(level)


def metadata_changed(high: int, low: int) -> bool:
    """Whether the metadata changed at a level above ``low`` up to ``high``
    (``MetadataVersion.checkIfMetadataChanged``)."""
    return any(LEVELS.get(v, (None, True))[1] for v in range(low + 1, high + 1))


def cidr_acls(level: int) -> bool:
    return level >= CIDR_ACLS


def cordoned_log_dirs(level: int) -> bool:
    """Whether the ``cordoned.log.dirs`` broker config may change (Kafka refuses it below)."""
    return level >= CORDONED_LOG_DIRS


def record_version(record: Struct, level: int) -> int:
    """The version of ``record`` that Kafka's controller writes at ``level``
    (``partitionRecordVersion``, ``partitionChangeRecordVersion``,
    ``registerBrokerRecordVersion``); every other type has one version."""
    kind = type(record).__name__
    if kind in ("PartitionRecord", "PartitionChangeRecord"):
        return 2 if level >= ELR_RECORDS else 1
    if kind == "RegisterBrokerRecord":
        return 4 if level >= CORDONED_LOG_DIRS else 3
    return int(type(record).MAX_VERSION)


def after(record: Struct, level: int) -> int:
    """The level in force after ``record``."""
    if isinstance(record, FeatureLevelRecord) and record.name == FEATURE:
        return int(record.feature_level)
    return level
