"""Asynchronous commits land in the order they were asked for, as Java's commitAsync
promises ("sent in the same order as the invocations; callbacks invoked in the same
order"). Each async commit retries a retriable error, so without that order a commit
whose first attempt failed could land after a later, higher one and move the group's
committed offset back (found while adding async commits to ``kaflite.verify``'s churn).
"""

from __future__ import annotations

import threading

from kaflite.client import TopicPartition
from kaflite.client.sync import Consumer
from kaflite.cluster import Cluster
from tests.client._recovery_helpers import uid
from tests.conftest import wait_for


def test_a_retried_async_commit_does_not_land_after_a_later_one(cluster: Cluster) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    tp = TopicPartition(topic, 0)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                  "enable.auto.commit": False, "retry.backoff.ms": 300}).start()
    done: list[tuple[int, BaseException | None]] = []
    finished = threading.Event()

    def callback(offsets: object, error: BaseException | None) -> None:
        assert isinstance(offsets, dict)
        done.append((offsets[tp], error))
        if len(done) == 2:
            finished.set()

    rule = cluster.faults.inject_error("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", 1,
                                       group=group)
    try:
        c.assign([tp])
        c.commit_async({tp: 100}, callback)    # its first attempt fails, and is retried
        c.commit_async({tp: 150}, callback)
        assert finished.wait(30), done
        wait_for(lambda: c.committed(tp) is not None, "a committed offset", 10)
        assert done == [(100, None), (150, None)]
        assert c.committed(tp) == 150
    finally:
        cluster.faults.remove(rule.id)
        c.close()


def test_a_sync_commit_lands_after_the_async_ones_before_it(cluster: Cluster) -> None:
    """The soak's case (KIP-848 member, seed 366105409): an async commit of 4015 was
    retried and landed after a later synchronous commit of 5515, and the member that took
    the partition over read again from 4015. A commit waits for the async ones before it,
    as Java's commitSync does."""
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    tp = TopicPartition(topic, 0)
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                  "enable.auto.commit": False, "retry.backoff.ms": 300}).start()
    rule = cluster.faults.inject_error("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS", 1,
                                       group=group)
    try:
        c.assign([tp])
        landed = threading.Event()
        c.commit_async({tp: 100}, lambda _, __: landed.set())   # retried once
        c.commit({tp: 150})
        assert landed.wait(30)
        assert c.committed(tp) == 150
    finally:
        cluster.faults.remove(rule.id)
        c.close()
