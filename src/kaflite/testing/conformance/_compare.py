"""Comparing two brokers' responses to the same request, field by field.

Normalisation, and nothing else, removes what legitimately differs between two
brokers that behave the same:

* fields that are the broker's own choice, never a client's concern: throttle
  times, cluster ids, hosts and ports, racks, error messages' wording (the codes
  are compared), configuration documentation, wall-clock times (a log append
  time, a transaction's start);
* identities each broker mints (``Identities``): topic ids, producer ids, member ids,
  fetch session ids, node ids, group generations and member epochs. The first time a
  field of such a kind is seen, Kafka's value is paired with kaflite's; after that
  a value must map to its pair, in both directions. The same pairs rewrite the
  replayed requests (``substitute``), record batches' producer ids included;
* arrays of structs are matched by their key field (a topic by name or id, a
  partition by index, ...), not by position;
* record sets are compared record by record: offset, timestamp, key, value,
  headers, and the batch's producer id (mapped), epoch, sequence and flags (a
  transaction marker's timestamp is the broker's clock, and is not compared).
"""

from __future__ import annotations

import struct as _struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from kaflite.protocol.messages import Struct
from kaflite.protocol.messages._runtime import FieldSpec, in_range
from kaflite.protocol.records import RecordBatch, crc32c, iter_batches
from kaflite.protocol.records._wire import ATTRIBUTES_OFFSET, CRC_OFFSET, PRODUCER_ID_OFFSET

__all__ = ["Diff", "Identities", "diff", "substitute"]

IGNORED = frozenset({
    "throttle_time_ms", "host", "port", "rack", "error_message",
    "documentation", "session_lifetime_ms", "auth_bytes", "log_append_time_ms",
    "transaction_start_time_ms",
})
# kinds of identity a broker mints, by field name
MINTED: dict[str, str] = {
    "producer_id": "producer", "member_id": "member", "leader": "member",
    "session_id": "session", "generation_id": "generation",
    "member_epoch": "epoch", "node_id": "node", "leader_id": "node", "broker_id": "node",
    "controller_id": "node", "coordinator_id": "node", "replica_nodes": "node",
    "isr_nodes": "node", "offline_replicas": "node", "eligible_leader_replicas": "node",
    "last_known_elr": "node", "replica_id": "node",
    # each broker's own; paired, so that an ApiVersions v5 naming Kafka's cluster
    # (KIP-1242) is replayed naming kaflite's
    "cluster_id": "cluster",
    # KIP-714: each broker derives a client instance's subscription id its own way
    "subscription_id": "subscription",
}
# the field that identifies an element of an array of structs, in order of preference
KEYS = ("name", "topic", "topic_name", "partition_index", "partition", "index", "api_key",
        "group_id", "transactional_id", "resource_name", "node_id", "broker_id", "key",
        "member_id", "topic_id")
# values that are not minted but mean something: "none" everywhere, and 0 where it
# means "join", "no session" or "no generation yet"; they must be equal, never paired
NOT_MINTED: dict[str, frozenset[object]] = {
    "epoch": frozenset({-1, -2, 0}), "generation": frozenset({-1, 0}),
    "session": frozenset({-1, 0}),
}
ALWAYS_NOT_MINTED = frozenset({-1, None, "", uuid.UUID(int=0)})


@dataclass(frozen=True, slots=True)
class Diff:
    path: str
    kafka: object
    kaflite: object

    def __str__(self) -> str:
        return f"{self.path}: Kafka {self.kafka!r}, kaflite {self.kaflite!r}"


@dataclass
class Identities:
    """Pairs of (Kafka's value, kaflite's value) per kind of minted identity."""

    forward: dict[tuple[str, object], object] = field(default_factory=dict)
    backward: dict[tuple[str, object], object] = field(default_factory=dict)

    def same(self, kind: str, kafka: object, kaflite: object) -> bool:
        special = ALWAYS_NOT_MINTED | NOT_MINTED.get(kind, frozenset())
        if kafka in special or kaflite in special:
            return kafka == kaflite
        mine = self.forward.get((kind, kafka), _UNSEEN)
        theirs = self.backward.get((kind, kaflite), _UNSEEN)
        if mine is _UNSEEN and theirs is _UNSEEN:
            self.forward[(kind, kafka)] = kaflite
            self.backward[(kind, kaflite)] = kafka
            return True
        return mine == kaflite and theirs == kafka

    def knows(self, kind: str, kafka: object) -> bool:
        return (kind, kafka) in self.forward

    def knows_kaflite(self, kind: str, kaflite: object) -> bool:
        return (kind, kaflite) in self.backward

    def to_kaflite(self, kind: str, kafka: object) -> object:
        return self.forward.get((kind, kafka), kafka)


_UNSEEN = object()


def minted_kind(name: str) -> str | None:
    """The kind of identity a field of this name holds (``v3_and_below_producer_id``
    is a producer id too)."""
    kind = MINTED.get(name)
    if kind is None:
        kind = next((k for n, k in MINTED.items() if name.endswith("_" + n)), None)
    return kind


def _kind(spec: FieldSpec) -> str | None:
    return "uuid" if spec.type == "uuid" else minted_kind(spec.name)


def _present(spec: FieldSpec, version: int) -> bool:
    return in_range(spec.versions, version) and (spec.tagged is None
                                                 or in_range(spec.tagged, version))


