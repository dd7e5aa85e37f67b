"""A Spark read and write through ``kaflite.proxy`` (one JVM test, in the Spark group).

The sink writes 300 records through the proxy, the batch source reads them back
through it, and the proxy saw the executors' connections to the partition
leaders, every one through its own port.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from typing import Any

from kaflite.cluster import Cluster
from kaflite.proxy import Proxy
from tests.spark.conftest import source, unique


def test_spark_write_and_read_through_the_proxy(spark: Any, kafka: Cluster) -> None:
    topic = unique("proxied")
    kafka.create_topic(topic, 4, 1)
    with Proxy(kafka.bootstrap_servers) as proxy:
        rows = [(f"k{i}", f"v{i}") for i in range(300)]
        df = spark.createDataFrame(rows, "key string, value string")
        (df.write.format("kaflite").option("kafka.bootstrap.servers", proxy.bootstrap_servers)
         .option("topic", topic).mode("append").save())
        back = (source(spark, proxy.bootstrap_servers, subscribe=topic,
                       startingOffsets="earliest", endingOffsets="latest")
                .selectExpr("CAST(key AS STRING) k", "CAST(value AS STRING) v").collect())
        assert sorted((r.k, r.v) for r in back) == sorted(rows)
        seen = proxy.connections(include_closed=True)
        used = {c.broker for c in seen if "partition-leader" in c.roles}
        leaders = {kafka.controller.topics[topic].partitions[p].leader for p in range(4)}
        assert used == leaders
        apis = {a for c in seen for a in c.apis}
        assert {"Produce", "Fetch"} <= apis
