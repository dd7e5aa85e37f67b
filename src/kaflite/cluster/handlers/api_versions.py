"""ApiVersions (key 18): the versions this broker serves, built from the handlers, and
from v3 the feature levels of KIP-584, which clients read from this answer
(``kafka-features describe``; the Java producer looks at ``transaction.version``).

kaflite's levels are fixed by what it implements, not finalized by an operator, so
they never change and their epoch is a constant 0 (a client keeps the finalized
levels of an answer only when its epoch is above -1):

- ``group.version`` 1: KIP-848 consumer groups, finalized unless
  ``group.coordinator.rebalance.protocols`` leaves ``consumer`` out;
- ``transaction.version`` 1: explicit AddPartitionsToTxn and EndTxn up to v4
  (version 2, KIP-890's epoch bump at every commit, is not implemented).

``metadata.version`` is not listed: kaflite has no KRaft metadata log whose record
formats it would name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.groups._config import ConsumerGroupConfig
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kaflite.protocol.messages._generated.api_versions_response import (
    ApiVersion,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

FEATURES_EPOCH = 0


def feature_levels(broker: Broker) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """The supported (min, max) level of each feature, and the finalized ones."""
    supported = {"group.version": (0, 1), "transaction.version": (0, 1)}
    finalized = {"transaction.version": 1}
    if ConsumerGroupConfig.from_props(broker.config.props).protocol_enabled:
        finalized["group.version"] = 1
    return supported, finalized


async def handle(broker: Broker, conn: ServerConnection, header: RequestHeader,
                 req: ApiVersionsRequest) -> ApiVersionsResponse:
    if req.client_software_name:
        conn.info.software_name = req.client_software_name
        conn.info.software_version = req.client_software_version
    supported, finalized = feature_levels(broker)
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(broker.api_versions().items())],
        throttle_time_ms=0,
        supported_features=[SupportedFeatureKey(name, lo, hi)
                            for name, (lo, hi) in sorted(supported.items())],
        finalized_features_epoch=FEATURES_EPOCH,
        finalized_features=[FinalizedFeatureKey(name, level, level)
                            for name, level in sorted(finalized.items())],
    )


HANDLERS = [Handler(ApiVersionsRequest, 0, 4, handle)]
