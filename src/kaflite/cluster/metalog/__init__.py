"""The controller's metadata log: KRaft's ``__cluster_metadata`` partition (KIP-500, KIP-630).

The ``Controller`` keeps the metadata in memory and appends every change to this
log as Kafka's metadata records, one batch a request; snapshots are written in
the background and a restart replays the newest snapshot and the records after
it. See ``docs/metadata-log.md``.
"""

from kaflite.cluster.metalog import _versions as metadata_versions
from kaflite.cluster.metalog._codec import LEADER_EPOCH, decode_record, encode_record
from kaflite.cluster.metalog._image import (
    CONFIG_BROKER,
    CONFIG_CLIENT_METRICS,
    CONFIG_GROUP,
    CONFIG_TOPIC,
    METADATA_VERSION,
    acl_record,
    acl_removal,
    broker_record,
    config_changes,
    partition_change,
    partition_record,
    producer_ids_record,
    quota_records,
    replay,
    scram_record,
    scram_removal,
    snapshot_records,
    topic_records,
)
from kaflite.cluster.metalog._legacy import JSON_NAME as LEGACY_JSON
from kaflite.cluster.metalog._legacy import load_json as load_legacy_json
from kaflite.cluster.metalog._legacy import read_cluster_id, write_cluster_id
from kaflite.cluster.metalog._log import DIRECTORY, SNAPSHOT_RECORDS, MetadataLog
from kaflite.cluster.metalog._snapshot import list_snapshots, read_snapshot

__all__ = [
    "CONFIG_BROKER",
    "CONFIG_CLIENT_METRICS",
    "CONFIG_GROUP",
    "CONFIG_TOPIC",
    "DIRECTORY",
    "LEADER_EPOCH",
    "LEGACY_JSON",
    "METADATA_VERSION",
    "SNAPSHOT_RECORDS",
    "MetadataLog",
    "acl_record",
    "acl_removal",
    "broker_record",
    "config_changes",
    "decode_record",
    "encode_record",
    "list_snapshots",
    "load_legacy_json",
    "metadata_versions",
    "partition_change",
    "partition_record",
    "producer_ids_record",
    "quota_records",
    "read_cluster_id",
    "read_snapshot",
    "replay",
    "scram_record",
    "scram_removal",
    "snapshot_records",
    "topic_records",
    "write_cluster_id",
]
