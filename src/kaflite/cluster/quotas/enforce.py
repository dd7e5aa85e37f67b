"""What a connection records against its client's quotas after each request.

``after_request`` is called by the connection (``cluster/network.py``) once a
handler has answered; ``fetch_throttle_ms`` by the Fetch handler before it
commits to a response, since a throttled Fetch answers with no data. Follower
replicas and the broker's own requests are exempt, as are ApiVersions and the
SASL exchange (Kafka's exempt APIs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.quotas.manager import CONSUME, PRODUCE, REQUEST, QuotaManager

if TYPE_CHECKING:
    from kaflite.cluster.observe import ConnectionRecord

__all__ = ["after_request", "fetch_throttle_ms", "thread_percent"]

PRODUCE_KEY, FETCH_KEY = 0, 1
# ApiVersions, SaslHandshake, SaslAuthenticate, WriteTxnMarkers (broker to broker).
EXEMPT_APIS = frozenset({18, 17, 36, 27})


def thread_percent(handler_seconds: float) -> float:
    """Handler time as Kafka's request quota counts it: percent of one thread-second."""
    return max(handler_seconds, 0.0) * 100


def after_request(quotas: QuotaManager, info: ConnectionRecord, api_key: int,
                  client_id: str | None, request_bytes: int, handler_seconds: float) -> int:
    """Record a served request; the throttle time it calls for (0: none).

    Produce counts its size against ``producer_byte_rate``; every request that is
    not exempt counts its handler time against ``request_percentage``. A Fetch
    has done both in its handler already."""
    if not quotas.enabled or info.replica_id is not None or api_key == FETCH_KEY \
            or api_key in EXEMPT_APIS:
        return 0
    principal = info.principal
    throttle = 0
    if api_key == PRODUCE_KEY:
        throttle = quotas.record(PRODUCE, principal, client_id, request_bytes, info.quotas)
    return max(throttle, quotas.record(REQUEST, principal, client_id,
                                       thread_percent(handler_seconds), info.quotas))


def fetch_throttle_ms(quotas: QuotaManager, info: ConnectionRecord, client_id: str | None,
                      response_bytes: int, handler_seconds: float) -> int:
    """A consumer's Fetch: record its bytes and handler time, and say whether to
    throttle. When it must, the bytes are taken back (the response will be empty)."""
    if not quotas.enabled or info.replica_id is not None:
        return 0
    principal = info.principal
    request = quotas.record(REQUEST, principal, client_id, thread_percent(handler_seconds),
                            info.quotas)
    bandwidth = quotas.record(CONSUME, principal, client_id, response_bytes, info.quotas)
    throttle = max(request, bandwidth)
    if throttle > 0:
        quotas.unrecord(CONSUME, principal, client_id, response_bytes)
    return throttle
