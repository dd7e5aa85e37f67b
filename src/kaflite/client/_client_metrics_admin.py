"""The admin's listing of client metrics subscriptions (KIP-714): ListClientMetricsResources,
key 74 (Kafka 4.1 renamed it ListConfigResources; its v0 is this request)."""

from __future__ import annotations

from kaflite.client._base import BaseClient
from kaflite.protocol import errors
from kaflite.protocol.messages import ListClientMetricsResourcesRequest

__all__ = ["ClientMetricsAdmin"]


class ClientMetricsAdmin(BaseClient):
    """Mixed into ``Admin``. A subscription's configs are a CLIENT_METRICS (16) config
    resource: ``describe_configs`` and ``alter_configs`` read and change them."""

    async def list_client_metrics_resources(self) -> list[str]:
        """The names of the cluster's client metrics subscriptions, sorted."""
        await self.start()
        resp = await self._request_any(ListClientMetricsResourcesRequest())
        if resp.error_code:
            raise errors.error_for_code(resp.error_code, "list client metrics resources")
        return sorted(r.name for r in resp.client_metrics_resources)
