"""The group coordinator: classic consumer groups and their committed offsets.

Each broker starts one ``GroupCoordinator`` (``broker.groups``); the API
handlers in ``cluster/handlers`` (``find_coordinator``, ``groups``,
``group_offsets``) call into it. State lives in ``__consumer_offsets`` in
Kafka's own record formats (``records``), so Kafka's tools, and any reader of
that topic, see the real groups and offsets.
"""

from kaflite.cluster.groups._classic import ClassicGroupManager, RequestContext
from kaflite.cluster.groups._config import GroupConfig
from kaflite.cluster.groups._coordinator import GroupCoordinator
from kaflite.cluster.groups._group import ClassicGroup, ClassicMember, GroupState
from kaflite.cluster.groups._records import OffsetAndMetadata
from kaflite.cluster.groups._shard import CoordinatorShard

__all__ = [
    "ClassicGroup",
    "ClassicGroupManager",
    "ClassicMember",
    "CoordinatorShard",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "OffsetAndMetadata",
    "RequestContext",
]
