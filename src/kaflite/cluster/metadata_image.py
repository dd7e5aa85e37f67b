"""The controller's metadata as records, and the wire that carries them between processes.

In a multi-process cluster (``Cluster(processes=True)``) the ``Controller`` lives
in the controller process and every broker process holds a replica of its
metadata, as KRaft brokers replay the metadata log. This module is what both
sides share:

* ``image(controller)``: the metadata as keyed records, like KRaft's record
  types: ``cluster`` (cluster id), ``broker/<id>`` (RegisterBrokerRecord and its
  fencing), ``topic/<name>`` (TopicRecord with its PartitionRecords and
  ConfigRecords), ``scram`` (UserScramCredentialRecords), ``tokens``
  (DelegationTokenRecords), ``acls``
  (AccessControlEntryRecords), ``quotas`` (ClientQuotaRecords) and
  ``group/<id>`` (a group's ConfigRecords), ``clientmetrics/<name>`` (a client
  metrics subscription's ConfigRecords). A value is
  plain JSON.
* ``diff(old, new)``: the records that changed (a removed one maps to None): the
  delta of the brokers' entries the controller sends after each change;
* ``records_for_brokers``/``apply_records``: everything else changes by the
  controller's metadata log records themselves (``kaflite.cluster.metalog``),
  which a broker's replica replays as KRaft brokers replay the log, so a change
  costs what it changed, not the size of the metadata or of its topic (issue 36).
* ``apply(replica, delta)``: a broker's replica adopts a delta.
* ``frame``/``Frames``: the framing of the internal protocol, a 4-byte big-endian
  length and a JSON object. Metadata changes are rare and small, so JSON is
  enough and easy to read in a packet capture; the data path (Produce, Fetch,
  replication) stays on Kafka's own protocol between the broker processes.
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections import deque
from typing import Any

from kaflite.cluster import delegation_tokens
from kaflite.cluster.controller import BrokerInfo, Controller, PartitionState, TopicState
from kaflite.cluster.metalog import decode_record, encode_record, replay
from kaflite.protocol.messages._generated.fence_broker_record import FenceBrokerRecord
from kaflite.protocol.messages._generated.register_broker_record import RegisterBrokerRecord
from kaflite.protocol.messages._generated.unfence_broker_record import UnfenceBrokerRecord
from kaflite.protocol.messages._generated.unregister_broker_record import UnregisterBrokerRecord
from kaflite.protocol.messages._runtime import Struct
from kaflite.security.acl import AclBinding
from kaflite.security.scram import ScramCredential

__all__ = ["Frames", "Json", "apply", "apply_records", "broker_from_json", "diff", "entry",
           "frame", "image", "partition_from_json", "record_from_json", "record_json",
           "records_for_brokers"]

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
            *(f"topic/{name}" for name in controller.topics), "scram", "tokens", "acls",
            "quotas",
            *(f"group/{g}" for g in controller.group_configs),
            *(f"clientmetrics/{n}" for n in controller.client_metrics),
            *(f"brokerconfig/{n}" for n in controller.broker_configs)]
    return {key: value for key in keys if (value := entry(controller, key)) is not None}


def entry(controller: Controller, key: str) -> Json | None:
    """The image's record ``key`` as ``controller`` has it now; None if it has none."""
    kind, _, name = key.partition("/")
    if kind == "cluster":
        return {"cluster_id": controller.cluster_id,
                "metadata_offset": controller.metadata_offset,
                "features": dict(controller.features)}
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
    if kind == "tokens":
        return {"records": [record_json(delegation_tokens.record(t))
                            for t in controller.tokens.values()]}
    if kind == "acls":
        # with their ids: a RemoveAccessControlEntryRecord names a binding by its id
        return {"bindings": controller.acls.to_json(),
                "ids": [[str(i), b.to_json()] for i, b in controller.acl_ids.items()]}
    if kind == "quotas":
        return {"entries": controller.client_quotas.to_json()}
    if kind == "group":
        configs = controller.group_configs.get(name)
        return None if configs is None else {"configs": dict(configs)}
    if kind == "brokerconfig":
        configs = controller.broker_configs.get(name)
        return None if configs is None else {"configs": dict(configs)}
    if kind == "clientmetrics":
        configs = controller.client_metrics.get(name)
        return None if configs is None else {"configs": dict(configs)}
    raise ValueError(f"no metadata image record {key!r}")


def record_json(record: Struct) -> str:
    """One metadata record for the JSON wire: the base64 of its metadata log value."""
    return base64.b64encode(encode_record(record)).decode()


def record_from_json(row: str) -> Struct:
    return decode_record(base64.b64decode(row))


def records_for_brokers(records: list[Struct]) -> list[str]:
    """The records a broker process replays, encoded for the JSON wire (base64 of
    each record's metadata log value). Broker registrations are left out: brokers
    go as image entries, which carry what no record does (fault injection's
    replication fencing)."""
    return [record_json(r) for r in records
            if not isinstance(r, RegisterBrokerRecord | FenceBrokerRecord | UnfenceBrokerRecord
                              | UnregisterBrokerRecord)]


def apply_records(replica: Controller, rows: list[str]) -> None:
    """A broker's replica replays the controller's metadata records, as KRaft brokers
    replay the metadata log."""
    for row in rows:
        replay(replica, record_from_json(row))


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
            replica.records_saved = int(value.get("metadata_offset", 0))
            replica.features = {str(k): int(v) for k, v in value.get("features", {}).items()}
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
        elif kind == "clientmetrics":
            if value is None:
                replica.client_metrics.pop(name, None)
            else:
                replica.client_metrics[name] = dict(value["configs"])
        elif kind == "brokerconfig":
            if value is None:
                replica.broker_configs.pop(name, None)
            else:
                replica.broker_configs[name] = dict(value["configs"])
            replica.broker_config_changes += 1
        elif kind == "scram" and value is not None:
            replica.scram = {user: {m: ScramCredential.from_kafka(m, text)
                                    for m, text in creds.items()}
                             for user, creds in value["users"].items()}
        elif kind == "tokens" and value is not None:
            replica.tokens.clear()
            apply_records(replica, value["records"])
        elif kind == "acls" and value is not None:
            replica.acls.replace(value["bindings"])
            replica.acl_ids.clear()
            for acl_id, row in value.get("ids", []):
                replica.acl_ids.add(AclBinding.from_json(row), uuid.UUID(acl_id))
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
