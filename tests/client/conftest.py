"""Fixtures for client tests: a 3-broker kaflite cluster on its own thread, and Tansu."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from tests._tansu import tansu_broker


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={"replica.lag.time.max.ms": 10000}) as c:
        yield c


@pytest.fixture(scope="module")
def tansu() -> Iterator[str]:
    with tansu_broker() as servers:
        yield servers
