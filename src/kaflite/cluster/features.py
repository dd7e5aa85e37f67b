"""Feature levels (KIP-584): what kaflite supports, what the cluster has finalized, and
the rules of changing them (UpdateFeatures, ``kafka-features upgrade|downgrade``).

The finalized levels live in the controller's metadata (``Controller.features``, one
``FeatureLevelRecord`` per change, as KRaft keeps them). A new cluster finalizes
``metadata.version`` 33 (4.4-IV2, Kafka 4.4's latest production level: the metadata
log's record versions, ``kaflite.cluster.metalog._versions``; kaflite supports 22 to
33), ``group.version`` 1
(KIP-848 consumer groups) and ``transaction.version`` 2 (KIP-890 part 2: partition
leaders add partitions to transactions, each end bumps the producer epoch), as a
freshly formatted Kafka 4.x cluster does, and ``share.version`` 1 (KIP-932 share groups,
without level 2's dead-letter queues, which kaflite does not have). kaflite lists
``kraft.version``, ``streams.version`` and ``eligible.leader.replicas.version`` at level
0 only: one static controller (no dynamic quorum), no Streams groups, no ELR. A
cluster formatted before this module
has records for ``metadata.version`` only: a feature without one is at its default.
A level of 0 is kept as a record of 0 (so that it is not taken for that default),
and is not listed as finalized, as Kafka omits a level-0 feature.

Effects: ``group.version`` 0 turns KIP-848 groups off (ConsumerGroupHeartbeat answers
UNSUPPORTED_VERSION, as Kafka's does); ``share.version`` 0 turns share groups off (their
heartbeat, describe, fetch, acknowledge and offsets APIs answer UNSUPPORTED_VERSION, as
Kafka 4.4's ``isShareGroupProtocolEnabled`` makes them); ``transaction.version`` tells producers which
transaction protocol to speak (the Java client and kaflite's use v2 from level 2);
the brokers serve both, as Kafka's do, for producers that decided before a change.

Changing a level, as Kafka's ``FeatureControlManager.updateFeature``: each feature
on its own; a level outside what kaflite supports, or lower than the current one
without a downgrade type, or higher with one, is INVALID_UPDATE_VERSION, and so is a
``metadata.version`` downgrade across a level whose metadata changed (safe or unsafe,
``updateMetadataVersion``). From 4.4-IV1 an ACL's host may be a CIDR block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.metalog import METADATA_VERSION, metadata_versions
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.controller import Controller

__all__ = [
    "DEFAULTS",
    "SAFE_DOWNGRADE",
    "SUPPORTED",
    "UNSAFE_DOWNGRADE",
    "UPGRADE",
    "check_update",
    "error_message",
    "finalized",
    "level",
    "require_share_groups",
]

SUPPORTED: dict[str, tuple[int, int]] = {
    "metadata.version": (metadata_versions.MINIMUM, metadata_versions.DEFAULT),
    "group.version": (0, 1),
    "transaction.version": (0, 2),
    "share.version": (0, 1),
    "kraft.version": (0, 0),
    "streams.version": (0, 0),
    "eligible.leader.replicas.version": (0, 0),
}
DEFAULTS = {"group.version": 1, "transaction.version": 2, "share.version": 1}
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3     # UpdateFeatures' upgrade_type


def level(controller: Controller, name: str) -> int:
    """The finalized level of ``name`` (0: off, or unknown)."""
    if name == "metadata.version":
        return controller.features.get(name, METADATA_VERSION)
    return controller.features.get(name, DEFAULTS.get(name, 0))


def finalized(controller: Controller) -> dict[str, int]:
    """Every feature finalized above level 0."""
    out = {name: level(controller, name) for name in SUPPORTED}
    return {name: v for name, v in out.items() if v > 0}


def require_share_groups(controller: Controller) -> None:
    """UNSUPPORTED_VERSION unless ``share.version`` is at least 1."""
    if level(controller, "share.version") < 1:
        raise errors.UnsupportedVersionError("The version of API is not supported.")


def check_update(controller: Controller, name: str, new: int, upgrade_type: int) -> str | None:
    """Why ``name`` may not go to level ``new`` (None: it may)."""
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "kaflite does not know that upgrade type."
    if new < 0:
        return "A feature level cannot be below 0."
    if name not in SUPPORTED:
        return "kaflite does not support this feature."
    lo, hi = SUPPORTED[name]
    if not lo <= new <= hi:
        return f"kaflite supports levels {lo} to {hi} of this feature."
    current = level(controller, name)
    if new < current and upgrade_type == UPGRADE:
        return ("Can't downgrade the version of this feature without setting the upgrade "
                "type to either safe or unsafe downgrade.")
    if new > current and upgrade_type != UPGRADE:
        return "Can't downgrade to a newer version."
    return None


def check_metadata_version(controller: Controller, new: int, upgrade_type: int) -> str | None:
    """Why ``metadata.version`` may not go down to ``new`` (None: it may), as Kafka's
    ``FeatureControlManager.updateMetadataVersion``: not across a level whose metadata
    changed (that could lose information), and an unsafe downgrade not at all then."""
    current = level(controller, "metadata.version")
    if new >= current or not metadata_versions.metadata_changed(current, new):
        return None
    why = ("Unsafe metadata downgrade is not supported in this version."
           if upgrade_type == UNSAFE_DOWNGRADE else
           "Refusing to perform the requested downgrade because it might delete metadata "
           "information.")
    return f"Unsupported metadata.version downgrade from {current} to {new}. {why}"


def error_message(name: str, new: int, why: str) -> str:
    """INVALID_UPDATE_VERSION's message, in Kafka's words."""
    return f"Invalid update version {new} for feature {name}. {why}"
