"""The proxy's request log: the same records as the brokers', for the traffic it carries.

With ``Proxy(..., request_log=True)`` (``kaflite proxy --request-log``) every
request a client sends through the proxy becomes a ``RequestRecord``
(``kaflite.cluster.request_log``) with ``source="proxy"`` and ``broker`` the
upstream node the connection goes to (-1: a bootstrap connection), built from the
proxy's registry row as the brokers build theirs. They go to ``__kaflite_requests``
on the cluster the proxy fronts (or on the cluster ``request_log`` names, as
bootstrap servers), by a ``TopicPublisher`` (``kaflite.client.publisher``): a
bounded buffer that drops and counts, written in batches off the proxy's path.

So a real Kafka deployment, which has no request log of its own, can be observed
through the proxy, and ``kaflite requests -b <that cluster>`` reads it.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaflite.client.publisher import TopicPublisher
from kaflite.cluster.observe import ConnectionRecord
from kaflite.cluster.request_log import (
    NO_MARK,
    REQUEST_LOG_TOPIC,
    GroupMark,
    Touched,
    pending,
    skipped,
)

__all__ = ["ProxyRequestLog"]


class ProxyRequestLog:
    """Builds the records of the proxy's exchanges and hands them to a publisher."""

    def __init__(self, bootstrap: str, config: Mapping[str, object] | None = None, *,
                 topic: str = REQUEST_LOG_TOPIC, capacity: int = 10_000,
                 flush_s: float = 0.5) -> None:
        self.publisher = TopicPublisher({"bootstrap.servers": bootstrap, **(config or {})},
                                        topic, capacity=capacity, flush_s=flush_s,
                                        client_id="kaflite-proxy-request-log")

    def record(self, info: ConnectionRecord, api_key: int, version: int, latency_ms: float,
               throttle_ms: int, touched: Touched, mark: GroupMark = NO_MARK) -> None:
        if skipped(info, api_key, touched):
            return
        self.publisher.add(pending(info, api_key, version, latency_ms, throttle_ms, touched,
                                   source="proxy", mark=mark))

    async def start(self) -> None:
        await self.publisher.start()

    async def close(self) -> None:
        await self.publisher.close()
