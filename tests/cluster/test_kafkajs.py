"""kafkajs (the Node.js client, from npm) against the embedded cluster.

kafkajs implements the protocol on its own (no librdkafka, no Java), with its
own choice of API versions: a third independent proof of wire compatibility
beside librdkafka and kafka-python/aiokafka. Each test runs
``kafkajs/peer.js`` in Node with one action and checks what kafkajs saw
against what the cluster holds. ``tools/ensure_kafkajs.sh`` (run by ``make
test``) installs the pinned kafkajs; without Node the tests report themselves
skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from kaflite.client import TopicPartition
from kaflite.client.sync import Admin, Producer
from kaflite.cluster import Cluster
from kaflite.protocol.hashing import murmur2_partition

PEER_DIR = Path(__file__).parent / "kafkajs"
NODE = shutil.which("node")
needs_kafkajs = pytest.mark.skipif(
    NODE is None or not (PEER_DIR / "node_modules" / "kafkajs").is_dir(),
    reason="kafkajs is not installed (tools/ensure_kafkajs.sh needs node and npm)")
pytestmark = [needs_kafkajs, pytest.mark.interop, pytest.mark.peer]


class Bootstrap(Protocol):
    """Where a peer bootstraps: a cluster, a proxy, or ``At`` for a bare address."""

    @property
    def bootstrap_servers(self) -> str: ...


@dataclass(frozen=True)
class At:
    bootstrap_servers: str


class Peer:
    """One kafkajs process running one action; its log goes to a file, not a pipe that fills."""

    def __init__(self, cluster: Bootstrap, action: str, log: Path, **args: Any) -> None:
        assert NODE is not None
        spec = {"brokers": cluster.bootstrap_servers, "action": action, **args}
        self.log = log
        with open(log, "w") as err:
            self.proc = subprocess.Popen([NODE, str(PEER_DIR / "peer.js"), json.dumps(spec)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=err, text=True)
        self.lines: list[dict[str, Any]] = []

    def wait_for(self, done: Callable[[list[dict[str, Any]]], bool], timeout: float,
                 what: str) -> None:
        """Read progress lines until ``done(lines)`` says enough."""
        def read() -> None:
            assert self.proc.stdout is not None
            while not done(self.lines):
                line = self.proc.stdout.readline()
                if not line:
                    return
                self.lines.append(json.loads(line))

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        if not done(self.lines):
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"kafkajs: timed out waiting for {what}; saw {self.lines}\n"
                                 f"{self.log.read_text()[-3000:]}")

    def go_on(self) -> None:
        """Let an action that waits for a line on stdin (txnmoves) take its next step."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = 90) -> dict[str, Any]:
        """The action's result; fails with kafkajs's own error and log if it had none."""
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.communicate()
        self.lines += [json.loads(line) for line in out.splitlines() if line.strip()]
        results = [line["result"] for line in self.lines if "result" in line]
        assert self.proc.returncode == 0 and results, \
            f"kafkajs failed: {self.lines[-1:]}\n{self.log.read_text()[-3000:]}"
        return dict(results[0])


def run(cluster: Cluster, tmp_path: Path, action: str, **args: Any) -> dict[str, Any]:
    return Peer(cluster, action, tmp_path / f"{action}.log", **args).result()


def assignments(lines: list[dict[str, Any]], topic: str) -> dict[int, list[int]]:
    """Each member's newest assignment, from the consumer's "joined" lines."""
    return {line["joined"]: line["assignment"].get(topic, []) for line in lines
            if "joined" in line}


def admin(cluster: Cluster) -> Admin:
    return Admin({"bootstrap.servers": cluster.bootstrap_servers}).start()


