"""KIP-848: a member whose session expires learns it, and drops its partitions as lost.

A mixed group, one librdkafka member (confluent-kafka, ``group.protocol=consumer``)
and one kaflite member, on a 4-partition topic. One of them is cut off from the
coordinator: every ConsumerGroupHeartbeat it sends has its connection closed
(``drop_requests``), so no heartbeat reaches the coordinator. After the session
timeout the coordinator fences it and gives its partitions to the other member.
Then the heartbeats go through again, and:

* the cut-off member is told (UNKNOWN_MEMBER_ID on its next heartbeat) and calls its ``on_lost`` callback for exactly the
  partitions it had, never ``on_revoke`` (it may not commit them any more);
* it rejoins as a new member, and the group settles with every partition owned
  once, the other member having handed half of them back through revocation.

The overlap while it is cut off is the one every protocol allows: the member
cannot know it was fenced before it hears from the coordinator. What is checked is
that it hears, and that ownership is exclusive from then on.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kaflite.client import Consumer, RebalanceListener, TopicPartition
from kaflite.cluster import Cluster
from tests.client._kip848 import member_opts
from tests.client._rdkafka_group import RdMember
from tests.client._recovery_helpers import api_errors, clear_faults, run, uid, until

pytestmark = pytest.mark.interop

PARTITIONS = 4
CONFIG = {
    "replica.lag.time.max.ms": 10000,
    "offsets.topic.num.partitions": 3,
    "group.consumer.heartbeat.interval.ms": 250,
    "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 2000,
    "group.consumer.min.session.timeout.ms": 1000,
}

__all__ = ["clear_faults"]    # the shared fixture: every fault rule goes at a test's end


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=CONFIG) as c:
        yield c


class Listener(RebalanceListener):
    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[int]]] = []

    def _add(self, kind: str, tps: set[TopicPartition]) -> None:
        if tps:
            self.calls.append((kind, frozenset(tp.partition for tp in tps)))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self._add("revoked", revoked)

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._add("assigned", assigned)

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self._add("lost", lost)


@pytest.mark.parametrize("cut_off", ["librdkafka", "kaflite"])
def test_an_expired_member_learns_it_and_its_partitions_are_lost(cluster: Cluster,
                                                                 cut_off: str) -> None:
    topic, group = uid("t"), uid("g")
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    kaflite_id = uid("kaflite")

    async def main() -> None:
        rd = RdMember(cluster.bootstrap_servers, group, topic, protocol="consumer")
        listener = Listener()
        rd.start()
        try:
            async with Consumer(**member_opts(cluster, group, client_id=kaflite_id)) as c:
                c.subscribe([topic], listener=listener)

                def ours() -> set[int]:
                    return {tp.partition for tp in c.assignment()}

                async def step() -> None:
                    assert rd.error is None, rd.error
                    await c.poll(timeout_ms=50)

                def settled() -> bool:
                    theirs = rd.snapshot()[0]
                    return len(theirs) == len(ours()) == PARTITIONS // 2 and \
                        not theirs & ours()

                await until("the group to settle", settled, step)
                victim_id = rd.conf["client.id"] if cut_off == "librdkafka" else kaflite_id
                had = frozenset(rd.snapshot()[0] if cut_off == "librdkafka" else ours())
                rule = cluster.faults.drop_requests("ConsumerGroupHeartbeat", None,
                                                    client_id=victim_id)
                # Only the coordinator fencing the cut-off member hands its partitions to
                # the other one.
                other = ours if cut_off == "librdkafka" else (lambda: rd.snapshot()[0])
                await until("the other member to own every partition",
                            lambda: len(other()) == PARTITIONS, step)
                assert rule.hits >= 1
                cluster.faults.remove(rule.id)

                def lost() -> bool:
                    if cut_off == "librdkafka":
                        return any(k == "lost" for _, k, _ in rd.calls)
                    return any(k == "lost" for k, _ in listener.calls)

                await until("the cut-off member to learn it was fenced", lost, step)
                calls = [(k, ps) for _, k, ps in rd.calls] if cut_off == "librdkafka" \
                    else listener.calls
                first_lost = next(i for i, (k, _) in enumerate(calls) if k == "lost")
                assert calls[first_lost] == ("lost", had), calls
                assert ("revoked", had) not in calls[first_lost:], calls
                await until("the group to settle again", settled, step)
                # The coordinator told it: a heartbeat it sent after the fault was
                # answered UNKNOWN_MEMBER_ID.
                assert api_errors(cluster, victim_id, "ConsumerGroupHeartbeat").get(
                    "UNKNOWN_MEMBER_ID", 0) >= 1
        finally:
            rd.stop()
        assert rd.error is None, rd.error

    run(main(), timeout=90)
