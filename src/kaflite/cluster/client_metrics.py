"""Client metrics subscriptions (KIP-714): ConfigResource type CLIENT_METRICS (16).

A subscription is a config resource named after it, with three configs:

* ``metrics``: metric name prefixes the matching clients are asked to push
  (``*`` asks for every metric; none asks for nothing);
* ``interval.ms``: how often they push (default 300000, from 100 to 3600000);
* ``match``: ``selector=regex`` terms, all of which a client must match (a full
  match of the regex); none matches every client. The selectors are the client's
  instance id, client id, software name and version, source address and port.

Subscriptions are set with IncrementalAlterConfigs (``kaflite client-metrics``,
``kafka-client-metrics``), stored on the controller as ConfigRecords as group
configs are, replayed by every broker, and read by its telemetry manager
(``kaflite.cluster.telemetry``). The checks and their error codes are Kafka's
(``ClientMetricsConfigs.validate``): an unknown config or an interval out of range
is INVALID_REQUEST, a bad match term INVALID_CONFIG.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kaflite.protocol import errors

__all__ = [
    "ALL_METRICS",
    "CLIENT_METRICS_CONFIG_TYPES",
    "CLIENT_METRICS_RESOURCE",
    "DEFAULT_INTERVAL_MS",
    "MATCH_SELECTORS",
    "Subscription",
    "parse_match",
    "subscription",
    "validate_client_metrics",
]

CLIENT_METRICS_RESOURCE = 16   # ConfigResource.Type.CLIENT_METRICS
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
CLIENT_METRICS_CONFIG_TYPES = {"metrics": "LIST", "interval.ms": "INT", "match": "LIST"}
MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name",
                   "client_software_version", "client_source_address", "client_source_port")


def _items(value: str | None) -> list[str]:
    """A LIST config's items (comma-separated, trimmed, empty ones dropped)."""
    return [x.strip() for x in (value or "").split(",") if x.strip()]


def parse_match(terms: list[str]) -> dict[str, re.Pattern[str]]:
    """``selector=regex`` terms as compiled patterns; INVALID_CONFIG for a bad term."""
    out: dict[str, re.Pattern[str]] = {}
    for term in terms:
        parts = term.split("=")
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            raise errors.InvalidConfigError(f"Illegal client matching pattern: {term}")
        try:
            out[parts[0].strip()] = re.compile(parts[1].strip())
        except re.error:
            raise errors.InvalidConfigError(f"Illegal client matching pattern: {term}") from None
    return out


def validate_client_metrics(name: str, configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check a subscription's complete set of configs; return the non-null ones."""
    if not name:
        raise errors.InvalidRequestError("Subscription name can't be empty")
    out = {k: v for k, v in configs.items() if v is not None}
    for key in out:
        if key not in CLIENT_METRICS_CONFIG_TYPES:
            raise errors.InvalidRequestError(f"Unknown client metrics configuration: {key}")
    if "interval.ms" in out:
        raw = out["interval.ms"].strip()
        try:
            interval = int(raw)
        except ValueError:
            raise errors.InvalidConfigError(
                f"Invalid value {raw} for configuration interval.ms: "
                "Not a number of type INT") from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise errors.InvalidRequestError(
                f"Invalid value {interval} for interval.ms, interval must be between 100 "
                "and 3600000 (1 hour)")
    if "match" in out:
        parse_match(_items(out["match"]))
    return out


@dataclass(frozen=True)
class Subscription:
    """One subscription, parsed."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: Mapping[str, str]) -> bool:
        """Whether a client (selector -> its value) matches every term."""
        for selector, pattern in self.match:
            value = client.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def subscription(name: str, configs: Mapping[str, str]) -> Subscription:
    """The subscription stored as ``configs`` (already validated)."""
    interval = configs.get("interval.ms", "").strip()
    return Subscription(name, tuple(_items(configs.get("metrics"))),
                        int(interval) if interval else DEFAULT_INTERVAL_MS,
                        tuple(sorted(parse_match(_items(configs.get("match"))).items())))