def test_kafkajs_admin(cluster3: Cluster, tmp_path: Path) -> None:
    topic = "kjs-admin"
    r = run(cluster3, tmp_path, "admin", topic=topic)
    ports = {b["nodeId"]: b["port"] for b in r["cluster"]["brokers"]}
    assert ports == {n: cluster3.broker(n).port for n in range(3)}
    assert r["cluster"]["clusterId"] == cluster3.cluster_id
    assert r["created"] is True and r["createdAgain"] is False   # TOPIC_ALREADY_EXISTS
    parts = r["metadata"]["topics"][0]["partitions"]
    assert sorted(p["partitionId"] for p in parts) == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [0, 1, 2] and p["leader"] in p["replicas"]
               for p in parts)
    # 10, 20 and 30 records were produced to partitions 0, 1 and 2
    ends = {o["partition"]: (int(o["low"]), int(o["high"])) for o in r["offsets"]}
    assert ends == {0: (0, 10), 1: (0, 20), 2: (0, 30)}
    after = {o["partition"]: (int(o["low"]), int(o["high"])) for o in r["offsetsAfterDelete"]}
    assert after == {0: (0, 10), 1: (5, 20), 2: (0, 30)}
    assert len(r["metadataAfterGrow"]["topics"][0]["partitions"]) == 5

    def configs(key: str) -> dict[str, tuple[str, bool]]:
        (res,) = r[key]["resources"]
        assert res["errorCode"] == 0
        return {e["configName"]: (e["configValue"], e["isDefault"]) for e in res["configEntries"]}

    assert configs("configs") == {"retention.ms": ("3600000", False),
                                  "cleanup.policy": ("delete", True)}
    assert configs("configsAfterAlter") == {"retention.ms": ("7200000", False)}
    assert topic in r["topics"] and topic not in r["topicsAfterDelete"]
    a = admin(cluster3)
    try:
        assert topic not in a.list_topics()
    finally:
        a.close()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_kafkajs_produce_and_group_consume(cluster3: Cluster, tmp_path: Path,
                                           compression: str) -> None:
    topic, group, count = f"kjs-{compression}", f"kjs-group-{compression}", 6000
    cluster3.create_topic(topic, partitions=6, replication_factor=3)
    # The group forms first (two members, three partitions each), then kafkajs produces.
    consumer = Peer(cluster3, "consume", tmp_path / "consume.log", topic=topic, groupId=group,
                    expected=count, members=2, timeoutMs=120_000)

    def split(lines: list[dict[str, Any]]) -> bool:
        got = assignments(lines, topic)
        return len(got) == 2 and sorted(got[0] + got[1]) == list(range(6)) \
            and len(got[0]) == len(got[1]) == 3

    consumer.wait_for(split, 60, "both members to hold three partitions each")
    acks = run(cluster3, tmp_path, "produce", topic=topic, count=count, batch=600,
               compression=compression, idempotent=True, prefix=compression)["acks"]
    assert all(code == 0 for *_, code in acks)
    records = consumer.result()["records"]
    by_partition: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for _member, partition, offset, key, value, seq in records:
        i = int(seq)
        assert value == f"{compression}-{i}" and key == f"key-{i % 101}"
        # kafkajs's default partitioner is Java's: murmur2 of the key
        assert partition == murmur2_partition(key.encode(), 6)
        by_partition[partition].append((offset, i))
    assert sorted(i for p in by_partition.values() for _, i in p) == list(range(count))
    owner = assignments(consumer.lines, topic)
    for member, partition, *_ in records:              # each from the member that owns it
        assert partition in owner[member]
    ends = {}
    for partition, got in by_partition.items():
        # within a partition, offsets 0.. in the order the records were sent
        assert [o for o, _ in got] == list(range(len(got)))
        assert [i for _, i in got] == sorted(i for _, i in got)
        ends[TopicPartition(topic, partition)] = len(got)
    # the base offset kafkajs was told for each send and partition holds that send's
    # first record for the partition
    at = {(p, o): i for p, got in by_partition.items() for o, i in got}
    for start, partition, base, _ in acks:
        first = min(i for i in range(start, start + 600)
                    if murmur2_partition(f"key-{i % 101}".encode(), 6) == partition)
        assert at[(partition, base)] == first
    a = admin(cluster3)
    try:
        committed = a.list_group_offsets(group)
        assert {tp: o.offset for tp, o in committed.items()} == ends
        assert [g for g in a.list_groups() if g[0] == group] == [(group, "consumer", "Empty")]
        assert a.describe_groups([group])[group].members == []      # both left on disconnect
    finally:
        a.close()
    # the brokers' registry saw kafkajs's connections for what they were
    seen = cluster3.connections(client_id="kafkajs-interop", include_closed=True)
    coordinator = cluster3.faults.coordinator_of(group)[2]
    assert {c.broker for c in seen if "group-coordinator" in c.roles and group in c.groups} \
        == {coordinator}
    assert {c.broker for c in seen if "partition-leader" in c.roles} == {0, 1, 2}


