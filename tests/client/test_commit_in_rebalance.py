"""A commit while the member's own JoinGroup waits: it fails at once, as in Java.

Found by ``kaflite.verify``'s group churn with cooperative-sticky members (seed 11717):
a member changed its subscription, its JoinGroup waited on the coordinator for a
stalled member (up to the rebalance timeout), and the commit it made meanwhile waited
behind that JoinGroup on the same connection (a broker answers a connection's
requests in order) for 8.8 s: its poll loop stood still for the whole rebalance.
Java fails such a commit at once with RebalanceInProgressException
(``generationIfStable``): the application polls, which completes the rebalance, and
commits again.

Here member A and member B share a cooperative-sticky group; B stops polling (a
stalled application), A changes its subscription, and A's commit during the
rebalance B holds up must raise RebalanceInProgressError.
"""

from __future__ import annotations

import pytest

from kaflite.client import TopicPartition
from kaflite.client.sync import Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from tests.client._recovery_helpers import uid
from tests.conftest import wait_for


def member(cluster: Cluster, group: str, client_id: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
        "client.id": client_id, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
        # the rebalance timeout: B holds the rebalance up for this long
        "max.poll.interval.ms": 20_000}).start()


def test_a_commit_during_its_own_join_fails_at_once(cluster: Cluster) -> None:
    topic, other, group = uid("t"), uid("other"), uid("g")
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    cluster.create_topic(other, partitions=1, replication_factor=3)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        for i in range(20):
            p.produce(topic, b"v%d" % i, partition=i % 2)
        p.flush()
    a, b = member(cluster, group, "a"), member(cluster, group, "b")
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        wait_for(lambda: (a.poll(100), b.poll(100), bool(a.assignment())
                          and bool(b.assignment()))[-1], "both members to hold a partition", 30)
        owned = next(iter(a.assignment()))
        # B stalls from now on; A changes its subscription and polls: its JoinGroup goes
        # out and waits for B, which will not join again before its rebalance timeout.
        a.subscribe([topic, other])
        a.poll(500)
        with pytest.raises(errors.RebalanceInProgressError):
            a.commit({owned: 1})
        # still its partition (cooperative): the commit is possible again once A has
        # polled the rebalance to its end (B is dropped when the rebalance timeout ends)
        assert owned in a.assignment()
    finally:
        a.close()
        b.close()


def test_outside_a_rebalance_the_commit_goes_through(cluster: Cluster) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    a = member(cluster, group, "solo")
    try:
        a.subscribe([topic])
        wait_for(lambda: (a.poll(100), bool(a.assignment()))[-1], "an assignment", 30)
        a.commit({TopicPartition(topic, 0): 0})
        assert a.committed(TopicPartition(topic, 0)) == 0
    finally:
        a.close()
