"""What a data directory of an older kaflite holds: ``__cluster_metadata.json``,
and the cluster id kept in ``meta.properties``.

Theory of operation: before the metadata log, the controller rewrote the whole
metadata as one JSON file on every change (issue 36: O(metadata) a change, on
the event loop). A controller that finds that file and no metadata log reads it
once, writes it as the log's first snapshot, and renames it
``__cluster_metadata.json.migrated``; from then on the log is the record.

Kafka keeps the cluster id out of the metadata log, in the ``meta.properties``
of each log directory; the controller keeps it in its data directory's.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from kaflite.cluster.metadata_state import PartitionState, TopicState
from kaflite.security.scram import ScramCredential

if TYPE_CHECKING:
    from kaflite.cluster.controller import Controller

__all__ = ["JSON_NAME", "load_json", "read_cluster_id", "write_cluster_id"]

JSON_NAME = "__cluster_metadata.json"
META_PROPERTIES = "meta.properties"


def load_json(c: Controller, path: Path) -> None:
    """Load an older kaflite's metadata file into ``c``'s model."""
    data = json.loads(path.read_text())
    c.cluster_id = data["cluster_id"]
    c.next_producer_id = int(data.get("next_producer_id", 1000))
    for user, creds in data.get("scram", {}).items():
        c.scram[user] = {mechanism: ScramCredential.from_kafka(mechanism, text)
                         for mechanism, text in creds.items()}
    c.client_quotas.load_json(data.get("client_quotas", []))
    c.acls.load(data.get("acls", []))
    for binding in c.acls:
        c.acl_ids.add(binding, uuid.uuid4())
    c.group_configs = {g: dict(v) for g, v in data.get("group_configs", {}).items()}
    for name, t in data["topics"].items():
        parts = [PartitionState(name, i, **p) for i, p in enumerate(t["partitions"])]
        topic = TopicState(name, uuid.UUID(t["topic_id"]), parts, t.get("configs", {}))
        c.topics[name] = topic
        c.topics_by_id[topic.topic_id] = topic


def read_cluster_id(data_dir: Path) -> str | None:
    try:
        lines = (data_dir / META_PROPERTIES).read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "cluster.id":
            return value.strip()
    return None


def write_cluster_id(data_dir: Path, cluster_id: str) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = data_dir / (META_PROPERTIES + ".tmp")
    tmp.write_text(f"#\nversion=1\ncluster.id={cluster_id}\n")
    os.replace(tmp, data_dir / META_PROPERTIES)
