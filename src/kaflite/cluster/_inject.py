"""Per-request fault rules: match a request, then drop, delay, throttle or fail it.

Theory of operation
-------------------
Like franz-go's kfake control hooks, a rule is a matcher plus an action, kept for
the next N matching requests (``remaining``) or until removed (``None``, kfake's
``KeepControl``). The connection asks ``plan_request`` before it calls the
handler and ``finish_response`` after, so handlers know nothing about faults.

An injected error lands where Kafka itself would put it, found generically with
``_msgscope``:

* partition errors (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
  OFFSET_OUT_OF_RANGE...) on the partitions, topic errors
  (TOPIC_AUTHORIZATION_FAILED...) on the topic where the API has a topic-level
  code (Metadata) and on its partitions otherwise (Produce, Fetch), and every
  other error (NOT_COORDINATOR, ILLEGAL_GENERATION...) as far out as the API
  reports errors: the top of Heartbeat or JoinGroup, the group of OffsetFetch
  v8+ or FindCoordinator v4, each partition of OffsetCommit.
* ``level`` on a rule overrides that choice.

How it is applied depends on the level, so that an error never comes with the
side effect of a request that succeeded:

1. *top*: the handler is not called; the response is the API's default response
   with the error code (and -1 in the offset/id fields, as Kafka fills them).
2. *partition*, for a request that lists partitions (Produce, ListOffsets,
   OffsetCommit, DeleteRecords...): the matching partitions are taken out of the
   request before the handler runs (nothing is appended, committed or deleted
   for them) and put back into the response with the error. *topic*, for a
   request that lists topics (Metadata, CreateTopics, DeleteTopics v6+...): the
   same with whole topics (a denied topic is neither created nor deleted).
3. otherwise (Metadata partitions, groups, and Fetch, whose
   incremental sessions must keep every partition) the handler's response is
   rewritten; a Fetch partition of the request or its session that the response
   left out gets an error entry spliced in.

A Metadata request for all topics does not list a topic denied by an injected
ACL, as Kafka leaves unauthorized topics out of such a response.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kaflite.cluster._msgscope import (
    OUTERMOST_FIRST,
    Slot,
    TopicResolver,
    identity_of,
    levels_at,
    set_field,
    shape,
    splice_partition,
    splice_topic,
    topic_identity,
    walk,
)
from kaflite.protocol import errors
from kaflite.protocol.messages import REGISTRY, Struct
from kaflite.protocol.messages._runtime import in_range

__all__ = ["RequestPlan", "Rule", "default_level", "finish_response", "plan_request"]

METADATA, FETCH, FIND_COORDINATOR, DESCRIBE_GROUPS = 3, 1, 10, 15
UNKNOWN_MEMBER_ID = errors.UnknownMemberIdError.code
KINDS = ("error", "delay", "drop", "throttle")
LEVELS = ("top", "group", "topic", "partition")

# Errors Kafka reports per partition.
PARTITION_ERRORS = frozenset(c.code for c in (
    errors.OffsetOutOfRangeError, errors.CorruptMessageError,
    errors.UnknownTopicOrPartitionError, errors.LeaderNotAvailableError,
    errors.NotLeaderOrFollowerError, errors.RequestTimedOutError,
    errors.ReplicaNotAvailableError, errors.MessageTooLargeError,
    errors.NotEnoughReplicasError, errors.NotEnoughReplicasAfterAppendError,
    errors.KafkaStorageError, errors.FencedLeaderEpochError, errors.UnknownLeaderEpochError,
    errors.OffsetNotAvailableError, errors.InvalidRecordError,
    errors.OutOfOrderSequenceNumberError, errors.DuplicateSequenceNumberError,
    errors.UnknownProducerIdError, errors.InvalidProducerEpochError,
))
# Errors Kafka reports per topic where the API has a topic-level code.
TOPIC_ERRORS = frozenset(c.code for c in (
    errors.TopicAuthorizationFailedError, errors.InvalidTopicExceptionError,
    errors.UnknownTopicIdError,
))

# Fields Kafka fills with -1 in an error entry (invalid offset, no node...).
_NEG1 = ("high_watermark", "last_stable_offset", "log_start_offset", "base_offset",
         "log_append_time_ms", "offset", "timestamp", "committed_offset",
         "committed_leader_epoch", "low_watermark", "end_offset", "generation_id", "node_id",
         "port", "producer_id", "producer_epoch", "leader_epoch")

_ids = itertools.count(1)


@dataclass
class Rule:
    """One injected fault: what it matches and what it does."""

    kind: str                          # "error", "delay", "drop" or "throttle"
    api_key: int | None = None         # None: any API
    error_code: int = 0
    delay_ms: int = 0                  # delay, or throttle time
    remaining: int | None = 1          # matching requests left; None until removed
    broker: int | None = None
    topic: str | None = None
    partition: int | None = None
    group: str | None = None
    client_id: str | None = None
    level: str | None = None           # where an error goes; None: where Kafka puts it
    include_replicas: bool = False     # also hit follower brokers' replication requests
    id: int = field(default_factory=lambda: next(_ids))
    hits: int = 0
    created: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")
        if self.level is not None and self.level not in LEVELS:
            raise ValueError(f"level must be one of {LEVELS}, not {self.level!r}")
        if self.kind == "error" and not self.error_code:
            raise ValueError("an error rule needs a non-zero error code")
        if self.partition is not None and self.topic is None:
            raise ValueError("a partition scope needs a topic")
        if self.remaining is not None and self.remaining < 1:
            raise ValueError("count must be at least 1 (or None: until removed)")

    @property
    def scoped_to_topic(self) -> bool:
        return self.topic is not None

    def in_scope(self, topic: str | None, partition: int | None, group: str | None) -> bool:
        if self.topic is not None and topic != self.topic:
            return False
        if self.partition is not None and partition != self.partition:
            return False
        return self.group is None or group == self.group

    def to_dict(self) -> dict[str, Any]:
        info = REGISTRY.get(self.api_key) if self.api_key is not None else None
        cls = errors.ERROR_CLASSES.get(self.error_code)
        return {
            "id": self.id, "kind": self.kind,
            "api": info.name if info is not None else None, "api_key": self.api_key,
            "error": cls.name if cls is not None else (self.error_code or None),
            "error_code": self.error_code or None,
            "delay_ms": self.delay_ms or None,
            "remaining": self.remaining, "hits": self.hits,
            "broker": self.broker, "topic": self.topic, "partition": self.partition,
            "group": self.group, "client_id": self.client_id, "level": self.level,
            "include_replicas": self.include_replicas, "created": self.created,
        }


@dataclass
class RequestPlan:
    drop: bool = False
    delay_ms: float = 0.0
    throttle_ms: int = 0
    response: Struct | None = None      # the handler is skipped: this is the answer
    # (rule, topic identity, topic, partition) taken out of the request
    stripped: list[tuple[Rule, dict[str, object], str, int]] = field(default_factory=list)
    # (rule, topic identity, topic) taken out of the request
    stripped_topics: list[tuple[Rule, dict[str, object], str]] = field(default_factory=list)
    rewrites: list[tuple[Rule, str]] = field(default_factory=list)  # (rule, level)
    # an UNKNOWN_MEMBER_ID is injected: the coordinator must then not know the member
    # either (Kafka answers it only for a member it dropped), or the client joins anew
    # and leaves its old id behind for the rebalance to wait on
    forgets_member: bool = False


def default_level(rule: Rule, available: frozenset[str]) -> str | None:
    """Where Kafka reports ``rule``'s error in a response that has ``available`` levels."""
    if rule.level is not None:
        return rule.level if rule.level in available else None
    code = rule.error_code
    if code in PARTITION_ERRORS:
        prefer: tuple[str, ...] = ("partition", "topic")
    elif code in TOPIC_ERRORS or rule.scoped_to_topic:
        prefer = ("topic", "partition")
    else:
        prefer = OUTERMOST_FIRST
    found = next((lvl for lvl in prefer if lvl in available), None)
    if found is None and not rule.scoped_to_topic:
        found = next((lvl for lvl in OUTERMOST_FIRST if lvl in available), None)
    return found


