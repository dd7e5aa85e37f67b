"""UpdateFeatures (key 57): finalize feature levels (``kafka-features upgrade|downgrade``,
``Admin.updateFeatures``).

Each feature is checked and changed on its own (``kaflite.cluster.features``: levels
kaflite supports; a lower level only with a downgrade type, a higher one only
without); the ones that pass are written together as FeatureLevelRecords, unless
``validate_only``. v0 says downgrade with ``allow_downgrade``, v1 and later with
``upgrade_type`` (1 upgrade, 2 safe downgrade, 3 unsafe downgrade). As Kafka's
controller answers: v0 and v1 a result per feature, v2 only the first failure at the
top level. ALTER on the cluster is in ``kaflite.cluster.acl``.
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


async def handle_update_features(broker: Broker, conn: ServerConnection,
                                 header: RequestHeader,
                                 req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    version = header.request_api_version
    controller = broker.controller
    results: list[tuple[str, str | None]] = []
    accepted: list[tuple[str, int]] = []
    for u in req.feature_updates:
        if version == 0:
            kind = features.SAFE_DOWNGRADE if u.allow_downgrade else features.UPGRADE
        else:
            kind = u.upgrade_type
        why = features.check_update(controller, u.feature, u.max_version_level, kind)
        results.append((u.feature, None if why is None
                        else features.error_message(u.feature, u.max_version_level, why)))
        if why is None:
            accepted.append((u.feature, u.max_version_level))
    if not req.validate_only:
        with controller.batched():
            for name, level in accepted:
                controller.set_feature(name, level)
    if version >= 2:
        failed = next(((name, why) for name, why in results if why is not None), None)
        return UpdateFeaturesResponse(throttle_time_ms=0,
                                      error_code=0 if failed is None else INVALID,
                                      error_message=None if failed is None else failed[1])
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                  results=[ufr.UpdatableFeatureResult(
                                      name, 0 if why is None else INVALID, why)
                                      for name, why in results])


HANDLERS = [Handler(UpdateFeaturesRequest, 0, 2, handle_update_features)]
