"""The controller's metadata as records, and the wire that carries them between processes.

In a multi-process cluster (``Cluster(processes=True)``) the ``Controller`` lives
in the controller process and every broker process holds a replica of its
metadata, as KRaft brokers replay the metadata log. This module is what both
sides share:

* ``image(controller)``: the metadata as keyed records, like KRaft's record
  types: ``cluster`` (cluster id), ``broker/<id>`` (RegisterBrokerRecord and its
  fencing), ``topic/<name>`` (TopicRecord with its PartitionRecords and
  ConfigRecords), ``scram`` (UserScramCredentialRecords), ``acls``
  (AccessControlEntryRecords), ``quotas`` (ClientQuotaRecords) and
  ``group/<id>`` (a group's ConfigRecords). A value is
  plain JSON.
* ``diff(old, new)``: the records that changed (a removed one maps to None), the
  delta the controller sends when it compares whole images (a broker's hello,
  fault injection);
* ``key_of(record)`` and ``entry(controller, key)``: after an ordinary change
  the controller sends only the entries its metadata log records touched
  (``kaflite.cluster.metalog``), so a change costs what it changed, not the
  size of the metadata (issue 36).
* ``apply(replica, delta)``: a broker's replica adopts a delta.
* ``frame``/``Frames``: the framing of the internal protocol, a 4-byte big-endian
  length and a JSON object. Metadata changes are rare and small, so JSON is
  enough and easy to read in a packet capture; the data path (Produce, Fetch,
  replication) stays on Kafka's own protocol between the broker processes.
"""

from __future__ import annotations

import json
import struct
import uuid
from collections import deque
from typing import Any

from kaflite.cluster.controller import BrokerInfo, Controller, PartitionState, TopicState
from kaflite.cluster.metalog import CONFIG_GROUP, CONFIG_TOPIC
from kaflite.protocol.messages._generated.access_control_entry_record import (
    AccessControlEntryRecord,
)
from kaflite.protocol.messages._generated.client_quota_record import ClientQuotaRecord
from kaflite.protocol.messages._generated.config_record import ConfigRecord
from kaflite.protocol.messages._generated.fence_broker_record import FenceBrokerRecord
from kaflite.protocol.messages._generated.partition_change_record import PartitionChangeRecord
from kaflite.protocol.messages._generated.partition_record import PartitionRecord
from kaflite.protocol.messages._generated.register_broker_record import RegisterBrokerRecord
from kaflite.protocol.messages._generated.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from kaflite.protocol.messages._generated.remove_topic_record import RemoveTopicRecord
from kaflite.protocol.messages._generated.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from kaflite.protocol.messages._generated.topic_record import TopicRecord
from kaflite.protocol.messages._generated.unfence_broker_record import UnfenceBrokerRecord
from kaflite.protocol.messages._generated.user_scram_credential_record import (
    UserScramCredentialRecord,
)
from kaflite.protocol.messages._runtime import Struct
from kaflite.security.scram import ScramCredential

__all__ = ["Frames", "Json", "apply", "broker_from_json", "diff", "entry", "frame", "image",
           "key_of", "partition_from_json"]

Json = dict[str, Any]   # a decoded JSON object of the internal protocol
_HEADER = struct.Struct(">I")
MAX_FRAME = 64 * 1024 * 1024


def frame(message: Json) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(body)) + body


class Frames:
    """Splits a byte stream into the JSON messages it carries, in order."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.pending: deque[Json] = deque()

    def feed(self, data: bytes) -> None:
        self._buf += data
        while len(self._buf) >= 4:
            (size,) = _HEADER.unpack_from(self._buf)
            if size > MAX_FRAME:
                raise ValueError(f"metadata frame of {size} bytes")
            if len(self._buf) < 4 + size:
                break
            self.pending.append(json.loads(bytes(self._buf[4:4 + size])))
            del self._buf[:4 + size]


# -- records ---------------------------------------------------------------------------
def broker_json(b: BrokerInfo) -> Json:
    return {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
            "alive": b.alive, "fenced_replication": b.fenced_replication,
            "endpoints": {k: list(v) for k, v in b.endpoints.items()}}


def broker_from_json(v: Json) -> BrokerInfo:
    return BrokerInfo(int(v["node_id"]), str(v["host"]), int(v["port"]), v.get("rack"),
                      bool(v["alive"]), bool(v["fenced_replication"]),
                      {k: (str(h), int(p)) for k, (h, p) in v["endpoints"].items()})


def partition_from_json(topic: str, index: int, v: Json) -> PartitionState:
    return PartitionState(topic, index, list(v["replicas"]), int(v["leader"]),
                          int(v["leader_epoch"]), list(v["isr"]), int(v["partition_epoch"]),
                          list(v["adding"]), list(v["removing"]))


def image(controller: Controller) -> dict[str, Json]:
    """Every metadata record of ``controller``, by key."""
    keys = ["cluster", *(f"broker/{n}" for n in controller.brokers),
            *(f"topic/{name}" for name in controller.topics), "scram", "acls", "quotas",
            *(f"group/{g}" for g in controller.group_configs)]
    return {key: value for key in keys if (value := entry(controller, key)) is not None}


def entry(controller: Controller, key: str) -> Json | None:
    """The image's record ``key`` as ``controller`` has it now; None if it has none."""
    kind, _, name = key.partition("/")
    if kind == "cluster":
        return {"cluster_id": controller.cluster_id}
    if kind == "broker":
        b = controller.brokers.get(int(name))
        return None if b is None else broker_json(b)
    if kind == "topic":
        t = controller.topics.get(name)
        return None if t is None else {
            "topic_id": str(t.topic_id), "configs": dict(t.configs),
            "partitions": [p.to_json() for p in t.partitions]}
    if kind == "scram":
        return {"users": {user: {m: c.to_kafka() for m, c in creds.items()}
                          for user, creds in controller.scram.items()}}
    if kind == "acls":
        return {"bindings": controller.acls.to_json()}
    if kind == "quotas":
        return {"entries": controller.client_quotas.to_json()}
    if kind == "group":
        configs = controller.group_configs.get(name)
        return None if configs is None else {"configs": dict(configs)}
    raise ValueError(f"no metadata image record {key!r}")


