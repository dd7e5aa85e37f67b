"""Shared fixtures and checks for the proxy's tests.

``AddressWatch`` is a filter that sees every answer that names brokers
(Metadata, FindCoordinator, DescribeCluster, and Produce and Fetch with their
KIP-951 endpoints) as it leaves for the client, after the proxy's rewriting,
and remembers every port in them: a test then checks that no upstream port is
among them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from kaflite.proxy import Exchange, Filter, Proxy

ADDRESS_APIS = frozenset({0, 1, 3, 10, 60})


class AddressWatch(Filter):
    name = "address-watch"

    def __init__(self) -> None:
        self.ports: set[int] = set()
        self.answers = 0
        self.endpoint_answers = 0    # Produce/Fetch answers with KIP-951 node endpoints

    def wants(self, api_key: int, version: int) -> bool:
        return api_key in ADDRESS_APIS

    def on_response(self, exchange: Exchange) -> None:
        body = exchange.response
        if body is None or exchange.api_key not in ADDRESS_APIS:
            return
        self.answers += 1
        if getattr(body, "node_endpoints", None):
            self.endpoint_answers += 1
        for name in ("brokers", "coordinators", "node_endpoints"):
            for b in getattr(body, name, None) or []:
                if b.host:
                    self.ports.add(b.port)
        if getattr(body, "host", ""):
            self.ports.add(body.port)


def upstream_ports(cluster: Cluster) -> set[int]:
    return {cluster.broker(n).port for n in cluster.brokers}


def assert_no_upstream_address(watch: AddressWatch, cluster: Cluster, proxy: Proxy) -> None:
    assert watch.answers > 0
    assert watch.ports, "no broker address was seen at all"
    assert not watch.ports & upstream_ports(cluster)
    assert watch.ports <= set(proxy.node_ports.values()) | {proxy.port}


@pytest.fixture(scope="module")
def cluster3() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def watch() -> AddressWatch:
    return AddressWatch()


@pytest.fixture(scope="module")
def proxy(cluster3: Cluster, watch: AddressWatch) -> Iterator[Proxy]:
    with Proxy(cluster3.bootstrap_servers, filters=[watch], http_port=0) as p:
        yield p