def test_kafkajs_consumer_follows_leader_moves(cluster3: Cluster, tmp_path: Path) -> None:
    """kafkajs gets NOT_LEADER_OR_FOLLOWER after each move, finds the new leader and reads on."""
    topic, group, half = "kjs-moves", "kjs-moves-group", 1500
    cluster3.create_topic(topic, partitions=3, replication_factor=3)

    def produce(first: int) -> None:
        with Producer({"bootstrap.servers": cluster3.bootstrap_servers}) as p:
            for i in range(first, first + half):
                p.produce(topic, f"m-{i}".encode(), partition=i % 3,
                          headers=[("seq", str(i).encode())])
            p.flush()

    produce(0)
    consumer = Peer(cluster3, "consume", tmp_path / "consume.log", topic=topic, groupId=group,
                    expected=2 * half, progressAt=half, members=1, timeoutMs=80_000)
    # once it has read the first half, its fetchers wait on the leaders for more
    consumer.wait_for(lambda lines: any("consumed" in line for line in lines), 60,
                      "the consumer to read the first half")
    for partition in range(3):
        before = cluster3.controller.topics[topic].partitions[partition].leader
        assert cluster3.move_leader(topic, partition) != before
    produce(half)
    records = consumer.result()["records"]
    seqs = sorted(int(seq) for *_, seq in records)
    assert set(seqs) == set(range(2 * half)), "a record was never read"
    # Each once, unless kafkajs rejoined its group (a session lost under load): then it
    # reads on from its last commit, and what it had read since comes again.
    if sum(1 for line in consumer.lines if "joined" in line) == 1:
        assert seqs == list(range(2 * half))
    assert all(value == f"m-{seq}" for *_, value, seq in records)
    seen = cluster3.connections(client_id="kafkajs-interop", include_closed=True)
    told = sum(c.apis["Fetch"].errors.get("NOT_LEADER_OR_FOLLOWER", 0)
               for c in seen if "Fetch" in c.apis)
    assert told >= 1, "no Fetch was answered NOT_LEADER_OR_FOLLOWER: the moves went unseen"


def test_kafkajs_transactions(cluster3: Cluster, tmp_path: Path) -> None:
    """kafkajs's transactional producer (with sendOffsets) and read_committed consumer."""
    topic, group = "kjs-txn", "kjs-txn-offsets"
    cluster3.create_topic(topic, 2, 3)
    out = run(cluster3, tmp_path, "txn", topic=topic, transactionalId="kjs-tid",
              offsetsGroup=group, groupId="kjs-txn-reader", expected=6, timeoutMs=90000)
    values = out["values"]
    assert sorted(v for _, _, v in values) == [f"keep-{i}" for i in range(6)]
    assert all(v.startswith("keep") for _, _, v in values)
    a = admin(cluster3)
    try:
        committed = a.list_group_offsets(group)
        ends = a.list_offsets({TopicPartition(topic, p): "latest" for p in range(2)})
    finally:
        a.close()
    assert {tp: o.offset for tp, o in committed.items()} == {TopicPartition(topic, 0): 3}
    # 3 kept + 2 aborted records + 2 markers per partition: the aborted data is in the log
    assert {tp.partition: o.offset for tp, o in ends.items() if o is not None} == {0: 7, 1: 7}
