"""The driver's ``OffsetReader`` through a short outage of the whole cluster.

Spark's Kafka source asks an admin client for the subscription's partitions
before each micro-batch, and the Java admin client retries a failed metadata
round trip until ``default.api.timeout.ms``; ``fetchOffset.numRetries`` then
retries the whole call. So a query outlives a cluster that restarts in a few
seconds. Found by ``kaflite.verify`` (client ``spark``, seed 11): the query
failed in ``latestOffset`` when every broker was down for 2.4 s, because each of
the three attempts of partition discovery was one metadata round trip.
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from kaflite.client import TopicPartition
from kaflite.cluster import Cluster
from kaflite.spark._kafka import OffsetReader
from kaflite.spark.options import parse_source_options


def test_partitions_and_offsets_outlive_a_cluster_down_for_seconds() -> None:
    with Cluster(brokers=1) as cluster:
        cluster.create_topic("outage", 2, 1)
        opts = parse_source_options({"kafka.bootstrap.servers": cluster.bootstrap_servers,
                                     "subscribe": "outage",
                                     "fetchOffset.retryIntervalMs": "200"}, streaming=True)
        reader = OffsetReader(opts)
        try:
            tps = {TopicPartition("outage", 0), TopicPartition("outage", 1)}
            assert reader.partitions() == tps
            cluster.faults.stop_broker(0)
            # Down for longer than numRetries (3) x retryIntervalMs, far below the
            # default.api.timeout.ms (60 s) that Spark's admin client retries within.
            restart = threading.Timer(3.0, cluster.faults.restart_broker, (0,))
            restart.start()
            try:
                began = time.monotonic()
                assert reader.partitions() == tps
                assert reader.latest(tps) == dict.fromkeys(tps, 0)
                assert time.monotonic() - began >= 2.5
            finally:
                restart.join()
        finally:
            reader.close()
