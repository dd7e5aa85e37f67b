"""Shared fixtures: a 3-broker embedded cluster running in a background thread."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster


@pytest.fixture(scope="module")
def cluster3() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as cluster:
        yield cluster
