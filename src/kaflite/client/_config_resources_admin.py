"""The admin's listing of config resources: ListConfigResources, key 74 (KIP-1142; its
v0 was ListClientMetricsResources, KIP-714, which lists client metrics subscriptions)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kaflite.client._base import BaseClient
from kaflite.protocol import errors
from kaflite.protocol.messages import ListConfigResourcesRequest
from kaflite.protocol.messages._runtime import FieldVersionError

__all__ = ["ConfigResource", "ConfigResourcesAdmin"]

CLIENT_METRICS = 16


@dataclass(frozen=True, order=True)
class ConfigResource:
    type: int   # 2 topic, 4 broker, 8 broker logger, 16 client metrics, 32 group
    name: str


class ConfigResourcesAdmin(BaseClient):
    """Mixed into ``Admin``. A subscription's configs are a CLIENT_METRICS (16) config
    resource: ``describe_configs`` and ``alter_configs`` read and change them."""

    async def list_config_resources(self, resource_types: Iterable[int] = ()
                                    ) -> list[ConfigResource]:
        """The resources that can hold configs, of these types (2 topic, 4 broker, 8
        broker logger, 16 client metrics, 32 group; none: all of them), sorted. A
        broker older than Kafka 4.1 lists client metrics subscriptions only, and any
        other type is UnsupportedVersionError there, as Java's admin has it."""
        await self.start()
        types = sorted(set(resource_types))
        try:
            resp = await self._request_any(ListConfigResourcesRequest(resource_types=types))
        except FieldVersionError:
            if types != [CLIENT_METRICS]:
                raise
            resp = await self._request_any(ListConfigResourcesRequest())
        if resp.error_code:
            raise errors.error_for_code(resp.error_code, "list config resources")
        return sorted(ConfigResource(r.resource_type, r.resource_name)
                      for r in resp.config_resources)

    async def list_client_metrics_resources(self) -> list[str]:
        """The names of the cluster's client metrics subscriptions, sorted."""
        return [r.name for r in await self.list_config_resources([CLIENT_METRICS])]
