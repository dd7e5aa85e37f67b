"""ApiVersions (key 18): the versions this broker serves, built from the handlers, and
from v3 the feature levels of KIP-584, which clients read from this answer
(``kafka-features describe``; the Java producer looks at ``transaction.version``).

The supported ranges and the finalized levels are ``kaflite.cluster.features``'s;
``group.version`` is not finalized on a broker whose
``group.coordinator.rebalance.protocols`` leaves ``consumer`` out. The finalized
levels' epoch is the metadata log's next offset, as a KRaft broker gives its metadata
image's offset: it grows with every change, so a client keeps the newest levels.

From v5 (KIP-1242) a client may name the cluster and the node it means to reach. As
Kafka 4.4's broker checks it: when the request names a cluster (a null ClusterId is
no claim, whatever the NodeId) and either that cluster or the NodeId is not this
broker's, the answer is REBOOTSTRAP_REQUIRED alone (no versions, no features): the
address now belongs to another broker or cluster, and the client must start again
from its bootstrap servers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster import features
from kaflite.cluster.groups._config import ConsumerGroupConfig
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
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

def feature_levels(broker: Broker) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """The supported (min, max) level of each feature, and the finalized ones."""
    finalized = features.finalized(broker.controller)
    if not ConsumerGroupConfig.from_props(broker.config.props).protocol_enabled:
        finalized.pop("group.version", None)
    return dict(features.SUPPORTED), finalized


async def handle(broker: Broker, conn: ServerConnection, header: RequestHeader,
                 req: ApiVersionsRequest) -> ApiVersionsResponse:
    if req.client_software_name:
        conn.info.software_name = req.client_software_name
        conn.info.software_version = req.client_software_version
    if header.request_api_version >= 5 and req.cluster_id is not None and (
            req.cluster_id != broker.controller.cluster_id or req.node_id != broker.node_id):
        return ApiVersionsResponse(error_code=errors.RebootstrapRequiredError.code,
                                   throttle_time_ms=0)
    supported, finalized = feature_levels(broker)
    if header.request_api_version < 4:
        # KIP-1022: a client before v4 cannot take a level 0; Kafka leaves those features
        # out of its supported ones (ApiVersionsResponse's alterFeatureLevel0)
        supported = {name: r for name, r in supported.items() if r[0] > 0}
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(broker.api_versions().items())],
        throttle_time_ms=0,
        supported_features=[SupportedFeatureKey(name, lo, hi)
                            for name, (lo, hi) in sorted(supported.items())],
        finalized_features_epoch=broker.controller.metadata_offset,
        finalized_features=[FinalizedFeatureKey(name, level, level)
                            for name, level in sorted(finalized.items())],
    )


HANDLERS = [Handler(ApiVersionsRequest, 0, 5, handle)]