def request_groups(api_key: int, request: Struct) -> set[str]:
    """Every group a request names (group_id, OffsetFetch v8 groups, coordinator keys)."""
    out: set[str] = set()
    gid = getattr(request, "group_id", None)
    if isinstance(gid, str) and gid:
        out.add(gid)
    for g in getattr(request, "groups", None) or []:
        if isinstance(g, str):
            out.add(g)
        elif isinstance(getattr(g, "group_id", None), str):
            out.add(g.group_id)
    if api_key == FIND_COORDINATOR and getattr(request, "key_type", 0) == 0:
        key = getattr(request, "key", None)
        if key:
            out.add(key)
        out.update(k for k in getattr(request, "coordinator_keys", None) or [] if k)
    return out


def _consume(rule: Rule, rules: list[Rule]) -> None:
    rule.hits += 1
    if rule.remaining is not None:
        rule.remaining -= 1
        if rule.remaining <= 0 and rule in rules:
            rules.remove(rule)


def _live(rule: Rule) -> bool:
    return rule.remaining is None or rule.remaining > 0


def _mentions_topic(rule: Rule, api_key: int, version: int, request: Struct,
                     resolve: TopicResolver | None) -> bool:
    if rule.topic is None:
        return True
    if api_key == METADATA and getattr(request, "topics", None) is None:
        return True  # all topics
    return any(s.level in ("topic", "partition") and rule.in_scope(s.topic, s.partition, None)
               for s in walk(request, version, resolve))


