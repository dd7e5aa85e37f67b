"""The per-process client cache of the data source (``_kafka.client_for``).

Spark runs many tasks, and many queries, in one Python worker: each gets the
cached client for its configuration instead of connecting again, and clients
nobody asked for in a while, or beyond the capacity, are closed so that a
long-lived worker does not collect connections.
"""

from __future__ import annotations

import time

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from kaflite.cluster import Cluster
from kaflite.spark import _kafka


def _config(servers: str, name: str) -> dict[str, str]:
    return {"bootstrap.servers": servers, "client.id": name}


def _wait_closed(client: _kafka.SparkKafkaClient) -> None:
    deadline = time.monotonic() + 10
    while not client._closed:
        assert time.monotonic() < deadline, "the evicted client was not closed"
        time.sleep(0.01)


def test_same_config_same_client(kafka: Cluster) -> None:
    servers = kafka.bootstrap_servers
    a = _kafka.client_for(_config(servers, "cache-same"))
    try:
        assert _kafka.client_for(_config(servers, "cache-same")) is a
        assert _kafka.client_for(_config(servers, "cache-other")) is not a
    finally:
        _kafka.close_client(a)
        _kafka.close_client(_kafka.client_for(_config(servers, "cache-other")))


def test_least_recently_used_client_beyond_capacity_is_closed(
        kafka: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    servers = kafka.bootstrap_servers
    # Room for whatever this process cached before, and two more.
    monkeypatch.setattr(_kafka, "CACHE_CAPACITY", len(_kafka._clients) + 2)
    first = _kafka.client_for(_config(servers, "cache-lru-1"))
    second = _kafka.client_for(_config(servers, "cache-lru-2"))
    assert _kafka.client_for(_config(servers, "cache-lru-1")) is first  # now the most recent
    third = _kafka.client_for(_config(servers, "cache-lru-3"))
    try:
        _wait_closed(second)
        assert not first._closed and not third._closed
        deadline = time.monotonic() + 10
        while kafka.connections(client_id="cache-lru-2"):   # the broker sees it go
            assert time.monotonic() < deadline, "the evicted client's connections stayed open"
            time.sleep(0.02)
        assert kafka.connections(client_id="cache-lru-1")
    finally:
        for c in (first, third):
            _kafka.close_client(c)


def test_idle_client_is_closed_after_the_timeout(
        kafka: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    servers = kafka.bootstrap_servers
    idle = _kafka.client_for(_config(servers, "cache-idle"))
    monkeypatch.setattr(_kafka, "CACHE_TIMEOUT_S", 0.05)
    time.sleep(0.1)
    busy = _kafka.client_for(_config(servers, "cache-busy"))
    try:
        _wait_closed(idle)
        assert not busy._closed
        # Asking for the same configuration again makes a new client.
        again = _kafka.client_for(_config(servers, "cache-idle"))
        assert again is not idle and not again._closed
        _kafka.close_client(again)
    finally:
        _kafka.close_client(busy)


def test_touch_keeps_a_client_in_use(kafka: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    servers = kafka.bootstrap_servers
    reading = _kafka.client_for(_config(servers, "cache-reading"))
    monkeypatch.setattr(_kafka, "CACHE_TIMEOUT_S", 0.2)
    try:
        for _ in range(5):                 # a task that fetches now and then
            time.sleep(0.1)
            _kafka.touch(reading)
        other = _kafka.client_for(_config(servers, "cache-reading-other"))
        assert not reading._closed
        _kafka.close_client(other)
    finally:
        _kafka.close_client(reading)


def test_a_reused_spark_worker_freezes_its_heap_once() -> None:
    """Only in a reused Spark worker (PySpark collects after every task there)."""
    import subprocess
    import sys

    code = ("import gc, os; from kaflite.spark._fetch import settle_worker; "
            "print(settle_worker({}), gc.get_freeze_count() > 0, "
            "settle_worker({'SPARK_REUSE_WORKER': '0'}), "
            "settle_worker({'SPARK_REUSE_WORKER': '1'}), gc.get_freeze_count() > 0, "
            "settle_worker({'SPARK_REUSE_WORKER': '1'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["False", "False", "False", "True", "True", "False"]
