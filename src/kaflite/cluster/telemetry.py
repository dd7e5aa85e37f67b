"""Client telemetry (KIP-714): what a broker answers GetTelemetrySubscriptions and
PushTelemetry with, and the metrics its clients pushed.

Each broker keeps its own client instances, as Kafka's ``ClientMetricsManager``
does (a client pushes to one broker at a time; a broker that does not know an
instance makes it anew from the request's connection).

* **Instance.** A client's first GetTelemetrySubscriptions carries the zero id and
  gets a new random one. The instance is matched against every subscription
  (``kaflite.cluster.client_metrics``) with the connection's client id, software
  name and version (from ApiVersions) and source address and port; the matched
  subscriptions give the union of their metric prefixes (``*`` alone when one asks
  for every metric), the smallest interval (300000 ms without a match) and a
  subscription id: a CRC-32C of the metrics and interval XOR one of the instance
  id, so it stays the same while neither changes. When the subscriptions change,
  the instance is matched again at its next request, with fresh timestamps.
* **Rate.** A GetTelemetrySubscriptions sooner than the interval after the last
  request is THROTTLING_QUOTA_EXCEEDED, unless the last push failed with
  UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE (the client must ask
  again). A push is accepted right after a GetTelemetrySubscriptions (clients add
  jitter to the first push), then once per interval; the terminating push
  (``terminating``) is accepted whenever, and nothing after it.
* **Push.** The checks, in Kafka's order: a terminated instance (INVALID_REQUEST),
  the rate, the subscription id (UNKNOWN_SUBSCRIPTION_ID), the compression type
  (UNSUPPORTED_COMPRESSION_TYPE), the size against ``telemetry.max.bytes``
  (TELEMETRY_TOO_LARGE). The payload is decompressed (within the same limit) and
  decoded (``kaflite.cluster.otlp``); a payload that does not decode is
  INVALID_RECORD. The latest value of every metric is kept on the instance and
  shown on the connection that pushed it (``ConnectionRecord.telemetry``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kaflite.cluster.client_metrics import (
    ALL_METRICS,
    DEFAULT_INTERVAL_MS,
    Subscription,
    subscription,
)
from kaflite.cluster.observe import ConnectionRecord
from kaflite.cluster.otlp import decode_metrics
from kaflite.protocol import errors
from kaflite.protocol._exceptions import ProtocolError
from kaflite.protocol.messages import (
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)
from kaflite.protocol.primitives import ZERO_UUID
from kaflite.protocol.records import crc32c, decompress

__all__ = ["ACCEPTED_COMPRESSION", "DEFAULT_MAX_BYTES", "ClientInstance", "TelemetryManager"]

# zstd, lz4, gzip, snappy: Kafka's order of preference (a client takes the first it has)
ACCEPTED_COMPRESSION = [4, 3, 1, 2]
KNOWN_COMPRESSION = frozenset({0, 1, 2, 3, 4})
DEFAULT_MAX_BYTES = 1_048_576      # telemetry.max.bytes
MAX_INSTANCES = 16_384             # as Kafka's cache: the least recently used go first
# Asking again is allowed at once after these (the client must re-subscribe).
_REASK = frozenset({errors.UnknownSubscriptionIdError.code,
                    errors.UnsupportedCompressionTypeError.code})


@dataclass
class ClientInstance:
    """One client instance as this broker knows it."""

    instance_id: uuid.UUID
    selectors: dict[str, str]          # the match selectors' values for this client
    subscriptions: tuple[str, ...]     # the names of the subscriptions it matched
    metrics: list[str]
    interval_ms: int
    subscription_id: int
    version: object                    # the subscriptions it was matched against
    last_get_ms: float = float("-inf")     # monotonic milliseconds; never at first
    last_push_ms: float = float("-inf")
    terminating: bool = False
    last_error: int = 0
    pushes: int = 0
    pushed_at: float | None = None     # wall-clock time of the last accepted push
    latest: dict[str, float] = field(default_factory=dict)


def subscription_id(metrics: list[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    """A signed int32 that changes whenever the metrics or the interval do."""
    digest = crc32c(("[" + ", ".join(sorted(metrics)) + "]" + str(interval_ms)).encode())
    mixed = (digest ^ crc32c(instance_id.bytes)) & 0xFFFFFFFF
    return mixed - (1 << 32) if mixed >= 1 << 31 else mixed


def _selectors(instance_id: uuid.UUID, info: ConnectionRecord) -> dict[str, str]:
    address, _, port = info.peer.rpartition(":")
    return {"client_instance_id": str(instance_id), "client_id": info.client_id or "",
            "client_software_name": info.software_name or "",
            "client_software_version": info.software_version or "",
            "client_source_address": address.strip("[]"), "client_source_port": port}


class TelemetryManager:
    """A broker's client instances; subscriptions are read from ``subscriptions()``
    (the controller's CLIENT_METRICS configs) at every request."""

    def __init__(self, subscriptions: Callable[[], Mapping[str, Mapping[str, str]]],
                 max_bytes: int = DEFAULT_MAX_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._stored = subscriptions
        self.max_bytes = max_bytes
        self._clock = clock
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self._parsed: tuple[object, list[Subscription]] = ((), [])

    def _now_ms(self) -> float:
        return self._clock() * 1000

    def _subscriptions(self) -> tuple[object, list[Subscription]]:
        stored = self._stored()
        version = tuple(sorted((name, tuple(sorted(c.items()))) for name, c in stored.items()))
        if version != self._parsed[0]:
            self._parsed = (version, [subscription(n, dict(c)) for n, c in stored.items()])
        return self._parsed

    def _match(self, instance_id: uuid.UUID, selectors: dict[str, str]) -> ClientInstance:
        version, subs = self._subscriptions()
        matched = [s for s in subs if s.matches(selectors)]
        interval = min([DEFAULT_INTERVAL_MS, *(s.interval_ms for s in matched)])
        metrics: list[str] = sorted({m for s in matched for m in s.metrics})
        if ALL_METRICS in metrics:
            metrics = [ALL_METRICS]
        return ClientInstance(instance_id, selectors, tuple(sorted(s.name for s in matched)),
                              metrics, interval, subscription_id(metrics, interval, instance_id),
                              version)

    def instance(self, instance_id: uuid.UUID, info: ConnectionRecord) -> ClientInstance:
        """The instance, made (or matched again, when the subscriptions changed)."""
        found = self.instances.get(instance_id)
        if found is None:
            found = self._match(instance_id, _selectors(instance_id, info))
        elif found.version != self._subscriptions()[0]:
            again = self._match(instance_id, found.selectors)
            again.pushes, again.pushed_at, again.latest = (found.pushes, found.pushed_at,
                                                           found.latest)
            found = again
        self.instances[instance_id] = found
        self.instances.move_to_end(instance_id)
        while len(self.instances) > MAX_INSTANCES:
            self.instances.popitem(last=False)
        info.client_instance_id = str(instance_id)
        return found

    def _new_id(self) -> uuid.UUID:
        while True:
            found = uuid.UUID(bytes=os.urandom(16))
            if found != ZERO_UUID and found not in self.instances:
                return found

    # -- the two requests ----------------------------------------------------------------
    def get_subscriptions(self, instance_id: uuid.UUID, info: ConnectionRecord
                          ) -> GetTelemetrySubscriptionsResponse:
        if instance_id == ZERO_UUID:
            instance_id = self._new_id()
        inst = self.instance(instance_id, info)
        now = self._now_ms()
        if now - max(inst.last_get_ms, inst.last_push_ms) < inst.interval_ms \
                and inst.last_error not in _REASK:
            return GetTelemetrySubscriptionsResponse(
                error_code=errors.ThrottlingQuotaExceededError.code)
        inst.last_get_ms = now
        inst.last_error = 0
        return GetTelemetrySubscriptionsResponse(
            error_code=0, client_instance_id=instance_id, subscription_id=inst.subscription_id,
            accepted_compression_types=list(ACCEPTED_COMPRESSION),
            push_interval_ms=inst.interval_ms, telemetry_max_bytes=self.max_bytes,
            delta_temporality=True, requested_metrics=list(inst.metrics))

    def push(self, req: PushTelemetryRequest, info: ConnectionRecord) -> PushTelemetryResponse:
        if req.client_instance_id == ZERO_UUID:
            return PushTelemetryResponse(error_code=errors.InvalidRequestError.code)
        inst = self.instance(req.client_instance_id, info)
        try:
            self._check_push(inst, req)
        except errors.KafkaError as exc:
            inst.last_error = exc.code
            return PushTelemetryResponse(error_code=exc.code)
        finally:
            inst.terminating = req.terminating
        payload = bytes(req.metrics)
        if payload:
            try:
                values = decode_metrics(bytes(decompress(req.compression_type, payload,
                                                         limit=self.max_bytes)))
            except (ProtocolError, ValueError) as exc:
                # larger than telemetry.max.bytes once decompressed: the client may push
                # less; anything else that does not decode: it should stop pushing
                inst.last_error = (errors.TelemetryTooLargeError.code
                                   if "exceeds the limit" in str(exc)
                                   else errors.InvalidRecordError.code)
                return PushTelemetryResponse(error_code=inst.last_error)
            inst.latest.update(values)
        inst.pushes += 1
        inst.pushed_at = time.time()
        inst.last_error = 0
        info.telemetry = inst.latest
        info.telemetry_pushes = inst.pushes
        info.telemetry_at = inst.pushed_at
        return PushTelemetryResponse(error_code=0)

    def _check_push(self, inst: ClientInstance, req: PushTelemetryRequest) -> None:
        if inst.terminating:
            raise errors.InvalidRequestError("the client already sent its terminating push")
        now = self._now_ms()
        if inst.last_get_ms > inst.last_push_ms or now - inst.last_push_ms >= inst.interval_ms:
            inst.last_push_ms = now
        elif not req.terminating:
            raise errors.ThrottlingQuotaExceededError("pushed before the interval passed")
        if req.subscription_id != inst.subscription_id:
            raise errors.UnknownSubscriptionIdError("the subscription changed")
        if req.compression_type not in KNOWN_COMPRESSION:
            raise errors.UnsupportedCompressionTypeError(str(req.compression_type))
        if len(req.metrics) > self.max_bytes:
            raise errors.TelemetryTooLargeError(f"more than {self.max_bytes} bytes")
