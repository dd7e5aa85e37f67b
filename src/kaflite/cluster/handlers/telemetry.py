"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72), served
from the broker's ``TelemetryManager`` (``kaflite.cluster.telemetry``), and
ListConfigResources (74, once ListClientMetricsResources), which lists the resources
that can hold configs.

Kafka 4.4 serves GetTelemetrySubscriptions v0 and PushTelemetry v0. ListConfigResources
v0 lists the client metrics subscriptions. v1 (KIP-1142) takes the resource types to
list, none meaning all of them; as Kafka 4.4's broker answered when asked: every topic
(internal ones included), every registered broker as both BROKER and BROKER_LOGGER, the
client metrics subscriptions, and the groups that have configs (not every group). A
type outside those is UNSUPPORTED_VERSION for the whole request.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.client_metrics import CLIENT_METRICS_RESOURCE
from kaflite.cluster.group_configs import GROUP_RESOURCE
from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kaflite.protocol.messages._generated.list_config_resources_response import ConfigResource

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]


async def handle_get(broker: Broker, conn: ServerConnection, header: RequestHeader,
                     req: GetTelemetrySubscriptionsRequest) -> GetTelemetrySubscriptionsResponse:
    return broker.telemetry.get_subscriptions(req.client_instance_id, conn.info)


async def handle_push(broker: Broker, conn: ServerConnection, header: RequestHeader,
                      req: PushTelemetryRequest) -> PushTelemetryResponse:
    return broker.telemetry.push(req, conn.info)


TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
LISTED = (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE)


def config_resources(broker: Broker, resource_type: int) -> list[str]:
    """The names of the resources of one type that ListConfigResources lists."""
    controller = broker.controller
    if resource_type == TOPIC:
        return sorted(controller.topics)
    if resource_type in (BROKER, BROKER_LOGGER):
        return [str(node) for node in sorted(controller.brokers)]
    if resource_type == CLIENT_METRICS_RESOURCE:
        return sorted(controller.client_metrics)
    return sorted(controller.group_configs)


async def handle_list(broker: Broker, conn: ServerConnection, header: RequestHeader,
                      req: ListConfigResourcesRequest
                      ) -> ListConfigResourcesResponse:
    if header.request_api_version == 0:
        types: list[int] = [CLIENT_METRICS_RESOURCE]
    else:
        types = list(dict.fromkeys(req.resource_types)) or list(LISTED)
    if any(t not in LISTED for t in types):
        return ListConfigResourcesResponse(error_code=errors.UnsupportedVersionError.code)
    return ListConfigResourcesResponse(error_code=0, config_resources=[
        ConfigResource(name, t) for t in types for name in config_resources(broker, t)])


HANDLERS = [
    Handler(GetTelemetrySubscriptionsRequest, 0, 0, handle_get),
    Handler(PushTelemetryRequest, 0, 0, handle_push),
    Handler(ListConfigResourcesRequest, 0, 1, handle_list),
]
