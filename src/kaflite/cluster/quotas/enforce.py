"""What a connection records against its client's quotas after each request.

``after_request`` is called by the connection (``cluster/network.py``) once a
handler has answered; ``fetch_throttle_ms`` by the Fetch handler before it
commits to a response, since a throttled Fetch answers with no data;
``MutationQuota`` by CreateTopics, CreatePartitions and DeleteTopics for the
partitions they create or delete (KIP-599). Follower
replicas and the broker's own requests are exempt, as are ApiVersions and the
SASL exchange (Kafka's exempt APIs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.cluster.quotas.manager import CONSUME, PRODUCE, REQUEST, QuotaManager
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.observe import ConnectionRecord

__all__ = ["MutationQuota", "after_request", "fetch_throttle_ms", "thread_percent"]

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


class MutationQuota:
    """One request's controller mutation quota (KIP-599), as Kafka's
    ``StrictControllerMutationQuota`` and ``PermissiveControllerMutationQuota``.

    Each topic's partition count is recorded in the client's token bucket. A
    strict quota (the request versions whose clients know the error) first
    checks the bucket: already below zero, the topic is refused with
    THROTTLING_QUOTA_EXCEEDED and nothing is recorded; else the partitions are
    taken, even if that leaves the bucket below zero. A permissive quota takes
    them and only reports the throttle time. Either way ``throttle_time_ms`` is
    the time the bucket needs to be back at zero, for the response."""

    def __init__(self, quotas: QuotaManager, principal: str, client_id: str | None,
                 strict: bool) -> None:
        self.quotas, self.principal, self.client_id = quotas, principal, client_id
        self.strict = strict
        self.throttle_time_ms = 0

    def record(self, partitions: int) -> None:
        if not self.quotas.enabled:
            return
        if self.strict:
            throttle = self.quotas.mutation_throttle_ms(self.principal, self.client_id)
            if throttle > 0:
                self.throttle_time_ms = throttle
                raise errors.ThrottlingQuotaExceededError(
                    "The throttling quota has been exceeded.")
        self.quotas.record_mutations(self.principal, self.client_id, partitions)
        throttle = self.quotas.mutation_throttle_ms(self.principal, self.client_id)
        if throttle > 0:
            self.throttle_time_ms = throttle
