"""A classic member whose session expired while it was cut off learns it lost its
partitions, and commits nothing for them (issue 36's class, classic protocol).

Found by the group soak (kaflite, cooperative-sticky, seed 1070287728): consumer-0 was
cut off for 8 s, past its 6 s session; the coordinator expired it, and the group was
empty. Back on the network, its JoinGroup got UNKNOWN_MEMBER_ID, the client reset its
member id, and then (1) kept its partitions, since a cooperative member revokes nothing
before it joins, went on fetching them, and the new owner got them 0.3 s later: two
owners for 5 s; and (2) committed them with generation -1, which the empty group took
as a standalone consumer's commit. Java's consumer does neither: ``onJoinPrepare``
calls onPartitionsLost when the member was reset, and ``sendOffsetCommitRequest``
fails a subscribed member's commit while it has no generation.
"""

from __future__ import annotations

import pytest

from kaflite.client import TopicPartition
from kaflite.client.consumer import CommitFailedError
from kaflite.client.sync import Admin, Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.cluster.faults import Rule, api_key_of
from kaflite.protocol import errors
from tests.client._recovery_helpers import uid
from tests.conftest import wait_for


class Recorder:
    def __init__(self) -> None:
        self.lost: list[set[TopicPartition]] = []
        self.revoked: list[set[TopicPartition]] = []

    def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        pass

    def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        self.revoked.append(set(tps))

    def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        self.lost.append(set(tps))


def test_an_expired_cooperative_member_loses_its_partitions(cluster: Cluster) -> None:
    topic, group, cid = uid("t"), uid("g"), uid("member")
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    with Producer({"bootstrap.servers": cluster.bootstrap_servers}) as p:
        for i in range(20):
            p.produce(topic, b"v%d" % i, partition=i % 2)
        p.flush()
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                  "client.id": cid, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False,
                  "partition.assignment.strategy": "cooperative-sticky",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 300}).start()
    listener = Recorder()
    try:
        c.subscribe([topic], listener=listener)
        wait_for(lambda: (c.poll(100), len(c.assignment()) == 2)[1], "both partitions", 30)
        held = set(c.assignment())
        rule = cluster.faults.drop_requests(None, None, client_id=cid)   # cut off
        # Its JoinGroup is held while the test commits: a lone member's join otherwise
        # completes within milliseconds on loopback, and a member back in the group with a
        # generation may commit (CI once saw the commit go through for that reason).
        held_join = cluster.faults.add(Rule("delay", api_key_of("JoinGroup"), delay_ms=15_000,
                                            client_id=cid, remaining=None))
        try:
            try:
                with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
                    wait_for(lambda: not admin.describe_groups([group])[group].members,
                             "the coordinator to expire the member", 20)
            finally:
                cluster.faults.remove(rule.id)
            # Back on the network: the member finds out, in poll, before it reads on.
            wait_for(lambda: (c.poll(100), bool(listener.lost))[1],
                     "on_partitions_lost", 20, state=lambda: (listener.lost, c.assignment()))
            assert listener.lost[0] == held
            # Not in the group again yet: refused (RebalanceInProgressError while its
            # JoinGroup waits), not sent as a standalone consumer's commit.
            with pytest.raises((CommitFailedError, errors.RebalanceInProgressError)):
                c.commit({tp: 5 for tp in held})
            assert all(c.committed(tp) is None for tp in held)
        finally:
            cluster.faults.remove(held_join.id)
    finally:
        c.close()
