"""confluent-kafka's ShareConsumer (librdkafka 2.16) against share groups on the cluster.

Four consumers share a 2-partition topic and all get work; released records come
back, rejected ones and those past the delivery count limit never do; a consumer that
stalls while holding records has them redelivered once their locks expire, and one
killed while holding records has them redelivered too (its connection's share
sessions end with it, as in Kafka 4.1).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.groups._share import ShareGroup
from kaflite.cluster.share import PersistedState
from kaflite.protocol import KafkaError
from tests.conftest import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka has no ShareConsumer", allow_module_level=True)

LOCK_MS = 3000
LIMIT = 3


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={
            "group.share.record.lock.duration.ms": LOCK_MS,
            "group.share.min.record.lock.duration.ms": 1000,
            "group.share.delivery.count.limit": LIMIT}) as c:
        yield c


def earliest(cluster: Cluster, group: str) -> None:
    """The group's share.auto.offset.reset (a group config) is earliest."""
    for broker in cluster.brokers.values():
        assert broker.share is not None
        broker.share.group_configs[group] = {"share.auto.offset.reset": "earliest"}


def topic_with(cluster: Cluster, name: str, partitions: int, count: int) -> list[bytes]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                         "linger.ms": 20, "batch.num.messages": 10})
    values = [f"{name}-{i:05d}".encode() for i in range(count)]
    for i, v in enumerate(values):
        producer.produce(name, v, partition=i % partitions)
    assert producer.flush(30) == 0
    return values


def consumer(cluster: Cluster, group: str, **extra: str) -> confluent_kafka.ShareConsumer:
    c = confluent_kafka.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers,
                                       "group.id": group, **extra})
    return c


def test_four_consumers_share_two_partitions(cluster: Cluster) -> None:
    group, name = "share-four", "share-four"
    values = topic_with(cluster, name, 2, 400)
    earliest(cluster, group)
    consumers = [consumer(cluster, group, **{"max.poll.records": "20"}) for _ in range(4)]
    for c in consumers:
        c.subscribe([name])

    def all_joined() -> bool:
        try:
            g = _share_group(cluster, group)
        except AssertionError:
            return False
        return len(g.members) == 4 and all(m.member_epoch == g.assignment_epoch
                                           for m in g.members.values())

    # The four join (their heartbeats run in the background) before any record is polled,
    # so that the first ones do not take everything before the last ones are assigned.
    wait_for(all_joined, "four members with their assignments")
    seen: Counter[bytes] = Counter()
    per_consumer: Counter[int] = Counter()
    deadline = time.monotonic() + 45
    try:
        while set(seen) != set(values) and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for m in c.poll(0.2):
                    assert m.error() is None, m.error()
                    seen[m.value()] += 1
                    per_consumer[i] += 1
        members = _share_group(cluster, group).members
        assert len(members) == 4
        owners = Counter(p for m in members.values() for ps in m.assigned.values() for p in ps)
        assert owners == {0: 2, 1: 2}      # the simple assignor: each partition shared by two
        # The registry names the share consumers' connections by role.
        conns = cluster.connections()
        assert sum(group in c.share_groups for c in conns) == 4     # one coordinator each
        leaders = {p for c in conns if "share-partition-leader" in c.roles
                   for p in c.share_partitions}
        assert leaders == {f"{name}-0", f"{name}-1"}
        assert all("group-coordinator" not in c.roles for c in conns if c.share_groups)
    finally:
        for c in consumers:
            c.close()
    assert set(seen) == set(values)
    assert all(per_consumer[i] > 0 for i in range(4)), per_consumer
    wait_for(lambda: not _share_group(cluster, group).members, "the members to leave")


def _share_group(cluster: Cluster, group: str) -> ShareGroup:
    for broker in cluster.brokers.values():
        assert broker.groups is not None
        try:
            return broker.groups.shard_for(group).share.share_group(group)
        except KafkaError:
            continue
    raise AssertionError(f"no coordinator has share group {group}")


def test_release_reject_and_the_delivery_count_limit(cluster: Cluster) -> None:
    from confluent_kafka import AcknowledgeType

    group, name = "share-acks", "share-acks"
    values = topic_with(cluster, name, 1, 30)
    earliest(cluster, group)
    c = consumer(cluster, group, **{"share.acknowledgement.mode": "explicit"})
    c.subscribe([name])
    deliveries: dict[bytes, list[int]] = {}
    accepted: set[bytes] = set()
    deadline = time.monotonic() + 45
    try:
        while time.monotonic() < deadline:
            msgs = c.poll(0.5)
            for m in msgs:
                assert m.error() is None, m.error()
                v = m.value()
                deliveries.setdefault(v, []).append(m.delivery_count())
                index = int(v.rsplit(b"-", 1)[1])
                if index % 3 == 0:      # rejected at once: never again
                    c.acknowledge(m, AcknowledgeType.REJECT)
                elif (index % 3 == 1 and len(deliveries[v]) == 1) \
                        or (index % 3 == 2 and index < 12):
                    # released once (redelivered), or always (archived at the limit)
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                    accepted.add(v)
            if msgs:
                c.commit_sync()
            expected_done = {v for v in values if int(v.rsplit(b"-", 1)[1]) % 3 == 1 or
                             (int(v.rsplit(b"-", 1)[1]) % 3 == 2 and
                              int(v.rsplit(b"-", 1)[1]) >= 12)}
            limited = [v for v in values if int(v.rsplit(b"-", 1)[1]) % 3 == 2
                       and int(v.rsplit(b"-", 1)[1]) < 12]
            if accepted >= expected_done and all(len(deliveries.get(v, [])) >= LIMIT
                                                 for v in limited):
                # nothing more may come: poll a little longer to be sure
                extra = c.poll(1.0)
                assert not extra, [m.value() for m in extra]
                break
    finally:
        c.close()
    for v in values:
        index = int(v.rsplit(b"-", 1)[1])
        got = deliveries.get(v, [])
        if index % 3 == 0:
            assert got == [1], (v, got)                 # rejected: archived
        elif index % 3 == 1:
            assert got == [1, 2], (v, got)              # released: redelivered once
        elif index < 12:
            assert got == list(range(1, LIMIT + 1)), (v, got)   # archived at the limit
        else:
            assert got == [1], (v, got)
    state = _persisted(cluster, group)
    assert state.start_offset == len(values) and not state.batches   # all done with


