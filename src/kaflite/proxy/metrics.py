"""The proxy's Prometheus metrics (``/metrics``, through ``prometheus-client``).

Each proxy has its own ``CollectorRegistry``, so several proxies in one process
(tests) never share counters:

* ``kaflite_proxy_connections{role}``: open client connections by inferred role
  (a gauge computed from the connection registry at scrape time);
* ``kaflite_proxy_requests_total{api}`` and ``kaflite_proxy_errors_total{api,error}``;
* ``kaflite_proxy_bytes_total{direction}``: bytes of requests (``in``, from
  clients) and of answers (``out``, to clients).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kaflite.cluster.observe import api_name, error_name
from kaflite.proxy.registry import ProxyRegistry

__all__ = ["ProxyMetrics"]


class _Roles(Collector):
    def __init__(self, registry: ProxyRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("kaflite_proxy_connections",
                                   "Open client connections by role", labels=["role"])
        counts: dict[str, int] = {}
        for record in self.registry.records():
            for role in record.roles:
                counts[role] = counts.get(role, 0) + 1
        for role, n in sorted(counts.items()):
            family.add_metric([role], n)
        yield family


class ProxyMetrics:
    def __init__(self, registry: ProxyRegistry) -> None:
        self.prometheus = CollectorRegistry()
        self.requests = Counter("kaflite_proxy_requests", "Requests from clients by API",
                                ["api"], registry=self.prometheus)
        self.errors = Counter("kaflite_proxy_errors", "Error codes in answers by API",
                              ["api", "error"], registry=self.prometheus)
        self.bytes = Counter("kaflite_proxy_bytes", "Bytes through the proxy",
                             ["direction"], registry=self.prometheus)
        self.prometheus.register(_Roles(registry))
        self._in = self.bytes.labels("in")
        self._out = self.bytes.labels("out")
        self._by_api: dict[int, Counter] = {}

    def request(self, api_key: int, nbytes: int) -> None:
        counter = self._by_api.get(api_key)
        if counter is None:
            counter = self._by_api[api_key] = self.requests.labels(api_name(api_key))
        counter.inc()
        self._in.inc(nbytes)

    def response(self, nbytes: int) -> None:
        self._out.inc(nbytes)

    def error(self, api_key: int, code: int, n: int) -> None:
        self.errors.labels(api_name(api_key), error_name(code)).inc(n)

    def render(self) -> bytes:
        return generate_latest(self.prometheus)