def _key_of(element: Struct, version: int) -> tuple[str, object] | None:
    specs = {s.name: s for s in type(element).FIELDS if _present(s, version)}
    for name in KEYS:
        spec = specs.get(name)
        if spec is not None and spec.struct is None and not spec.is_array:
            value = getattr(element, name)
            if value not in (None, "") and value != uuid.UUID(int=0):
                return name, value
    return None


def diff(kafka: Struct, kaflite: Struct, version: int, ids: Identities,
         path: str = "") -> Iterator[Diff]:
    """The differences between two decoded messages of the same type and version."""
    for spec in type(kafka).FIELDS:
        if not _present(spec, version) or spec.name in IGNORED:
            continue
        here = f"{path}.{spec.name}" if path else spec.name
        a, b = getattr(kafka, spec.name), getattr(kaflite, spec.name)
        if spec.struct is not None and spec.is_array:
            yield from _diff_array(a, b, version, ids, here)
        elif spec.struct is not None:
            if (a is None) != (b is None):
                yield Diff(here, a is not None, b is not None)
            elif a is not None:
                yield from diff(a, b, version, ids, here)
        elif spec.type == "records":
            yield from _diff_records(a, b, ids, here)
        elif (kind := _kind(spec)) is not None:
            pairs = zip(a, b, strict=False) if spec.is_array else [(a, b)]
            if (spec.is_array and len(a or ()) != len(b or ())) or not all(ids.same(kind, x, y) for x, y in pairs):
                yield Diff(here, a, b)
        elif a != b:
            yield Diff(here, a, b)


def _diff_array(a: list[Struct] | None, b: list[Struct] | None, version: int,
                ids: Identities, path: str) -> Iterator[Diff]:
    if a is None or b is None:
        if (a is None) != (b is None):
            yield Diff(path, a is not None, b is not None)
        return
    keyed_a = [(_key_of(x, version), x) for x in a]
    if not a or any(k is None for k, _ in keyed_a):
        if len(a) != len(b):
            yield Diff(f"{path}[#]", len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from diff(x, y, version, ids, f"{path}[{i}]")
        return
    by_key: dict[tuple[str, object], Struct] = {}
    for element in b:
        key = _key_of(element, version)
        if key is not None:
            by_key[key] = element
    for key, x in keyed_a:
        assert key is not None
        name, value = key
        kind = minted_kind(name) or ("uuid" if isinstance(value, uuid.UUID) else None)
        if kind and not ids.knows(kind, value):
            # first sight of this identity as a key: pair it with the first element
            # of the other side whose key is unpaired too (in order)
            for other_name, other_value in by_key:
                if other_name == name and not ids.knows_kaflite(kind, other_value):
                    ids.same(kind, value, other_value)
                    break
        mapped = (name, ids.to_kaflite(kind, value)) if kind else key
        label = f"{path}[{name}={value}]"
        if mapped not in by_key:
            yield Diff(label, "present", "absent")
            continue
        yield from diff(x, by_key.pop(mapped), version, ids, label)
    for (name, value) in by_key:
        yield Diff(f"{path}[{name}={value}]", "absent", "present")


def _records(data: bytes | None, ids: Identities | None) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for batch in iter_batches(data or b""):
        head = (ids.to_kaflite("producer", batch.producer_id) if ids else batch.producer_id,
                batch.producer_epoch, batch.base_sequence, batch.is_transactional,
                batch.is_control)
        # a control record's timestamp is the broker's clock when it wrote the marker
        out += [(r.offset, None if batch.is_control else r.timestamp, _b(r.key), _b(r.value),
                 tuple((h[0], _b(h[1])) for h in r.headers), *head) for r in batch]
    return out


def _b(view: object) -> bytes | None:
    return None if view is None else bytes(view)   # type: ignore[call-overload]


def _diff_records(a: bytes | None, b: bytes | None, ids: Identities,
                  path: str) -> Iterator[Diff]:
    ours, theirs = _records(a, ids), _records(b, None)
    if len(ours) != len(theirs):
        yield Diff(f"{path}[#]", len(ours), len(theirs))
    for x, y in zip(ours, theirs, strict=False):
        if x != y:
            yield Diff(f"{path}[offset={x[0]}]", x, y)
            return


def substitute(request: Struct, version: int, ids: Identities) -> None:
    """Rewrite, in place, the identities Kafka minted in ``request`` into kaflite's."""
    for spec in type(request).FIELDS:
        if not _present(spec, version):
            continue
        value = getattr(request, spec.name)
        if value is None:
            continue
        if spec.struct is not None:
            for element in (value if spec.is_array else [value]):
                substitute(element, version, ids)
        elif spec.type == "records":
            setattr(request, spec.name, _rewrite_producer_ids(value, ids))
        elif (kind := _kind(spec)) is not None:
            if spec.is_array:
                setattr(request, spec.name, [ids.to_kaflite(kind, v) for v in value])
            else:
                setattr(request, spec.name, ids.to_kaflite(kind, value))


def _rewrite_producer_ids(data: bytes, ids: Identities) -> bytes:
    out = bytearray(data)
    pos = 0
    batch: RecordBatch
    for batch in iter_batches(data):
        mapped = ids.to_kaflite("producer", batch.producer_id)
        if mapped != batch.producer_id and isinstance(mapped, int):
            _struct.pack_into(">q", out, pos + PRODUCER_ID_OFFSET, mapped)
            end = pos + 12 + batch.batch_length
            _struct.pack_into(">I", out, pos + CRC_OFFSET, crc32c(out[pos + ATTRIBUTES_OFFSET:end]))
        pos += 12 + batch.batch_length
    return bytes(out)
