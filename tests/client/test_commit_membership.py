"""A commit belongs to the membership it was made in.

Found by the group soak (kaflite-sync, KIP-848, seed 1295088744): a synchronous commit of
6179 was retried for 29 s while the coordinator was unavailable; meanwhile the member's
session expired, it lost its partitions, another member read on and committed 9780, and
the first member joined again under a new epoch. The retried commit then went out with
that new epoch and was taken: the group's committed offset went back to 6179, and the
partition was read again from there. A commit that outlives its membership must fail.
"""

from __future__ import annotations

import threading

import pytest

from kaflite.client import TopicPartition
from kaflite.client.consumer import CommitFailedError
from kaflite.client.sync import Consumer
from kaflite.cluster import Cluster
from tests.client._recovery_helpers import uid
from tests.conftest import wait_for


@pytest.mark.parametrize("protocol", ["consumer", "classic"])
def test_a_commit_retried_across_a_rejoin_fails(cluster: Cluster, protocol: str) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    tp = TopicPartition(topic, 0)
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
            "enable.auto.commit": False, "retry.backoff.ms": 100}
    if protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 200})
    c = Consumer(conf).start()
    outcome: list[BaseException | None] = []
    try:
        c.subscribe([topic])
        wait_for(lambda: (c.poll(100), bool(c.assignment()))[1], "the partition", 30)
        c.commit({tp: 10})
        md = c.group_metadata()
        member, joined = md.member_id, (md.member_id, md.generation_id)
        # Every commit now fails with a retriable error, for as long as the rule stays.
        rule = cluster.faults.inject_error("OffsetCommit", "COORDINATOR_LOAD_IN_PROGRESS",
                                           None, group=group)

        def commit() -> None:
            try:
                c.commit({tp: 5})
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        t = threading.Thread(target=commit)
        t.start()
        try:
            assert cluster.faults.forget_member(group, member)   # its session "expires"
            # (a KIP-848 member keeps its id and joins again at epoch 0; a classic one
            # gets a new id)
            wait_for(lambda: (c.poll(100), again(c, joined))[1], "the member to join again",
                     30, state=lambda: c.group_metadata())
        finally:
            cluster.faults.remove(rule.id)
        t.join(60)
        assert not t.is_alive()
        assert len(outcome) == 1 and isinstance(outcome[0], CommitFailedError), outcome
        assert c.committed(tp) == 10
    finally:
        c.close()


def again(c: Consumer, before: tuple[str, int]) -> bool:
    md = c.group_metadata()
    return md.generation_id > 0 and (md.member_id, md.generation_id) != before \
        and bool(c.assignment())
