"""confluent-kafka consumers with ``group.protocol=consumer`` (KIP-848) on a 3-broker cluster.

Three consumers share a 12-partition topic; members join, leave and crash (a killed
process: its session expires), and after each change every partition has exactly one
owner, seen from the coordinator and from the consumers. Commits survive a coordinator
move and a full restart, with no duplicates beyond the uncommitted tail. A regex
subscription picks up a topic created after the group formed.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")

TOPIC = "kip848"
N = 12
CONFIG = {
    "group.consumer.heartbeat.interval.ms": 300, "group.consumer.min.heartbeat.interval.ms": 100,
    "group.consumer.session.timeout.ms": 3000, "group.consumer.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 3, "replica.lag.time.max.ms": 10000,
}
CRASHER = """
import sys, confluent_kafka as ck
c = ck.Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                 "group.protocol": "consumer", "client.id": "crasher",
                 "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
told = False
while True:
    c.poll(0.1)
    if c.assignment() and not told:
        print("assigned", flush=True)
        told = True
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(brokers=3, config=CONFIG,
                 data_dir=tmp_path_factory.mktemp("kip848")) as c:
        c.create_topic(TOPIC, N, 3)
        producer = ck.Producer({"bootstrap.servers": c.bootstrap_servers, "linger.ms": 0})
        for i in range(N * 20):
            producer.produce(TOPIC, f"{i}".encode(), partition=i % N)
        assert producer.flush(10) == 0
        yield c


def consumer(cluster: Cluster, group: str, name: str, **extra: Any) -> Any:
    return ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                        "group.protocol": "consumer", "client.id": name,
                        "auto.offset.reset": "earliest", "enable.auto.commit": False,
                        "fetch.wait.max.ms": 100, **extra})


def coordinator_group(cluster: Cluster, group: str) -> Any:
    for b in cluster.brokers.values():
        if b.groups is None:
            continue
        for shard in b.groups.active_shards():
            if group in shard.consumer_groups:
                return shard.consumer_groups[group]
    return None


def commit(c: Any, msg: Any) -> None:
    """A synchronous commit, sent again while it is answered STALE_MEMBER_EPOCH: a commit
    made as a rebalance bumps the member's epoch meets it (Kafka checks the epoch as
    kaflite does), librdkafka hands it to the application, and the Java client's
    commitSync retries it once the heartbeat has brought the new epoch."""
    from confluent_kafka import KafkaError, KafkaException

    for _ in range(100):            # up to about 2 s
        try:
            c.commit(message=msg, asynchronous=False)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.STALE_MEMBER_EPOCH:
                raise
        time.sleep(0.02)            # (librdkafka's own thread heartbeats meanwhile)
    raise AssertionError("the commit stayed STALE_MEMBER_EPOCH for 2 s")


class Members:
    """Consumers polled from the test thread; records what each one read."""

    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster, self.group = cluster, group
        self.consumers: dict[str, Any] = {}
        self.read: list[tuple[int, int]] = []

    def add(self, name: str, topics: list[str] | None = None) -> None:
        c = consumer(self.cluster, self.group, name)
        c.subscribe(topics or [TOPIC])
        self.consumers[name] = c

    def poll(self) -> None:
        for c in self.consumers.values():
            msg = c.poll(0.02)
            if msg is not None and msg.error() is None:
                self.read.append((msg.partition(), msg.offset()))
                commit(c, msg)

    def assignments(self) -> dict[str, set[int]]:
        return {n: {tp.partition for tp in c.assignment()} for n, c in self.consumers.items()}

    def one_owner_each(self, expect_members: int, crashed: int = 0) -> bool:
        """Stable, every partition owned once on the coordinator, and each consumer's own
        assignment is what the coordinator says it owns (the client has caught up)."""
        self.poll()
        parts = self.assignments()
        group = coordinator_group(self.cluster, self.group)
        if group is None or group.check():
            return False
        server = group.owners()
        by_client = {m.client_id: {p for ps in m.assigned.values() for p in ps}
                     for m in group.members.values()}
        flat = [p for ps in parts.values() for p in ps]
        mine = all(by_client.get(n) == ps for n, ps in parts.items()) and \
            (sorted(flat) == list(range(N)) if not crashed else len(flat) < N)
        return (mine and len(group.members) == expect_members + crashed
                and str(group.state) == "Stable" and len(server) == N
                and all(len(owners) == 1 for owners in server.values()))

    def close(self, name: str) -> None:
        self.consumers.pop(name).close()


@pytest.fixture
def members(cluster: Cluster) -> Iterator[Callable[[str], Members]]:
    """Members of a group, whose consumers are closed at the end of the test even when it
    fails (left open, they would retry the stopped cluster until the interpreter exits)."""
    made: list[Members] = []

    def make(group: str) -> Members:
        made.append(Members(cluster, group))
        return made[-1]

    yield make
    for m in made:
        for name in list(m.consumers):
            m.close(name)


