"""Series for the console's charts: throughput, request rates, errors and group lag.

``MetricsSampler`` reads the counters the brokers already keep
(``BrokerMetrics``: bytes and messages in per topic, bytes out per topic, requests
per API) and the registry's per-connection error counts, once per interval, and
keeps per-second rates over the last interval in a bounded ring. It only reads
counters: no request goes to a broker, so its cost is a few dictionary walks a
second. In a multi-process cluster (``--processes``) the counters live in the
broker processes: ``refresh()`` asks each for its ``/metrics`` families (the
controller's ``call_all("metrics")``, as ``GET /metrics`` does) and reads the
same counters from them; the errors come from the registry, which the monitor
refreshes from the broker processes. ``LagSampler`` asks the group coordinators for committed offsets and
the leaders for end offsets every few seconds, for at most ``max_groups``
groups, through the console's admin client.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, TypeAlias

from kaflite.cluster.metrics import REQUEST_NAMES
from kaflite.cluster.observe import api_name

if TYPE_CHECKING:
    from kaflite.cluster.cluster import Cluster
    from kaflite.console.backend import ClientBackend

__all__ = ["LagSampler", "MetricsSampler"]

Sample: TypeAlias = dict[str, object]
Counters: TypeAlias = dict[str, dict[str, dict[str, float]]]


def _rates(now: Counters, before: Counters, dt: float) -> Counters:
    out: Counters = {}
    for group, rows in now.items():
        prev_rows = before.get(group, {})
        out[group] = {}
        for name, values in rows.items():
            prev = prev_rows.get(name, {})
            out[group][name] = {k: round(max(v - prev.get(k, 0.0), 0.0) / dt, 3)
                                for k, v in values.items()}
    return out


TOPIC_FAMILIES = {"kafka_server_brokertopicmetrics_bytesin": "bytes_in",
                  "kafka_server_brokertopicmetrics_bytesout": "bytes_out",
                  "kafka_server_brokertopicmetrics_messagesin": "messages_in"}
REQUESTS_FAMILY = "kafka_network_requestmetrics_requests"


def _topic_row() -> dict[str, float]:
    return {"bytes_in": 0.0, "bytes_out": 0.0, "messages_in": 0.0}


def _api_row() -> dict[str, float]:
    return {"requests": 0.0, "errors": 0.0}


def counters_from_texts(texts: dict[int, str]) -> Counters:
    """The sampler's counters from broker processes' Prometheus texts (node -> text).
    ``Fetch`` is left out: the text has it besides FetchConsumer and FetchFollower."""
    from prometheus_client.parser import text_string_to_metric_families

    topics: dict[str, dict[str, float]] = {}
    brokers: dict[str, dict[str, float]] = {}
    apis: dict[str, dict[str, float]] = {}
    for node, text in sorted(texts.items()):
        b = brokers.setdefault(str(node), {"bytes_in": 0.0, "bytes_out": 0.0,
                                           "requests": 0.0})
        for family in text_string_to_metric_families(text):
            key = TOPIC_FAMILIES.get(family.name)
            if key is None and family.name != REQUESTS_FAMILY:
                continue
            for sample in family.samples:
                if not sample.name.endswith("_total"):
                    continue
                if key is not None:
                    topics.setdefault(sample.labels["topic"], _topic_row())[key] += sample.value
                    if key != "messages_in":
                        b[key] += sample.value
                elif sample.labels["request"] != "Fetch":
                    b["requests"] += sample.value
                    apis.setdefault(sample.labels["request"], _api_row())["requests"] += (
                        sample.value)
    return {"topics": topics, "brokers": brokers, "apis": apis}


class MetricsSampler:
    def __init__(self, cluster: Cluster, interval_s: float = 1.0, keep: int = 600) -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self.samples: deque[Sample] = deque(maxlen=keep)
        self._last: tuple[float, Counters] | None = None
        self._remote: dict[int, str] = {}

    async def refresh(self) -> None:
        """A multi-process cluster: every broker process's metrics text, for the next
        ``sample()`` (nothing to do with brokers in this process)."""
        server = self.cluster.controller_server
        if self.cluster.use_processes and server is not None:
            fresh = {n: str(t) for n, t in (await server.call_all("metrics")).items()}
            # a broker that did not answer this time keeps its last counters (else its
            # rates would read 0 now and everything since its start at the next answer)
            self._remote = {n: fresh.get(n, self._remote.get(n, ""))
                            for n in set(fresh) | (set(self._remote) & set(server.channels))}

    def counters(self) -> Counters:
        if self.cluster.use_processes:
            out = counters_from_texts(self._remote)
            self._add_errors(out["apis"])
            return out
        topics: dict[str, dict[str, float]] = {}
        brokers: dict[str, dict[str, float]] = {}
        apis: dict[str, dict[str, float]] = {}
        for broker in list(self.cluster.brokers.values()):
            m = broker.metrics
            b = brokers.setdefault(str(broker.node_id), {"bytes_in": 0.0, "bytes_out": 0.0,
                                                         "requests": 0.0})
            for name, t in list(m.topics.items()):
                row = topics.setdefault(name, {"bytes_in": 0.0, "bytes_out": 0.0,
                                               "messages_in": 0.0})
                row["bytes_in"] += t.bytes_in
                row["bytes_out"] += t.bytes_out
                row["messages_in"] += t.messages_in
                b["bytes_in"] += t.bytes_in
                b["bytes_out"] += t.bytes_out
            for key, stats in list(m.requests.items()):
                n = sum(stats.versions.values())
                b["requests"] += n
                name = REQUEST_NAMES.get(key) or api_name(key)
                api = apis.setdefault(name, {"requests": 0.0, "errors": 0.0})
                api["requests"] += n
        self._add_errors(apis)
        return {"topics": topics, "brokers": brokers, "apis": apis}

    def _add_errors(self, apis: dict[str, dict[str, float]]) -> None:
        for info in self.cluster.registry.infos(include_replicas=True):
            for key, s in list(info.apis.items()):
                if s.errors:
                    api = apis.setdefault(api_name(key), _api_row())
                    api["errors"] += sum(s.errors.values())

    def sample(self) -> Sample | None:
        """Take a sample now; None the first time (rates need two readings)."""
        now, counters = time.time(), self.counters()
        last, self._last = self._last, (now, counters)
        if last is None:
            return None
        dt = max(now - last[0], 1e-3)
        sample: Sample = {"t": round(now, 3), **_rates(counters, last[1], dt)}
        self.samples.append(sample)
        return sample

    def since(self, t: float | None) -> list[Sample]:
        return [s for s in self.samples if t is None or float(str(s["t"])) > t]


class LagSampler:
    def __init__(self, backend: ClientBackend, interval_s: float = 5.0, keep: int = 360,
                 max_groups: int = 50) -> None:
        self.backend = backend
        self.interval_s = interval_s
        self.keep = keep
        self.max_groups = max_groups
        self.history: dict[str, deque[tuple[float, int]]] = {}

    async def sample(self) -> None:
        from kaflite.console.groups import group_lag

        admin = await self.backend.admin()
        listed = await admin.list_group_listings()
        now = time.time()
        for g in listed[:self.max_groups]:
            lag, _ = await group_lag(self.backend, g.group_id)
            if lag is None:
                continue
            ring = self.history.setdefault(g.group_id, deque(maxlen=self.keep))
            ring.append((round(now, 3), lag))
        for gone in set(self.history) - {g.group_id for g in listed}:
            del self.history[gone]

    def points(self, group: str) -> list[dict[str, float | int]]:
        return [{"t": t, "lag": lag} for t, lag in self.history.get(group, ())]
