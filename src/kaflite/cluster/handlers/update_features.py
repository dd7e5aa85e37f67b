"""UpdateFeatures (key 57): finalize feature levels (``kafka-features upgrade|downgrade``,
``Admin.updateFeatures``).

Each feature is checked on its own (``kaflite.cluster.features``: levels kaflite
supports; a lower level only with a downgrade type, a higher one only without). As
Kafka 4.4's controller (``FeatureControlManager.updateFeatures``), the request is one
change: the first feature that fails fails it all, and nothing is written. Otherwise
the levels are written together as FeatureLevelRecords, unless ``validate_only``. v0
says downgrade with ``allow_downgrade``, v1 and later with ``upgrade_type`` (1 upgrade,
2 safe downgrade, 3 unsafe downgrade). The answer, as ``QuorumController`` builds it:
the error at the top level (v0 and v1 with "The update failed for all features since
the following feature had an error: " before its message), and in v0 and v1 a result
for every feature with that error's code and the error's own description. ALTER on the
cluster is in ``kaflite.cluster.acl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster import features
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import UpdateFeaturesRequest, UpdateFeaturesResponse
from kaflite.protocol.messages import update_features_response as ufr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

INVALID = errors.InvalidUpdateVersionError.code


# The v0 and v1 top-level message's prefix, and INVALID_UPDATE_VERSION's description
# (Errors.message()), which each feature's result carries (Kafka 4.4's QuorumController)
ALL_FAILED = "The update failed for all features since the following feature had an error: "
DESCRIPTION = "The given update version was invalid."


async def handle_update_features(broker: Broker, conn: ServerConnection,
                                 header: RequestHeader,
                                 req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    version = header.request_api_version
    controller = broker.controller
    updates: list[tuple[str, int]] = []
    failure: str | None = None
    for u in req.feature_updates:
        kind = (features.SAFE_DOWNGRADE if u.allow_downgrade else features.UPGRADE) \
            if version == 0 else u.upgrade_type
        why = features.check_update(controller, u.feature, u.max_version_level, kind)
        if why is not None:
            failure = features.error_message(u.feature, u.max_version_level, why)
        elif u.feature == "metadata.version":
            failure = features.check_metadata_version(controller, u.max_version_level, kind)
        if failure is not None:
            break
        updates.append((u.feature, u.max_version_level))
    if failure is None and not req.validate_only:
        with controller.batched():
            for name, level in updates:
                controller.set_feature(name, level)
    code = 0 if failure is None else INVALID
    if version >= 2:
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=code,
                                      error_message=failure)
    return UpdateFeaturesResponse(
        throttle_time_ms=0, error_code=code,
        error_message=None if failure is None else ALL_FAILED + failure,
        results=[ufr.UpdatableFeatureResult(u.feature, code,
                                            None if failure is None else DESCRIPTION)
                 for u in req.feature_updates])


HANDLERS = [Handler(UpdateFeaturesRequest, 0, 2, handle_update_features)]
