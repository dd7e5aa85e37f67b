"""ApiVersions (key 18): the versions this broker serves, built from the handlers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kaflite.protocol.messages._generated.api_versions_response import ApiVersion

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection


async def handle(broker: Broker, conn: ServerConnection, header: RequestHeader,
                 req: ApiVersionsRequest) -> ApiVersionsResponse:
    if req.client_software_name:
        conn.info.software_name = req.client_software_name
        conn.info.software_version = req.client_software_version
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(broker.api_versions().items())],
        throttle_time_ms=0,
    )


HANDLERS = [Handler(ApiVersionsRequest, 0, 4, handle)]