def plan_request(rules: list[Rule], broker_id: int, client_id: str | None, is_replica: bool,
                 api_key: int, version: int, request: Struct,
                 resolve: TopicResolver | None) -> RequestPlan | None:
    """Match ``rules`` against one request; consume the ones applied before the handler."""
    plan: RequestPlan | None = None
    groups: set[str] | None = None
    for rule in list(rules):
        if not _live(rule) or (rule.api_key is not None and rule.api_key != api_key):
            continue
        if rule.broker is not None and rule.broker != broker_id:
            continue
        if rule.client_id is not None and rule.client_id != client_id:
            continue
        if is_replica and not rule.include_replicas:
            continue
        if rule.group is not None:
            if groups is None:
                groups = request_groups(api_key, request)
            if rule.group not in groups:
                continue
        if plan is None:
            plan = RequestPlan()
        if rule.kind != "error":
            if not _mentions_topic(rule, api_key, version, request, resolve):
                continue
            if rule.kind == "drop":
                plan.drop = True
            elif rule.kind == "delay":
                plan.delay_ms += rule.delay_ms
            else:
                plan.throttle_ms = max(plan.throttle_ms, rule.delay_ms)
            _consume(rule, rules)
            continue
        info = REGISTRY.get(api_key)
        if info is None:
            continue
        level = default_level(rule, levels_at(info.response, version))
        if level is None:
            continue
        plan.forgets_member = plan.forgets_member or rule.error_code == UNKNOWN_MEMBER_ID
        if level == "top":
            if plan.response is None and not rule.scoped_to_topic:
                plan.response = _error_response(info.response, version, rule.error_code)
                _consume(rule, rules)
            continue
        if level == "partition" and api_key != FETCH:
            took = _strip(rule, request, version, resolve)
            if took:
                plan.stripped.extend((rule, ident, t, p) for ident, t, p in took)
                _consume(rule, rules)
                continue
        if level == "topic" and rule.partition is None and (api_key, version) != (METADATA, 0):
            topics = _strip_topics(rule, request, version, resolve)
            if topics:
                plan.stripped_topics.extend((rule, ident, t) for ident, t in topics)
                _consume(rule, rules)
                continue
        plan.rewrites.append((rule, level))
    return plan


def _strip(rule: Rule, request: Struct, version: int, resolve: TopicResolver | None
           ) -> list[tuple[dict[str, object], str, int]]:
    """Take the partitions ``rule`` hits out of ``request``."""
    took = []
    emptied: list[Slot] = []
    for slot in [s for s in walk(request, version, resolve) if s.level == "partition"]:
        if slot.topic is None or slot.partition is None or slot.container is None:
            continue
        if not rule.in_scope(slot.topic, slot.partition, slot.group):
            continue
        took.append((topic_identity(slot, version), slot.topic, slot.partition))
        slot.container.remove(slot.obj)
        if not slot.container and slot.parent is not None:
            emptied.append(slot.parent)
    for topic in emptied:
        if topic.container is not None and topic.obj in topic.container:
            topic.container.remove(topic.obj)
    return took


def _strip_topics(rule: Rule, request: Struct, version: int, resolve: TopicResolver | None
                  ) -> list[tuple[dict[str, object], str]]:
    """Take the topics ``rule`` hits out of ``request`` (CreateTopics, Metadata...)."""
    took = []
    for slot in list(walk(request, version, resolve)):
        if slot.level != "topic" or slot.depth != 1 or slot.container is None \
                or slot.topic is None or not rule.in_scope(slot.topic, None, slot.group):
            continue
        took.append((identity_of(slot, version), slot.topic))
        slot.container.remove(slot.obj)
    return took


