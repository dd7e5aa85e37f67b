"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72) and
ListClientMetricsResources (74), served from the broker's ``TelemetryManager``
(``kaflite.cluster.telemetry``) and the controller's CLIENT_METRICS subscriptions.

Kafka 4.4 serves GetTelemetrySubscriptions v0 and PushTelemetry v0. Key 74 is
ListConfigResources there (v0-1; v1 lists other resource types too): kaflite serves
v0, the client metrics subscriptions, which is what an admin asking only for them uses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    ListClientMetricsResourcesRequest,
    ListClientMetricsResourcesResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kaflite.protocol.messages._generated.list_client_metrics_resources_response import (
    ClientMetricsResource,
)

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


async def handle_list(broker: Broker, conn: ServerConnection, header: RequestHeader,
                      req: ListClientMetricsResourcesRequest
                      ) -> ListClientMetricsResourcesResponse:
    return ListClientMetricsResourcesResponse(error_code=0, client_metrics_resources=[
        ClientMetricsResource(name) for name in sorted(broker.controller.client_metrics)])


HANDLERS = [
    Handler(GetTelemetrySubscriptionsRequest, 0, 0, handle_get),
    Handler(PushTelemetryRequest, 0, 0, handle_push),
    Handler(ListClientMetricsResourcesRequest, 0, 0, handle_list),
]
