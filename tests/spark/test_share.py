"""Reading a topic as a share group through Spark (option shareGroup).

Two tasks, each a share consumer of the group, read a 2-partition topic: the
read returns every record, and the records, accepted when the tasks finished,
are not delivered to the next read of the group.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import asyncio
from typing import Any

from kaflite.cluster import Cluster
from kaflite.spark.options import KafkaOptionError
from kaflite.spark.share import parse_share_options
from tests.client.share.conftest import start_group
from tests.spark.conftest import produce, source, unique


def test_share_group_read_gets_everything_once(spark: Any, kafka: Cluster,
                                               servers: str) -> None:
    topic, group = unique("share"), unique("spark-share")
    kafka.create_topic(topic, 2, 1)
    asyncio.run(start_group(servers, topic, group))
    produce(servers, topic, [{"value": f"v{i}".encode(), "partition": i % 2}
                             for i in range(200)])

    def read() -> list[str]:
        df = source(spark, servers, subscribe=topic, shareGroup=group, shareConsumers="2",
                    shareIdleTimeoutMs="1500")
        return [r[0] for r in df.selectExpr("CAST(value AS STRING)").collect()]

    first = read()
    assert sorted(first) == sorted(f"v{i}" for i in range(200))
    assert read() == []   # accepted by the first read's tasks


def test_share_group_options_are_checked() -> None:
    assert parse_share_options({"subscribe": "t"}) is None
    opts = parse_share_options({"subscribe": "a,b", "shareGroup": "g",
                                "kafka.bootstrap.servers": "h:1",
                                "kafka.auto.offset.reset": "earliest"})
    assert opts is not None and opts.topics == ("a", "b")
    assert dict(opts.config)["group.id"] == "g"
    assert "auto.offset.reset" not in dict(opts.config)   # not a share consumer's
    with pytest.raises(KafkaOptionError, match="endingOffsets"):
        parse_share_options({"subscribe": "t", "shareGroup": "g", "endingOffsets": "latest"})
    with pytest.raises(KafkaOptionError, match="subscribe"):
        parse_share_options({"subscribePattern": "t.*", "shareGroup": "g"})