def _persisted(cluster: Cluster, group: str) -> PersistedState:
    """The share-partition's state as the share coordinator keeps it."""
    for broker in cluster.brokers.values():
        assert broker.share_coordinator is not None
        for key, state in broker.share_coordinator.states().items():
            if key[0] == group:
                return state
    raise AssertionError(f"no share state for {group}")


KILLED_CONSUMER = textwrap.dedent("""
    import sys, time
    from confluent_kafka import ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        msgs = [m for m in c.poll(0.5) if m.error() is None]
        if msgs:
            print(" ".join(m.value().decode() for m in msgs), flush=True)
            time.sleep(60)    # holds them until killed
""")


def test_a_killed_consumer_s_records_come_back_after_the_lock(cluster: Cluster) -> None:
    group, name = "share-killed", "share-killed"
    values = topic_with(cluster, name, 1, 20)
    earliest(cluster, group)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", KILLED_CONSUMER, cluster.bootstrap_servers,
                             group, name], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        held = set(proc.stdout.readline().split())
        assert held
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
    survivor = consumer(cluster, group)
    survivor.subscribe([name])
    got: dict[str, int] = {}
    try:
        wait_for(lambda: _drain(survivor, got) >= set(v.decode() for v in values),
                 "every record, the killed consumer's again", timeout=30)
    finally:
        survivor.close()
    for v in held:
        assert got[v] == 2, (v, got[v])          # redelivered after the lock expired
    assert all(got[v.decode()] == 1 for v in values if v.decode() not in held)


def _drain(c: object, got: dict[str, int]) -> set[str]:
    assert isinstance(c, confluent_kafka.ShareConsumer)
    for m in c.poll(0.3):
        if m.error() is None:
            got[m.value().decode()] = m.delivery_count()
    return set(got)


def test_a_stalled_consumer_s_records_come_back_after_the_lock(cluster: Cluster) -> None:
    group, name = "share-stalled", "share-stalled"
    values = topic_with(cluster, name, 1, 10)
    earliest(cluster, group)
    stalled = consumer(cluster, group, **{"share.acknowledgement.mode": "explicit"})
    stalled.subscribe([name])
    other = consumer(cluster, group)
    try:
        held: list[str] = []
        deadline = time.monotonic() + 30
        while not held and time.monotonic() < deadline:
            held = [m.value().decode() for m in stalled.poll(0.5) if m.error() is None]
        assert held
        # ``stalled`` keeps its connection and session but neither polls nor acknowledges:
        # its records come to ``other`` once their locks (3 s) expire, delivered again.
        other.subscribe([name])
        got: dict[str, int] = {}
        wait_for(lambda: _drain(other, got) >= {v.decode() for v in values},
                 "the stalled consumer's records, after their locks", timeout=30)
        assert all(got[v] == 2 for v in held), (held, got)
    finally:
        other.close()
        stalled.close()


def test_group_configs_set_with_incremental_alter_configs(cluster: Cluster) -> None:
    """share.auto.offset.reset as a group config (ConfigResource GROUP): earliest, and
    by_duration (KIP-1106) starting at the first record at most that long ago."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewTopic,
        ResourceType,
    )

    name = "share-configs"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 3)])[name].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    now = int(time.time() * 1000)
    for i in range(10):    # five records two hours old, then five new ones
        producer.produce(name, f"r{i}".encode(), partition=0,
                         timestamp=now - 7_200_000 if i < 5 else now)
    assert producer.flush(30) == 0
    for group, reset in (("cfg-earliest", "earliest"), ("cfg-duration", "by_duration:PT1H")):
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("share.auto.offset.reset", reset,
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(30)
    wanted = {"cfg-earliest": {f"r{i}" for i in range(10)},
              "cfg-duration": {f"r{i}" for i in range(5, 10)}}
    for group, values in wanted.items():
        c = consumer(cluster, group)
        c.subscribe([name])
        got: dict[str, int] = {}
        try:
            wait_for(lambda c=c, got=got, values=values: _drain(c, got) >= values,
                     f"{group}'s records")
            assert not [m for m in c.poll(0.5) if m.error() is None]
        finally:
            c.close()
        assert set(got) == values
