"""The topic-prefix filter: a virtual cluster on a slice of a real one.

``topic-prefix:prefix=tenant-a.`` maps every topic name a client uses onto
``tenant-a.<name>`` upstream and back, so that two tenants with their own
proxies (or filters) share one cluster without seeing each other's topics, in
the spirit of Kroxylicious's and Conduktor Gateway's virtual clusters.

* Requests: every topic name is prefixed, wherever the message keeps it (found
  by the generic walk of ``kaflite.cluster._msgscope``: Produce, Fetch before
  topic ids, ListOffsets, Metadata, OffsetCommit, OffsetFetch, CreateTopics,
  DeleteTopics, DeleteRecords, OffsetForLeaderEpoch, AddPartitionsToTxn,
  TxnOffsetCommit, CreatePartitions, OffsetDelete...), plus DeleteTopics' v0-v5
  name list and the topic resources of DescribeConfigs, AlterConfigs and
  IncrementalAlterConfigs.
* Responses: the prefix is taken off again; a topic without it (another
  tenant's, or an internal one) is left out of a Metadata answer for all topics.
* Group ids and transactional ids are prefixed the same way, so that tenants
  with the same group name have two groups upstream: FindCoordinator keys (both
  forms), the classic group APIs, OffsetCommit and OffsetFetch (both forms),
  DescribeGroups, DeleteGroups, OffsetDelete, InitProducerId, Produce's
  transactional id, AddPartitionsToTxn (both forms), AddOffsetsToTxn, EndTxn
  and TxnOffsetCommit; answers carry them back without the prefix, and a
  ListGroups answer shows only the tenant's groups.
* Topic ids need no mapping: they are unique in the cluster, and a client only
  learns those of its own topics.
* Every other API that can name a topic (ACLs, DescribeProducers, share groups,
  KIP-848 heartbeats with topic names...) is refused: the proxy leaves it out
  of its ApiVersions answer, and a request for it anyway is answered locally
  with INVALID_REQUEST. The group protocol's opaque member metadata keeps the
  client's own names, which every member of a group sees the same way.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from kaflite.cluster._inject import mark_error
from kaflite.cluster._msgscope import set_field, walk
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    REGISTRY,
    ApiVersionsResponse,
    DeleteTopicsRequest,
    ListGroupsResponse,
    Struct,
)
from kaflite.proxy.filters.base import Exchange, Filter

__all__ = ["SUPPORTED_APIS", "TopicPrefixFilter"]

METADATA = 3
CONFIG_APIS = frozenset({32, 33, 44})     # DescribeConfigs, AlterConfigs, IncrementalAlterConfigs
TOPIC_RESOURCE = 2
# APIs whose topic names the filter rewrites, and those that carry none.
TOPIC_APIS = frozenset({0, 1, 2, 3, 8, 9, 19, 20, 21, 23, 24, 28, 37, 47}) | CONFIG_APIS
NO_TOPIC_APIS = frozenset({10, 11, 12, 13, 14, 15, 16, 17, 18, 22, 25, 26, 36, 42, 60})
SUPPORTED_APIS = TOPIC_APIS | NO_TOPIC_APIS
LIST_GROUPS, FIND_COORDINATOR = 16, 10
# APIs whose requests or responses carry group or transactional ids, and where.
ID_APIS = frozenset({0, 8, 9, 10, 11, 12, 13, 14, 15, 16, 22, 24, 25, 26, 28, 42, 47})
ID_FIELDS = frozenset({"group_id", "transactional_id", "v3_and_below_transactional_id"})
ID_FIELDS_BY_API = {FIND_COORDINATOR: frozenset({"key", "coordinator_keys"}),
                    15: frozenset({"groups"}),          # DescribeGroups request: names
                    42: frozenset({"groups_names"})}    # DeleteGroups request
INVALID_REQUEST = errors.InvalidRequestError.code


class TopicPrefixFilter(Filter):
    name = "topic-prefix"

    def __init__(self, prefix: str) -> None:
        if not prefix:
            raise ValueError("topic-prefix needs a non-empty prefix")
        self.prefix = prefix

    @classmethod
    def from_options(cls, options: dict[str, str]) -> TopicPrefixFilter:
        return cls(options.get("prefix", ""))

    def wants(self, api_key: int, version: int) -> bool:
        return True

    # -- names ------------------------------------------------------------------------
    def _rename(self, msg: Struct, version: int, api_key: int, outward: bool) -> bool:
        """Prefix (``outward``: upstream) or strip every topic name in ``msg``."""
        changed = False
        removed: list[tuple[list[object], Struct]] = []
        for slot in walk(msg, version):
            field = slot.shape.topic_name
            if slot.level != "topic" or field is None:
                continue
            name = getattr(slot.obj, field.name, None)
            if not isinstance(name, str) or not name:
                continue
            if outward:
                changed = set_field(slot.obj, field.name, self.prefix + name, version) \
                    or changed
            elif name.startswith(self.prefix):
                changed = set_field(slot.obj, field.name, name[len(self.prefix):], version) \
                    or changed
            elif api_key == METADATA and slot.container is not None and slot.depth == 1:
                removed.append((slot.container, slot.obj))
        for container, obj in removed:
            container.remove(obj)
            changed = True
        if isinstance(msg, DeleteTopicsRequest) and msg.topic_names:
            msg.topic_names = [self._map(n, outward) for n in msg.topic_names]
            changed = True
        if api_key in CONFIG_APIS:
            for r in getattr(msg, "resources", None) or []:
                if getattr(r, "resource_type", None) == TOPIC_RESOURCE and r.resource_name:
                    r.resource_name = self._map(r.resource_name, outward)
                    changed = True
        return changed

    def _ids(self, msg: Struct, api_key: int, outward: bool) -> bool:
        """Prefix (``outward``) or strip every group and transactional id in ``msg``."""
        names = ID_FIELDS | ID_FIELDS_BY_API.get(api_key, frozenset())
        changed = False
        if isinstance(msg, ListGroupsResponse) and not outward:
            kept = [g for g in msg.groups if g.group_id.startswith(self.prefix)]
            changed = len(kept) != len(msg.groups)
            msg.groups = kept
        stack = [msg]
        while stack:
            obj = stack.pop()
            if not is_dataclass(obj):
                continue
            for f in fields(obj):
                value = getattr(obj, f.name)
                if isinstance(value, Struct):
                    stack.append(value)
                elif isinstance(value, list) and value:
                    if isinstance(value[0], Struct):
                        stack.extend(value)
                    elif f.name in names and isinstance(value[0], str):
                        setattr(obj, f.name, [self._map(v, outward) for v in value])
                        changed = True
                elif f.name in names and isinstance(value, str) and value:
                    mapped = self._map(value, outward)
                    if mapped != value:
                        setattr(obj, f.name, mapped)
                        changed = True
        return changed

    def _map(self, name: str, outward: bool) -> str:
        if outward:
            return self.prefix + name
        return name[len(self.prefix):] if name.startswith(self.prefix) else name

    # -- hooks ------------------------------------------------------------------------
    def on_request(self, exchange: Exchange) -> None:
        ex = exchange
        if ex.request is None:
            return
        if ex.api_key not in SUPPORTED_APIS:
            info = REGISTRY.get(ex.api_key)
            if info is not None:
                response = info.response()
                mark_error(response, INVALID_REQUEST, "top", ex.version)
                ex.answer(response)
            else:
                ex.close = True
            return
        if ex.api_key in TOPIC_APIS and self._rename(ex.request, ex.version, ex.api_key, True):
            ex.request_changed = True
        if ex.api_key in ID_APIS and self._ids(ex.request, ex.api_key, True):
            ex.request_changed = True

    def on_response(self, exchange: Exchange) -> None:
        ex = exchange
        if ex.response is None:
            return
        if isinstance(ex.response, ApiVersionsResponse):
            ex.response.api_keys = [a for a in ex.response.api_keys
                                    if a.api_key in SUPPORTED_APIS]
            ex.response_changed = True
            return
        if ex.api_key in TOPIC_APIS and self._rename(ex.response, ex.version, ex.api_key, False):
            ex.response_changed = True
        if ex.api_key in ID_APIS and self._ids(ex.response, ex.api_key, False):
            ex.response_changed = True
