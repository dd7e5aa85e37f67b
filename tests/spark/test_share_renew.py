"""A share-group task holding records longer than the acquisition lock keeps them: it
renews their locks itself (explicit RENEW acknowledgements every half lock, as a Java
application must; no consumer renews by itself), so no other member of the group gets
them meanwhile, and its final ACCEPT succeeds. Runs the task's reader without Spark."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pyarrow as pa
import pytest

from kaflite.client import sync as ksync
from kaflite.cluster import Cluster
from kaflite.spark.share import parse_share_options, read_share

LOCK_MS = 1500
CONFIG = {"group.share.record.lock.duration.ms": LOCK_MS,
          "group.share.min.record.lock.duration.ms": 1000}
GROUP = TOPIC = "renewing"


@pytest.fixture()
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1, config=CONFIG) as c:
        c.create_topic(TOPIC, 1, 1)
        share = c.brokers[0].share
        assert share is not None
        share.group_configs[GROUP] = {"share.auto.offset.reset": "earliest"}
        yield c


def test_a_task_keeps_its_records_past_the_lock_duration(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    servers = cluster.bootstrap_servers
    with ksync.Producer({"bootstrap.servers": servers}) as producer:
        producer.send(TOPIC, b"job")
        producer.flush()
    # the task stays three lock durations after its record (waiting for more)
    opts = parse_share_options({"kafka.bootstrap.servers": servers, "subscribe": TOPIC,
                                "shareGroup": GROUP, "shareIdleTimeoutMs": str(3 * LOCK_MS)})
    assert opts is not None
    task = read_share(opts, 0)
    first: pa.RecordBatch = next(task)
    assert first.column("value").to_pylist() == [b"job"]
    stolen: list[bytes] = []
    stop = threading.Event()

    def other_member() -> None:
        with ksync.ShareConsumer({"bootstrap.servers": servers, "group.id": GROUP}) as c:
            c.subscribe([TOPIC])
            while not stop.is_set():
                stolen.extend(r.value or b"" for r in c.poll(100))

    thread = threading.Thread(target=other_member)
    thread.start()
    try:
        with caplog.at_level(logging.WARNING, logger="kaflite.spark"):
            assert list(task) == []        # nothing more; the task ends and accepts
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert stolen == []
    assert "acknowledgements failed" not in caplog.text     # the lock was still the task's
    with ksync.ShareConsumer({"bootstrap.servers": servers, "group.id": GROUP}) as c:
        c.subscribe([TOPIC])
        assert [r for _ in range(10) for r in c.poll(100)] == []     # accepted: done