def test_join_leave_crash_move_and_restart(cluster: Cluster,
                                           members: Callable[[str], Members]) -> None:
    group = "kip848-main"
    m = members(group)
    for name in ("c1", "c2", "c3"):
        m.add(name)
    wait_for(lambda: m.one_owner_each(3), "three members sharing 12 partitions", 30)
    # Every member holds some partitions (the uniform assignor: 4 each).
    assert sorted(len(ps) for ps in m.assignments().values()) == [4, 4, 4]
    wait_for(lambda: (m.poll(), len(m.read) >= N * 5)[1], "some records read", 30)
    # A crash: a member in its own process, killed; its session must expire.
    proc = subprocess.Popen([sys.executable, "-c", CRASHER, cluster.bootstrap_servers, group,
                             TOPIC], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        # Keep polling while the crasher joins: the others revoke its share only from
        # poll() (a blocking read here would hold the handover until their rebalance
        # timeout, max.poll.interval.ms).
        wait_for(lambda: m.one_owner_each(3, crashed=1), "four members sharing", 30)
        assert proc.stdout.readline().strip() == "assigned"
    finally:
        proc.kill()
        proc.wait(10)
    wait_for(lambda: m.one_owner_each(3), "the crashed member's session expired", 30)
    # A clean leave.
    m.close("c3")
    wait_for(lambda: m.one_owner_each(2), "two members after a leave", 30)
    # The coordinator moves; the group and its commits follow.
    epoch = coordinator_group(cluster, group).group_epoch
    cluster.faults.move_coordinator(group)
    wait_for(lambda: m.one_owner_each(2) and coordinator_group(cluster, group) is not None,
             "the group back after a coordinator move", 30)
    assert coordinator_group(cluster, group).group_epoch >= epoch
    wait_for(lambda: (m.poll(), len(set(m.read)) == N * 20)[1], "every record read", 60)
    for name in list(m.consumers):
        m.close(name)
    assert len(m.read) == len(set(m.read)), "a record was read twice"
    # librdkafka closes without a leave when it has not found the moved coordinator yet:
    # in 1 run of 8 (with or without this round's changes) c1 and c2 were still members
    # right after close(), with no heartbeat of theirs ever on the new coordinator (the
    # registry), and left only by session expiry 3 s later. Wait for that, so that the
    # restart below reloads an empty group, as it does when their leaves land.
    wait_for(lambda: not coordinator_group(cluster, group).members,
             "the closed members gone (left, or their sessions expired)", 30)
    # A full restart: the group and its offsets load back from __consumer_offsets.
    for node in list(cluster.brokers):
        cluster.faults.stop_broker(node)
    for node in list(cluster.brokers):
        cluster.faults.restart_broker(node)
    wait_for(lambda: coordinator_group(cluster, group) is not None, "the group reloaded", 60)
    reloaded = coordinator_group(cluster, group)
    assert str(reloaded.state) == "Empty" and reloaded.group_epoch > epoch
    after = members(group)
    after.add("c4")
    wait_for(lambda: after.one_owner_each(1), "a new member after the restart", 60)
    # One new record per partition: the member reads exactly those, so it started from
    # the committed offsets (the old end) and read nothing twice.
    producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0})
    for p in range(N):
        producer.produce(TOPIC, b"new", partition=p)
    assert producer.flush(10) == 0
    wait_for(lambda: (after.poll(), len(after.read) >= N)[1], "the new records read", 30)
    after.poll()
    assert sorted(after.read) == [(p, 20) for p in range(N)], after.read
    after.close("c4")


def test_regex_subscription_picks_up_a_new_topic(cluster: Cluster) -> None:
    group = "kip848-regex"
    cluster.create_topic("rx-a", 2, 1)
    c = consumer(cluster, group, "rx")
    c.subscribe(["^rx-.*"])
    try:
        wait_for(lambda: (c.poll(0.05), {tp.topic for tp in c.assignment()} == {"rx-a"})[1],
                 "the first topic assigned", 30)
        cluster.create_topic("rx-b", 3, 1)
        wait_for(lambda: (c.poll(0.05), len(c.assignment()) == 5)[1],
                 "the topic created later assigned", 30)
        member = next(iter(coordinator_group(cluster, group).members.values()))
        assert "^rx-.*" in (member.subscribed_topic_regex or "")  # librdkafka wraps it: (^rx-.*)
    finally:
        c.close()


def test_listed_and_described_as_consumer_groups(cluster: Cluster) -> None:
    from confluent_kafka.admin import AdminClient

    group = "kip848-admin"
    c = consumer(cluster, group, "adm")
    c.subscribe([TOPIC])
    try:
        wait_for(lambda: (c.poll(0.05), len(c.assignment()) == N)[1], "assigned", 30)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        listed = admin.list_consumer_groups().result(10)
        found = [g for g in listed.valid if g.group_id == group]
        assert found and found[0].type.name == "CONSUMER"
        desc = admin.describe_consumer_groups([group])[group].result(10)
        assert desc.type.name == "CONSUMER" and desc.state.name == "STABLE"
        assert len(desc.members[0].assignment.topic_partitions) == N
    finally:
        c.close()
