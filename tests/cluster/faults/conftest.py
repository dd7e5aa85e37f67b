"""A 3-broker cluster for the fault tests, and helpers to read the registry."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster


@pytest.fixture(scope="package")
def chaos_cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000,
                                    "offsets.topic.replication.factor": 3,
                                    "group.initial.rebalance.delay.ms": 0}) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def no_rules_left(chaos_cluster: Cluster) -> Iterator[None]:
    yield
    chaos_cluster.faults.clear()


def requests(cluster: Cluster, client_id: str, api: str) -> int:
    """How many ``api`` requests the client has sent (closed connections included)."""
    return sum(c.apis[api].count for c in cluster.connections(client_id=client_id,
                                                              include_closed=True)
               if api in c.apis)


def errors(cluster: Cluster, client_id: str, api: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in cluster.connections(client_id=client_id, include_closed=True):
        if api in c.apis:
            for name, n in c.apis[api].errors.items():
                out[name] = out.get(name, 0) + n
    return out