def _error_response(cls: type[Struct], version: int, code: int) -> Struct:
    response = cls()
    mark_error(response, code, "top", version)
    return response


def mark_error(obj: Struct, code: int, level: str, version: int) -> None:
    """Put ``code`` on ``obj`` and fill the fields Kafka leaves invalid in an error entry."""
    field = shape(type(obj)).error
    set_field(obj, field.name if field is not None else "error_code", code, version)
    for f in type(obj).FIELDS:
        if not in_range(f.versions, version):
            continue
        negative = f.name in _NEG1 or (
            f.name == "leader_id" and code == errors.LeaderNotAvailableError.code)
        if negative and f.type in ("int32", "int64", "int16") and not f.is_array:
            setattr(obj, f.name, -1)
        elif f.name == "records":
            setattr(obj, f.name, b"")  # Kafka's MemoryRecords.EMPTY: librdkafka rejects null
        elif f.name == "host" and f.type == "string" and not f.is_array:
            setattr(obj, f.name, "")
        elif level in ("topic", "group") and f.is_array and f.struct is not None:
            setattr(obj, f.name, [])


SessionPartitions = Callable[[int], list[tuple[str, Any, int]]]


def finish_response(plan: RequestPlan, rules: list[Rule], api_key: int, version: int,
                    request: Struct, response: Struct, resolve: TopicResolver | None,
                    session_partitions: SessionPartitions | None = None) -> Struct:
    """Put back stripped partitions and topics with their error; apply the rewrites."""
    for rule, ident, topic in plan.stripped_topics:
        holder = splice_topic(response, version, ident, topic, resolve)
        if holder is not None:
            mark_error(holder, rule.error_code, "topic", version)
    for rule, ident, topic, partition in plan.stripped:
        entry = splice_partition(response, version, ident, topic, partition, resolve)
        if entry is not None:
            mark_error(entry, rule.error_code, "partition", version)
    for rule, level in plan.rewrites:
        if not _live(rule):
            continue
        if _rewrite(rule, level, api_key, version, request, response, resolve,
                    session_partitions):
            _consume(rule, rules)
    return response


def _rewrite(rule: Rule, level: str, api_key: int, version: int, request: Struct,
             response: Struct, resolve: TopicResolver | None,
             session_partitions: SessionPartitions | None) -> bool:
    all_topics = api_key == METADATA and getattr(request, "topics", None) is None
    hit = False
    seen: set[tuple[str, int]] = set()
    group = next(iter(request_groups(api_key, request)), None)
    for slot in list(walk(response, version, resolve, group)):
        if slot.level != level or not slot.error_at(version):
            continue
        if not rule.in_scope(slot.topic, slot.partition, slot.group):
            continue
        if level in ("topic", "partition") and rule.scoped_to_topic and slot.topic is None:
            continue
        if slot.topic is not None and slot.partition is not None:
            seen.add((slot.topic, slot.partition))
        if all_topics and level == "topic" and slot.container is not None \
                and rule.error_code == errors.TopicAuthorizationFailedError.code:
            slot.container.remove(slot.obj)
        else:
            mark_error(slot.obj, rule.error_code, level, version)
        hit = True
    if api_key == FETCH and level == "partition" and rule.topic is not None:
        hit = _splice_fetch(rule, version, request, response, resolve, session_partitions,
                            seen) or hit
    return hit


def _splice_fetch(rule: Rule, version: int, request: Struct, response: Struct,
                  resolve: TopicResolver | None, session_partitions: SessionPartitions | None,
                  seen: set[tuple[str, int]]) -> bool:
    """Add error entries for fetched partitions an incremental response left out."""
    wanted: list[tuple[dict[str, object], str, int]] = []
    for slot in walk(request, version, resolve):
        if slot.level == "partition" and slot.topic is not None and slot.partition is not None:
            wanted.append((topic_identity(slot, version), slot.topic, slot.partition))
    if session_partitions is not None:
        for topic, topic_id, index in session_partitions(getattr(response, "session_id", 0)):
            wanted.append(({"topic": topic, "name": topic, "topic_id": topic_id}, topic, index))
    hit = False
    for ident, topic, index in wanted:
        if (topic, index) in seen or not rule.in_scope(topic, index, None):
            continue
        seen.add((topic, index))
        entry = splice_partition(response, version, ident, topic, index, resolve)
        if entry is not None:
            mark_error(entry, rule.error_code, "partition", version)
            hit = True
    return hit
