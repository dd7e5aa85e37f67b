"""Where a message keeps its topics, partitions, groups and error codes: a generic walk.

Theory of operation
-------------------
Kafka's messages nest the same way across APIs. A response holds topics, a topic
holds partitions, and an error code sits at whichever level the API reports it:
the top (Heartbeat, JoinGroup), a group (DescribeGroups, OffsetFetch v8+, a
FindCoordinator v4 key), a topic (Metadata, CreateTopics) or a partition
(Produce, Fetch, ListOffsets, OffsetCommit). Requests nest the same way.

Rather than know every API, this module reads the shape of each generated struct
class once (``shape``) from its ``FIELDS``:

* an ``error_code`` int16 field is where an error goes;
* a ``name``/``topic``/``topic_name`` string or a ``topic_id`` uuid marks a topic,
  when the struct also holds an array of partition structs or is named for a topic;
* a ``partition_index``/``partition``/``index``/``partition_id`` int32 inside a
  topic marks a partition;
* a ``group_id`` (or the ``key`` of FindCoordinator v4's ``Coordinator``) marks a group.

``walk`` then yields every struct of a message at a version with its context
(topic, partition, group) and level. The connection registry counts the error
codes it finds this way, and the fault injector rewrites them, removes a
partition from a request or splices an error partition into a response.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kaflite.protocol.messages._runtime import FieldSpec, Struct, in_range

__all__ = [
    "Shape",
    "Slot",
    "TopicResolver",
    "levels_at",
    "partition_targets",
    "set_field",
    "shape",
    "splice_partition",
    "walk",
]

TOPIC_NAME_FIELDS = ("name", "topic", "topic_name")
PARTITION_FIELDS = ("partition_index", "partition", "index", "partition_id")
GROUP_FIELDS = ("group_id",)

TopicResolver = Callable[[uuid.UUID], "str | None"]

# The order in which an error that is not about one partition or topic finds its
# place: as far out as the API reports errors.
OUTERMOST_FIRST = ("top", "group", "topic", "partition", "other")


@dataclass(frozen=True)
class Shape:
    """What one struct class can tell about its place in a message."""

    cls: type[Struct]
    error: FieldSpec | None
    topic_name: FieldSpec | None
    topic_id: FieldSpec | None
    partition: FieldSpec | None
    group: FieldSpec | None
    children: tuple[FieldSpec, ...]   # struct-typed fields, arrays or single
    is_topic: bool
    partition_array: FieldSpec | None  # in a topic: the array of its partitions


_SHAPES: dict[type[Struct], Shape] = {}
_LEVELS: dict[tuple[type[Struct], int], frozenset[str]] = {}


def shape(cls: type[Struct]) -> Shape:
    found = _SHAPES.get(cls)
    if found is None:
        found = _SHAPES[cls] = _shape(cls)
    return found


def _shape(cls: type[Struct]) -> Shape:
    by_name = {f.name: f for f in cls.FIELDS}
    # AddPartitionsToTxn v0-v3 names its per-partition code partition_error_code
    error = by_name.get("error_code") or by_name.get("partition_error_code")
    if error is not None and (error.type != "int16" or error.is_array):
        error = None
    topic_name = next((by_name[n] for n in TOPIC_NAME_FIELDS if n in by_name
                       and by_name[n].type == "string" and not by_name[n].is_array), None)
    topic_id = by_name.get("topic_id")
    if topic_id is not None and (topic_id.type != "uuid" or topic_id.is_array):
        topic_id = None
    partition = next((by_name[n] for n in PARTITION_FIELDS if n in by_name
                      and by_name[n].type == "int32" and not by_name[n].is_array), None)
    group = next((by_name[n] for n in GROUP_FIELDS if n in by_name
                  and by_name[n].type == "string" and not by_name[n].is_array), None)
    if group is None and cls.__name__ == "Coordinator" and "key" in by_name:
        group = by_name["key"]
    # Only the struct fields under which an error code or a topic, partition or group
    # can be found are walked (not Fetch's diverging_epoch or current_leader...).
    children = tuple(f for f in cls.FIELDS if f.struct is not None and f.struct is not cls
                     and _relevant(f.struct, frozenset({cls})))
    partition_array = next((f for f in children if f.is_array and f.struct is not None
                            and shape(f.struct).partition is not None), None)
    has_identity = topic_name is not None or topic_id is not None
    is_topic = has_identity and partition is None and (
        partition_array is not None or "Topic" in cls.__name__)
    return Shape(cls, error, topic_name, topic_id, partition, group, children, is_topic,
                 partition_array if is_topic else None)


def _relevant(cls: type[Struct], seen: frozenset[type[Struct]]) -> bool:
    names = {f.name for f in cls.FIELDS}
    if names & {"error_code", "partition_error_code", "topic_id", *TOPIC_NAME_FIELDS,
                *PARTITION_FIELDS,
                *GROUP_FIELDS, "key"}:
        return True
    return any(_relevant(f.struct, seen | {cls}) for f in cls.FIELDS
               if f.struct is not None and f.struct not in seen)


@dataclass(slots=True)
class Slot:
    """One struct found in a message, with where it sits."""

    obj: Struct
    shape: Shape
    level: str                  # "top", "group", "topic", "partition" or "other"
    depth: int
    topic: str | None
    partition: int | None
    group: str | None
    container: list[Any] | None  # the array holding ``obj`` (None for single structs)
    parent: Slot | None

    def error_at(self, version: int) -> bool:
        """Whether this struct carries an error code at ``version``."""
        f = self.shape.error
        return f is not None and in_range(f.versions, version)


def _topic_of(obj: Struct, sh: Shape, version: int, resolve: TopicResolver | None) -> str | None:
    if sh.topic_name is not None and in_range(sh.topic_name.versions, version):
        name = getattr(obj, sh.topic_name.name)
        if name:
            return str(name)
    if sh.topic_id is not None and in_range(sh.topic_id.versions, version) \
            and resolve is not None:
        return resolve(getattr(obj, sh.topic_id.name))
    return None


def walk(msg: Struct, version: int, resolve: TopicResolver | None = None,
         group: str | None = None) -> Iterator[Slot]:
    """Every struct in ``msg`` at ``version``, outermost first (depth-first).

    ``group`` is the group the whole message is about (a request's ``group_id``),
    for responses that do not repeat it.
    """
    root = Slot(msg, shape(type(msg)), "top", 0, None, None, group, None, None)
    sh = root.shape
    if sh.group is not None and in_range(sh.group.versions, version):
        root.group = getattr(msg, sh.group.name) or group
    yield root
    yield from _children(root, version, resolve)


def _children(slot: Slot, version: int, resolve: TopicResolver | None) -> Iterator[Slot]:
    for f in slot.shape.children:
        if not in_range(f.versions, version) or f.struct is None:
            continue
        value = getattr(slot.obj, f.name)
        if value is None:
            continue
        items: list[Any] = value if f.is_array else [value]
        for item in items:
            if not isinstance(item, Struct):
                continue
            sh = shape(type(item))
            child = Slot(item, sh, "other", slot.depth + 1, slot.topic, slot.partition,
                         slot.group, value if f.is_array else None, slot)
            if sh.group is not None and in_range(sh.group.versions, version):
                child.group = getattr(item, sh.group.name) or slot.group
                child.level = "group"
            if sh.is_topic:
                topic = _topic_of(item, sh, version, resolve)
                if topic is not None or slot.topic is None:
                    child.topic = topic
                child.level = "topic"
            elif sh.partition is not None and slot.topic is not None \
                    and in_range(sh.partition.versions, version) and slot.level == "topic":
                child.partition = getattr(item, sh.partition.name)
                child.level = "partition"
            yield child
            yield from _children(child, version, resolve)


def levels_at(cls: type[Struct], version: int) -> frozenset[str]:
    """The levels at which ``cls`` (a response) can carry an error code at ``version``."""
    levels = _LEVELS.get((cls, version))
    if levels is None:
        levels = _LEVELS[(cls, version)] = _levels_at(cls, version)
    return levels


def _levels_at(cls: type[Struct], version: int) -> frozenset[str]:
    found: set[str] = set()

    def visit(c: type[Struct], level: str, in_topic: bool, seen: frozenset[type]) -> None:
        sh = shape(c)
        if sh.error is not None and in_range(sh.error.versions, version):
            found.add(level)
        for f in sh.children:
            if f.struct is None or f.struct in seen or not in_range(f.versions, version):
                continue
            csh = shape(f.struct)
            if csh.is_topic:
                lvl, topic = "topic", True
            elif csh.partition is not None and in_topic and level == "topic":
                lvl, topic = "partition", True
            elif csh.group is not None:
                lvl, topic = "group", in_topic
            else:
                lvl, topic = "other", in_topic
            visit(f.struct, lvl, topic, seen | {f.struct})

    visit(cls, "top", False, frozenset({cls}))
    return frozenset(found)


def set_field(obj: Struct, name: str, value: object, version: int) -> bool:
    """Set ``obj.name`` if the field exists at ``version``; report whether it did."""
    for f in type(obj).FIELDS:
        if f.name == name:
            if in_range(f.versions, version):
                setattr(obj, name, value)
                return True
            return False
    return False


def partition_targets(msg: Struct, version: int, resolve: TopicResolver | None = None
                      ) -> list[Slot]:
    """The partition slots of a request (or response), in order."""
    return [s for s in walk(msg, version, resolve) if s.level == "partition"]


def splice_topic(response: Struct, version: int, identity: dict[str, object], topic: str,
                 resolve: TopicResolver | None) -> Struct | None:
    """Find or add the struct for ``topic`` in ``response``'s topics; return it.

    ``identity`` holds the request's identity fields (``name``, ``topic``,
    ``topic_id``); whichever of them the response's topic struct has are copied.
    """
    topics_field = next((f for f in shape(type(response)).children
                         if f.is_array and f.struct is not None and shape(f.struct).is_topic
                         and in_range(f.versions, version)), None)
    if topics_field is None or topics_field.struct is None:
        return None
    topics: list[Struct] | None = getattr(response, topics_field.name)
    if topics is None:
        topics = []
        setattr(response, topics_field.name, topics)
    tsh = shape(topics_field.struct)
    holder = next((t for t in topics if _topic_of(t, tsh, version, resolve) == topic), None)
    if holder is None:
        holder = topics_field.struct()
        for name, value in identity.items():
            set_field(holder, name, value, version)
        topics.append(holder)
    return holder


def splice_partition(response: Struct, version: int, identity: dict[str, object],
                     topic: str, partition: int, resolve: TopicResolver | None) -> Struct | None:
    """Find or add the struct for ``topic``/``partition`` in ``response``; return it."""
    holder = splice_topic(response, version, identity, topic, resolve)
    if holder is None:
        return None
    parts_field = shape(type(holder)).partition_array
    if parts_field is None or parts_field.struct is None:
        return None
    parts: list[Struct] = getattr(holder, parts_field.name)
    psh = shape(parts_field.struct)
    assert psh.partition is not None
    existing = next((p for p in parts if getattr(p, psh.partition.name) == partition), None)
    if existing is not None:
        return existing
    new = parts_field.struct()
    setattr(new, psh.partition.name, partition)
    parts.append(new)
    return new


def identity_of(slot: Slot, version: int) -> dict[str, object]:
    """A topic slot's identity fields, offered under every spelling of the name field
    (requests and responses name it differently: Produce's ``name`` is Fetch's ``topic``)."""
    out: dict[str, object] = {}
    sh = slot.shape
    for f in (sh.topic_name, sh.topic_id):
        if f is not None and in_range(f.versions, version):
            out[f.name] = getattr(slot.obj, f.name)
            if f is sh.topic_name:
                for alias in TOPIC_NAME_FIELDS:
                    out.setdefault(alias, out[f.name])
    return out


def topic_identity(slot: Slot, version: int) -> dict[str, object]:
    """The identity fields of the topic struct above a partition slot."""
    return identity_of(slot.parent, version) if slot.parent is not None else {}


__all__ += ["OUTERMOST_FIRST", "identity_of", "splice_topic", "topic_identity"]