def key_of(record: Struct, topic_names: dict[uuid.UUID, str]) -> str | None:
    """The image record a metadata log record changes; None for one the image lacks.

    ``topic_names`` (topic id -> name) is kept up to date by this function: a
    RemoveTopicRecord names only the id of a topic that is gone."""
    if isinstance(record, TopicRecord):
        topic_names[record.topic_id] = record.name
        return f"topic/{record.name}"
    if isinstance(record, PartitionRecord | PartitionChangeRecord):
        name = topic_names.get(record.topic_id)
        return None if name is None else f"topic/{name}"
    if isinstance(record, RemoveTopicRecord):
        name = topic_names.pop(record.topic_id, None)
        return None if name is None else f"topic/{name}"
    if isinstance(record, ConfigRecord):
        kind = {CONFIG_TOPIC: "topic", CONFIG_GROUP: "group"}.get(record.resource_type)
        return None if kind is None else f"{kind}/{record.resource_name}"
    if isinstance(record, RegisterBrokerRecord):
        return f"broker/{record.broker_id}"
    if isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
        return f"broker/{record.id}"
    if isinstance(record, UserScramCredentialRecord | RemoveUserScramCredentialRecord):
        return "scram"
    if isinstance(record, AccessControlEntryRecord | RemoveAccessControlEntryRecord):
        return "acls"
    if isinstance(record, ClientQuotaRecord):
        return "quotas"
    return None


def diff(old: dict[str, Json], new: dict[str, Json]) -> dict[str, Json | None]:
    """The records of ``new`` that differ from ``old``; a removed record maps to None."""
    out: dict[str, Json | None] = {k: v for k, v in new.items() if old.get(k) != v}
    out.update({k: None for k in old if k not in new})
    return out


def apply(replica: Controller, delta: dict[str, Json | None]) -> None:
    """A broker's replica adopts the controller's changed records."""
    for key, value in delta.items():
        kind, _, name = key.partition("/")
        if kind == "cluster" and value is not None:
            replica.cluster_id = str(value["cluster_id"])
        elif kind == "broker":
            node = int(name)
            if value is None:
                replica.brokers.pop(node, None)
            else:
                replica.brokers[node] = broker_from_json(value)
        elif kind == "topic":
            _apply_topic(replica, name, value)
        elif kind == "group":
            if value is None:
                replica.group_configs.pop(name, None)
            else:
                replica.group_configs[name] = dict(value["configs"])
        elif kind == "scram" and value is not None:
            replica.scram = {user: {m: ScramCredential.from_kafka(m, text)
                                    for m, text in creds.items()}
                             for user, creds in value["users"].items()}
        elif kind == "acls" and value is not None:
            replica.acls.replace(value["bindings"])
        elif kind == "quotas" and value is not None:
            # in place: the broker's QuotaManager holds this store
            replica.client_quotas.entries.clear()
            replica.client_quotas.load_json(value["entries"])


def _apply_topic(replica: Controller, name: str, value: Json | None) -> None:
    old = replica.topics.pop(name, None)
    if old is not None:
        replica.topics_by_id.pop(old.topic_id, None)
    if value is None:
        return
    parts = [partition_from_json(name, i, p) for i, p in enumerate(value["partitions"])]
    topic = TopicState(name, uuid.UUID(value["topic_id"]), parts, dict(value["configs"]))
    replica.topics[name] = topic
    replica.topics_by_id[topic.topic_id] = topic
