"""Apache Kafka's own command-line tools against kaflite's cluster (and, with the same
assertions, against Apache Kafka, which shows that the assertions hold for the real
thing): kafka-topics, kafka-consumer-groups, kafka-configs, kafka-acls,
kafka-transactions, kafka-share-groups, the console producer and consumer,
kafka-get-offsets, kafka-log-dirs, kafka-features, kafka-metadata-quorum, and
kafka-dump-log on the brokers' own segment files (for kaflite: its on-disk format,
read by Kafka's reader, CRCs checked).

Each tool is its main class run from the fetched jars (``_kafka_tools``). One cluster
for the module, with an authorizer whose super user is the PLAINTEXT principal
(``User:ANONYMOUS``), so kafka-acls has something to talk to while every other tool
is allowed everything. Every test passes on both targets; the last gap (dynamic broker
configs, ``kafka-configs --entity-type brokers --alter``) was closed in issue 38.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kaflite.client import AcknowledgeType, Admin, ConfigResource, Producer, ShareConsumer
from kaflite.protocol.hashing import coordinator_partition, murmur2_partition
from kaflite.security.acl import AclBindingFilter, ResourceType
from kaflite.testing import ApacheKafka, ClusterUnderTest
from tests.interop._clients import create_topic, replicas, run, uid
from tests.interop._kafka_tools import (
    Batch,
    Ran,
    ToolRunner,
    dump_batches,
    log_dirs,
    partition_dirs,
)
from tests.interop.conftest import make_target, started

pytestmark = pytest.mark.interop

GROUP_RESOURCE = 32     # ConfigResource type GROUP

AUTHORIZED = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
# kaflite with three brokers, then one Kafka node (a three-node start costs 10 s more
# and adds nothing the tools see); KAFLITE_TOOLS_TARGETS=kaflite-3 runs kaflite alone.
TOOL_TARGETS = os.environ.get("KAFLITE_TOOLS_TARGETS", "kaflite-3,kafka-1").split(",")
KEYS = ["alice", "carol", "dave"]     # one to each of 3 partitions (murmur2)
RECORDS = [(KEYS[i % 3], f"click {i}") for i in range(9)]


@pytest.fixture(scope="module", params=TOOL_TARGETS)
def cluster(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    yield from started(make_target(request.param, request, config=AUTHORIZED))


@pytest.fixture(scope="module")
def tools(cluster: ClusterUnderTest, kafka_libs: Path,
          tmp_path_factory: pytest.TempPathFactory) -> ToolRunner:
    return ToolRunner(kafka_libs, tmp_path_factory.mktemp("tool-logs"), cluster.bootstrap_servers)


def rows(text: str, first: str) -> list[list[str]]:
    """The whitespace-separated rows of a table whose first column is ``first``."""
    return [line.split() for line in text.splitlines() if line.split()[:1] == [first]]


@dataclass
class Keyed:
    """A 3-partition topic written by kafka-console-producer (keyed records) and read
    back by kafka-console-consumer in a group that commits its offsets."""

    topic: str
    group: str
    produced: Ran
    consumed: Ran


@pytest.fixture(scope="module")
def keyed(cluster: ClusterUnderTest, tools: ToolRunner) -> Keyed:
    topic, group = uid("tools-keyed"), uid("tools-group")
    run(create_topic(cluster.bootstrap_servers, topic, 3, replicas(cluster)))
    produced = tools.admin(
        "kafka-console-producer", "--topic", topic, "--property", "parse.key=true",
        "--property", "key.separator=:", "--producer-property", "acks=all",
        stdin="".join(f"{k}:{v}\n" for k, v in RECORDS))
    consumed = tools.admin(
        "kafka-console-consumer", "--topic", topic, "--group", group, "--from-beginning",
        "--max-messages", str(len(RECORDS)), "--timeout-ms", "30000",
        "--property", "print.key=true", "--property", "print.partition=true",
        "--property", "print.offset=true")
    return Keyed(topic, group, produced, consumed)


def test_console_producer_and_consumer_round_trip(keyed: Keyed) -> None:
    keyed.produced.ok()
    out = keyed.consumed.ok()
    got = []
    for line in out.splitlines():
        if line.startswith("Option --property is deprecated"):   # Kafka 4.1+ says so
            continue
        m = re.fullmatch(r"Partition:(\d+)\tOffset:(\d+)\t([^\t]*)\t(.*)", line)
        assert m, f"unexpected line {line!r} in\n{out}"
        got.append((int(m[1]), int(m[2]), m[3], m[4]))
    assert sorted((k, v) for _, _, k, v in got) == sorted(RECORDS)
    partition_of = {k: {p for p, _, key, _ in got if key == k} for k in KEYS}
    assert partition_of == {k: {murmur2_partition(k.encode(), 3)} for k in KEYS}
    for p in {p for p, *_ in got}:   # each partition from offset 0, in order, no gap
        offsets = [o for q, o, *_ in got if q == p]
        assert offsets == list(range(len(offsets)))
        values = [v for q, _, _, v in got if q == p]
        assert values == sorted(values, key=lambda v: int(v.split()[1]))


def test_topics_create_list_describe_alter_delete(cluster: ClusterUnderTest,
                                                  tools: ToolRunner) -> None:
    topic = uid("tools-topic")
    rf = replicas(cluster)
    assert f"Created topic {topic}." in tools.admin(
        "kafka-topics", "--create", "--topic", topic, "--partitions", "2",
        "--replication-factor", str(rf), "--config", "retention.ms=86400000").ok()
    assert topic in tools.admin("kafka-topics", "--list").ok().split()

    def describe() -> tuple[str, list[list[str]]]:
        out = tools.admin("kafka-topics", "--describe", "--topic", topic).ok()
        head = out.splitlines()[0]
        parts = [dict(re.findall(r"(\w+): ?([^\t]*)", line)) for line in out.splitlines()[1:]
                 if "Partition:" in line]
        return head, [[p["Partition"], p["Leader"], p["Replicas"], p["Isr"]] for p in parts]

    head, parts = describe()
    assert f"Topic: {topic}\tTopicId: " in head
    assert "PartitionCount: 2\t" in head and f"ReplicationFactor: {rf}\t" in head
    assert "retention.ms=86400000" in head
    assert [p[0] for p in parts] == ["0", "1"]
    for _, leader, replica_list, isr in parts:
        assert len(replica_list.split(",")) == rf and leader in replica_list.split(",")
        assert sorted(isr.split(",")) == sorted(replica_list.split(","))

    tools.admin("kafka-topics", "--alter", "--topic", topic, "--partitions", "3").ok()
    head, parts = describe()
    assert "PartitionCount: 3\t" in head and [p[0] for p in parts] == ["0", "1", "2"]

    tools.admin("kafka-topics", "--delete", "--topic", topic).ok()

    async def gone() -> None:      # Kafka deletes in the background
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            deadline = time.monotonic() + 20
            while topic in await admin.list_topics():
                assert time.monotonic() < deadline, f"{topic} is still listed"
                await asyncio.sleep(0.2)

    run(gone())


def test_consumer_groups_list_describe_and_reset(keyed: Keyed,
                                                 tools: ToolRunner) -> None:
    topic, group = keyed.topic, keyed.group
    keyed.consumed.ok()
    assert group in tools.admin("kafka-consumer-groups", "--list").ok().split()

    def offsets() -> dict[int, tuple[str, str, str]]:
        out = tools.admin("kafka-consumer-groups", "--describe", "--group", group).ok()
        table = {int(r[2]): (r[3], r[4], r[5]) for r in rows(out, group) if r[1] == topic}
        assert sorted(table) == [0, 1, 2], out
        return table

    before = offsets()    # CURRENT-OFFSET, LOG-END-OFFSET, LAG
    assert sum(int(end) for _, end, _ in before.values()) == len(RECORDS)
    assert all(cur == end and lag == "0" for cur, end, lag in before.values()), before

    out = tools.admin("kafka-consumer-groups", "--reset-offsets", "--group", group,
                      "--topic", topic, "--to-earliest", "--execute").ok()
    assert sorted((int(r[2]), r[3]) for r in rows(out, group)) == [(0, "0"), (1, "0"), (2, "0")]
    after = offsets()
    assert all(cur == "0" and lag == end for cur, end, lag in after.values()), after


def test_get_offsets(keyed: Keyed, tools: ToolRunner) -> None:
    topic = keyed.topic
    keyed.produced.ok()
    latest = tools.admin("kafka-get-offsets", "--topic", topic).ok().split()
    ends = {int(p): int(o) for t, p, o in (line.split(":") for line in latest) if t == topic}
    assert sorted(ends) == [0, 1, 2] and sum(ends.values()) == len(RECORDS)
    earliest = tools.admin("kafka-get-offsets", "--topic", topic, "--time", "-2").ok().split()
    assert sorted(earliest) == [f"{topic}:{p}:0" for p in range(3)]


def test_configs_of_a_topic(cluster: ClusterUnderTest, tools: ToolRunner) -> None:
    topic = uid("tools-configs")
    run(create_topic(cluster.bootstrap_servers, topic, 1, replicas(cluster)))
    entity = ("--entity-type", "topics", "--entity-name", topic)
    assert f"Completed updating config for topic {topic}." in tools.admin(
        "kafka-configs", *entity, "--alter",
        "--add-config", "retention.ms=3600000,max.message.bytes=2048").ok()
    out = tools.admin("kafka-configs", *entity, "--describe").ok()
    assert f"Dynamic configs for topic {topic} are:" in out
    assert "retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000" in out
    assert "max.message.bytes=2048 sensitive=false" in out

    tools.admin("kafka-configs", *entity, "--alter", "--delete-config", "max.message.bytes").ok()
    out = tools.admin("kafka-configs", *entity, "--describe", "--all").ok()
    assert f"All configs for topic {topic} are:" in out
    assert "retention.ms=3600000 sensitive=false" in out
    assert re.search(r"^\s+max\.message\.bytes=1048588 sensitive=false synonyms=\{.*"
                     r"DEFAULT_CONFIG:message\.max\.bytes=1048588", out, re.M), out


def test_configs_of_a_broker_described(cluster: ClusterUnderTest, tools: ToolRunner) -> None:
    node = str(cluster.node_ids[0])
    out = tools.admin("kafka-configs", "--entity-type", "brokers", "--entity-name", node,
                      "--describe", "--all").ok()
    assert f"All configs for broker {node} are:" in out
    assert re.search(r"^\s+delete\.topic\.enable=true sensitive=false", out, re.M), out
    assert re.search(r"^\s+message\.max\.bytes=1048588 sensitive=false", out, re.M), out


def test_configs_of_a_broker_altered(cluster: ClusterUnderTest, tools: ToolRunner) -> None:
    node = str(cluster.node_ids[0])
    entity = ("--entity-type", "brokers", "--entity-name", node)
    altered = tools.admin("kafka-configs", *entity, "--alter",
                          "--add-config", "log.cleaner.io.max.bytes.per.second=10485760.0")
    assert f"Completed updating config for broker {node}." in altered.ok()
    out = tools.admin("kafka-configs", *entity, "--describe").ok()
    # Kafka prints the value as a Java double (1.048576E7), the synonym as given
    assert re.search(r"^\s+log\.cleaner\.io\.max\.bytes\.per\.second=\S+ sensitive=false "
                     r"synonyms=\{DYNAMIC_BROKER_CONFIG:log\.cleaner\.io\.max\.bytes\.per\.second="
                     r"10485760\.0", out, re.M), out
    tools.admin("kafka-configs", *entity, "--alter", "--delete-config",
                "log.cleaner.io.max.bytes.per.second").ok()


def test_configs_of_replication_throttling(cluster: ClusterUnderTest, tools: ToolRunner) -> None:
    """What ``kafka-reassign-partitions --throttle`` sets, set with kafka-configs: the rates
    per broker and cluster-wide, and a topic's throttled replicas (KIP-73)."""
    node = str(cluster.node_ids[0])
    broker = ("--entity-type", "brokers", "--entity-name", node)
    default = ("--entity-type", "brokers", "--entity-default")
    rate = "leader.replication.throttled.rate"
    assert f"Completed updating config for broker {node}." in tools.admin(
        "kafka-configs", *broker, "--alter", "--add-config", f"{rate}=1000000").ok()
    assert "Completed updating default config for brokers in the cluster." in tools.admin(
        "kafka-configs", *default, "--alter",
        "--add-config", "follower.replication.throttled.rate=2000000").ok()
    out = tools.admin("kafka-configs", *broker, "--describe").ok()
    assert re.search(rf"^\s+{re.escape(rate)}=1000000 sensitive=false "
                     rf"synonyms=\{{DYNAMIC_BROKER_CONFIG:{re.escape(rate)}=1000000\}}",
                     out, re.M), out
    assert "follower.replication" not in out, out   # the tool lists the broker's own alone
    out = tools.admin("kafka-configs", *default, "--describe").ok()
    assert "follower.replication.throttled.rate=2000000 sensitive=false" in out

    topic = uid("tools-throttle")
    run(create_topic(cluster.bootstrap_servers, topic, 1, replicas(cluster)))
    entity = ("--entity-type", "topics", "--entity-name", topic)
    tools.admin("kafka-configs", *entity, "--alter", "--add-config",
                f"leader.replication.throttled.replicas=[0:{node}],"
                "follower.replication.throttled.replicas=*").ok()
    out = tools.admin("kafka-configs", *entity, "--describe").ok()
    assert f"leader.replication.throttled.replicas=0:{node} sensitive=false" in out, out
    assert "follower.replication.throttled.replicas=* sensitive=false" in out, out
    refused = tools.admin("kafka-configs", *broker, "--alter", "--add-config", f"{rate}=-1")
    assert refused.returncode != 0
    tools.admin("kafka-configs", *broker, "--alter", "--delete-config", rate).ok()
    tools.admin("kafka-configs", *default, "--alter",
                "--delete-config", "follower.replication.throttled.rate").ok()
    out = tools.admin("kafka-configs", *broker, "--describe").ok()
    assert "replication.throttled.rate" not in out, out


def test_acls_add_list_remove(cluster: ClusterUnderTest, tools: ToolRunner) -> None:
    topic = uid("tools-acls")
    acl = ("--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    binding = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    added = tools.admin("kafka-acls", "--add", *acl).ok()
    assert f"Adding ACLs for resource `{pattern}`:" in added and binding in added
    listed = tools.admin("kafka-acls", "--list", "--topic", topic).ok()
    assert f"Current ACLs for resource `{pattern}`:" in listed and binding in listed
    tools.admin("kafka-acls", "--remove", "--force", *acl).ok()

    async def remaining() -> int:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            deadline = time.monotonic() + 20
            while True:
                left = await admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic))
                if not left or time.monotonic() > deadline:
                    return len(left)
                await asyncio.sleep(0.2)

    assert run(remaining()) == 0


@pytest.fixture(scope="module")
def committed_txn(cluster: ClusterUnderTest) -> tuple[str, str]:
    """A transactional id whose one transaction (3 records) is committed; its topic."""
    topic, tid = uid("tools-txn"), uid("tools-tid")

    async def main() -> None:
        await create_topic(cluster.bootstrap_servers, topic, 1, replicas(cluster))
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id=tid,
                            acks="all") as p:
            await p.init_transactions()
            p.begin_transaction()
            for i in range(3):
                await p.send(topic, f"txn {i}".encode(), key=b"t", partition=0)
            await p.commit_transaction()

    run(main())
    return tid, topic


def test_transactions_list_and_describe(committed_txn: tuple[str, str],
                                        tools: ToolRunner) -> None:
    tid, _ = committed_txn
    out = tools.admin("kafka-transactions", "list").ok()
    assert out.split()[:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    listed = rows(out, tid)
    assert len(listed) == 1 and listed[0][3] == "CompleteCommit", out
    coordinator, producer_id = listed[0][1], listed[0][2]

    out = tools.admin("kafka-transactions", "describe", "--transactional-id", tid).ok()
    assert out.split()[:5] == ["CoordinatorId", "TransactionalId", "ProducerId",
                               "ProducerEpoch", "TransactionState"]
    described = [r for r in (line.split() for line in out.splitlines()) if tid in r]
    assert len(described) == 1, out
    assert described[0][:3] == [coordinator, tid, producer_id]
    assert described[0][4] == "CompleteCommit"


def test_transactions_describe_producers(cluster: ClusterUnderTest,
                                         committed_txn: tuple[str, str],
                                         tools: ToolRunner) -> None:
    """The producer of the committed transaction, as the partition's leader knows it. In
    transactions v2 (both targets finalize transaction.version 2, and kaflite's producer
    then speaks it) the commit's marker carries the bumped epoch, which clears the
    producer's sequences on the leader (Kafka's ProducerStateEntry does the same): epoch
    1 and no last sequence. In v1: epoch 0 and the last sequence of its 3 records."""
    tid, topic = committed_txn
    listed = rows(tools.admin("kafka-transactions", "list").ok(), tid)
    producer_id = listed[0][2]
    out = tools.admin("kafka-transactions", "describe-producers", "--topic", topic,
                      "--partition", "0").ok()
    lines = [line.split() for line in out.splitlines() if line.strip()]
    header = lines[0]
    assert header[:2] == ["ProducerId", "ProducerEpoch"] and "LastSequence" in header, out
    described = [r for r in lines[1:] if r and r[0] == producer_id]
    assert len(described) == 1, out
    row = dict(zip(header, described[0], strict=False))

    async def finalized() -> dict[str, int]:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            return (await admin.describe_features()).finalized
    v2 = run(finalized()).get("transaction.version", 0) >= 2
    assert (row["ProducerEpoch"], row["LastSequence"]) == (("1", "-1") if v2 else ("0", "2")), out


@dataclass
class Shared:
    """A 1-partition topic of SHARED records, all read and accepted by a share group."""

    topic: str
    group: str


SHARED = 5


@pytest.fixture(scope="module")
def shared(cluster: ClusterUnderTest) -> Shared:
    if isinstance(cluster, ApacheKafka) and cluster.version.startswith("4.0."):
        pytest.skip(f"Kafka {cluster.version} serves no share groups (4.1 and later do)")
    topic, group = uid("tools-share"), uid("tools-share-group")
    servers = cluster.bootstrap_servers

    async def consume() -> None:
        await create_topic(servers, topic, 1, replicas(cluster))
        async with Admin(bootstrap_servers=servers) as admin:
            await admin.alter_configs({ConfigResource(GROUP_RESOURCE, group): {
                "share.auto.offset.reset": "earliest"}})
        async with Producer(bootstrap_servers=servers, acks="all") as p:
            for i in range(SHARED):
                await p.send(topic, f"shared {i}".encode(), partition=0)
        consumer: ShareConsumer[bytes, bytes] = ShareConsumer(
            bootstrap_servers=servers, group_id=group, share_acknowledgement_mode="explicit")
        await consumer.start()
        try:
            consumer.subscribe([topic])
            accepted = 0
            deadline = time.monotonic() + 60
            while accepted < SHARED:
                assert time.monotonic() < deadline, f"{accepted} of {SHARED} records read"
                for r in await consumer.poll(500):
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT)
                    accepted += 1
                await consumer.commit_sync()
        finally:
            await consumer.close()

    run(consume(), timeout=120)
    return Shared(topic, group)


def test_share_groups_list(shared: Shared, tools: ToolRunner) -> None:
    assert shared.group in tools.admin("kafka-share-groups", "--list").ok().split()


def test_log_dirs(cluster: ClusterUnderTest, keyed: Keyed, tools: ToolRunner) -> None:
    topic = keyed.topic
    out = tools.admin("kafka-log-dirs", "--describe", "--topic-list", topic).ok()
    report = json.loads(out.strip().splitlines()[-1])
    assert sorted(b["broker"] for b in report["brokers"]) == sorted(cluster.node_ids)
    sizes: dict[str, list[int]] = {}
    for broker in report["brokers"]:
        for log_dir in broker["logDirs"]:
            assert log_dir["error"] is None
            for p in log_dir["partitions"]:
                sizes.setdefault(p["partition"], []).append(p["size"])
    assert sorted(sizes) == [f"{topic}-{p}" for p in range(3)]
    assert all(len(s) == replicas(cluster) for s in sizes.values())
    assert sum(max(s) for s in sizes.values()) > 0


def test_features_describe(tools: ToolRunner) -> None:
    out = tools.admin("kafka-features", "describe").ok()
    features = dict(re.findall(r"^Feature: (\S+)\s+SupportedMinVersion: \S+\s+"
                               r"SupportedMaxVersion: \S+\s+FinalizedVersionLevel: (\S+)",
                               out, re.M))
    assert int(features.get("group.version", "0")) >= 1, out   # KIP-848 groups are on
    # both finalize Kafka 4.4's latest production metadata.version
    assert features.get("metadata.version") == "4.4-IV2", out


def test_features_refuse_a_metadata_version_downgrade(tools: ToolRunner) -> None:
    """kafka-features downgrade of metadata.version, as a dry run (validate only): both refuse to
    go below 4.4-IV2, whose metadata changed, with the controller's words, and an
    unsafe downgrade too; the level they are at is accepted."""
    safe = tools.admin("kafka-features", "downgrade", "--feature", "metadata.version=32",
                       "--dry-run")
    unsafe = tools.admin("kafka-features", "downgrade", "--feature", "metadata.version=25",
                         "--unsafe", "--dry-run")
    assert safe.returncode != 0 and unsafe.returncode != 0, (safe, unsafe)
    assert ("Unsupported metadata.version downgrade from 33 to 32. Refusing to perform the "
            "requested downgrade because it might delete metadata information."
            in safe.stdout + safe.stderr), safe
    assert ("Unsupported metadata.version downgrade from 33 to 25. Unsafe metadata "
            "downgrade is not supported in this version." in unsafe.stdout + unsafe.stderr), unsafe
    same = tools.admin("kafka-features", "upgrade", "--feature", "metadata.version=33",
                       "--dry-run").ok()
    assert "metadata.version" in same, same


def test_metadata_quorum_status(cluster: ClusterUnderTest, tools: ToolRunner) -> None:
    out = tools.admin("kafka-metadata-quorum", "describe", "--status").ok()
    status = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    assert int(status["LeaderId"]) >= 0 and int(status["HighWatermark"]) > 0, out
    assert "CurrentVoters" in status, out


# -- kafka-dump-log on the brokers' own segment files ---------------------------------------

def settled_segments(cluster: ClusterUnderTest, topic: str, partition: int) -> list[Path]:
    """Every replica's .log files of one partition, once all replicas hold the same bytes
    (a follower may still be fetching the last batch)."""
    deadline = time.monotonic() + 20
    while True:
        dirs = partition_dirs(cluster, topic, partition)
        sizes = {n: sum(f.stat().st_size for f in d.glob("*.log")) for n, d in dirs.items()}
        if len(dirs) == replicas(cluster) and len(set(sizes.values())) == 1:
            return sorted(f for d in dirs.values() for f in d.glob("*.log"))
        assert time.monotonic() < deadline, f"{topic}-{partition}: replica sizes {sizes}"
        time.sleep(0.1)


def dump(tools: ToolRunner, files: list[Path]) -> dict[Path, list[Batch]]:
    """Dump every file in one JVM; the batches of each, by path."""
    out = tools("kafka-dump-log", "--files", ",".join(map(str, files)), "--deep-iteration",
                "--print-data-log").ok()
    by_path = {Path(name): batches for name, batches in dump_batches(out).items()}
    assert sorted(by_path) == sorted(files), out
    return by_path


def test_dump_log_reads_the_console_producers_records(cluster: ClusterUnderTest,
                                                      keyed: Keyed,
                                                      tools: ToolRunner) -> None:
    topic = keyed.topic
    keyed.produced.ok()
    files = [f for p in range(3) for f in settled_segments(cluster, topic, p)]
    dumped = dump(tools, files)
    records: dict[int, list[tuple[int, str | None, str | None]]] = {}
    for path, batches in dumped.items():
        partition = int(path.parent.name.rsplit("-", 1)[1])
        assert all(b.valid for b in batches), f"{path}: a batch with a bad CRC"
        got = []
        for b in batches:
            assert not b.control and not b.transactional
            assert [r.offset for r in b.records] == list(range(b.base_offset, b.last_offset + 1))
            assert b.count == len(b.records)
            got += [(r.offset, r.key, r.value) for r in b.records]
        assert [o for o, *_ in got] == list(range(len(got))), f"{path}: offsets {got}"
        if partition in records:     # a follower's copy: the same records at the same offsets
            assert got == records[partition], path
        records[partition] = got
    assert sorted((k, v) for got in records.values() for _, k, v in got) == sorted(RECORDS)


def internal_segments(cluster: ClusterUnderTest, internal: str, key: str) -> list[Path]:
    """The .log files of every replica of the partition of ``internal`` that owns ``key``."""
    count = len({d.name for root in log_dirs(cluster).values()
                 for d in root.glob(f"{internal}-*") if d.is_dir()})
    assert count, f"no {internal} partitions"
    dirs = partition_dirs(cluster, internal, coordinator_partition(key, count))
    return sorted(f for d in dirs.values() for f in d.glob("*.log"))


def test_dump_log_decodes_the_group_offsets(keyed: Keyed, tools: ToolRunner,
                                            cluster: ClusterUnderTest) -> None:
    """kafka-dump-log --offsets-decoder on __consumer_offsets: the group's records, as
    written by the coordinator, decoded by Kafka's own record schemas."""
    keyed.consumed.ok()
    files = internal_segments(cluster, "__consumer_offsets", keyed.group)
    out = tools("kafka-dump-log", "--files", ",".join(map(str, files)), "--offsets-decoder").ok()
    for complaint in ("Failed to decode", "Unknown record type", "Error at offset"):
        assert complaint not in out, out
    committed: dict[int, list[int]] = {}
    protocol_types: list[str] = []    # the first is "" (the group as created: Kafka's too)
    for path, batches in dump_batches(out).items():
        assert all(b.valid for b in batches), path
        for r in (r for b in batches for r in b.records if r.key and not r.marker):
            key = json.loads(r.key)
            if key["data"].get("group") != keyed.group:
                continue
            if key["type"] == "2":      # the group's metadata (classic protocol)
                protocol_types.append(json.loads(r.value or "{}")["data"]["protocolType"])
            elif key["type"] in ("0", "1") and key["data"]["topic"] == keyed.topic:
                value = json.loads(r.value or "{}")
                committed.setdefault(key["data"]["partition"], []).append(
                    value["data"]["committedOffset"] if "committedOffset" in value["data"]
                    else value["data"]["offset"])
    assert protocol_types[-1] == "consumer", out
    assert sorted(committed) == [0, 1, 2], out
    assert sum(max(offsets) for offsets in committed.values()) == len(RECORDS), committed


def topic_id_of(cluster: ClusterUnderTest, topic: str) -> str:
    """The topic id (base64, as Kafka prints it) from a replica's partition.metadata."""
    for d in partition_dirs(cluster, topic, 0).values():
        for line in (d / "partition.metadata").read_text().splitlines():
            name, _, value = line.partition(":")
            if name.strip() == "topic_id":
                return value.strip()
    raise AssertionError(f"no partition.metadata for {topic}")


def decoded_records(out: str, group_field: str, group: str) -> list[tuple[dict[str, object],
                                                                         dict[str, object]]]:
    """(key, value) of each decoded record of ``group`` in a kafka-dump-log output, the
    value ``{}`` for a tombstone; no record may have failed to decode."""
    for complaint in ("Failed to decode", "Unknown record type", "Error at offset"):
        assert complaint not in out, out
    found = []
    for _, batches in dump_batches(out).items():
        assert all(b.valid for b in batches)
        for r in (r for b in batches for r in b.records if r.key and not r.marker):
            key = json.loads(r.key)
            if key["data"].get(group_field) == group:
                value = {} if r.value in (None, "<DELETE>") else json.loads(r.value or "{}")
                found.append((key, value))
    return found


def test_dump_log_decodes_a_share_groups_records(shared: Shared, tools: ToolRunner,
                                                 cluster: ClusterUnderTest) -> None:
    """kafka-dump-log decodes the share group's records in __consumer_offsets
    (--offsets-decoder) and its share-partition's state in __share_group_state
    (--share-group-state-decoder) with Kafka's own schemas (their version 0 layouts
    changed in Kafka 4.1): every record reads, and the state shows all SHARED records
    acknowledged."""
    files = internal_segments(cluster, "__consumer_offsets", shared.group)
    out = tools("kafka-dump-log", "--files", ",".join(map(str, files)), "--offsets-decoder").ok()
    group = decoded_records(out, "groupId", shared.group)
    types = {str(k["type"]) for k, _ in group}
    # 10 member, 11 group epoch, 14 current assignment, 15 initialized share state
    assert {"10", "11", "14", "15"} <= types, out
    epochs = [v["data"] for k, v in group if k["type"] == "11" and v]
    assert epochs and all(e["epoch"] >= 1 for e in epochs), out    # type: ignore[index]
    initialized = [v["data"]["initializedTopics"] for k, v in group    # type: ignore[index]
                   if k["type"] == "15" and v]
    assert any(t["topicName"] == shared.topic and t["partitions"] == [0]
               for topics in initialized for t in topics), out

    topic_id = topic_id_of(cluster, shared.topic)
    files = internal_segments(cluster, "__share_group_state", f"{shared.group}:{topic_id}:0")
    out = tools("kafka-dump-log", "--files", ",".join(map(str, files)),
                "--share-group-state-decoder").ok()
    state = [(k, v) for k, v in decoded_records(out, "groupId", shared.group)
             if k["data"]["topicId"] == topic_id and v]    # type: ignore[index]
    assert any(k["type"] == "0" for k, _ in state), out     # a ShareSnapshot
    # the last record's state: start offset past every record, or each acknowledged
    last = state[-1][1]["data"]
    acked = {o for b in last["stateBatches"] if b["deliveryState"] == 2    # type: ignore[index]
             for o in range(b["firstOffset"], b["lastOffset"] + 1)}
    assert all(o < last["startOffset"] or o in acked for o in range(SHARED)), out  # type: ignore[index]


def test_dump_log_shows_the_commit_marker(cluster: ClusterUnderTest,
                                          committed_txn: tuple[str, str],
                                          tools: ToolRunner) -> None:
    _, topic = committed_txn
    for path, batches in dump(tools, settled_segments(cluster, topic, 0)).items():
        assert all(b.valid for b in batches), path
        data = [b for b in batches if not b.control]
        markers = [b for b in batches if b.control]
        assert all(b.transactional for b in batches), path
        assert [r.value for b in data for r in b.records] == ["txn 0", "txn 1", "txn 2"]
        assert [r.marker for b in markers for r in b.records] == ["COMMIT"], path
        assert markers[0].base_offset == 3


def test_dump_log_and_indexes_of_rolled_segments(cluster: ClusterUnderTest,
                                                 tools: ToolRunner) -> None:
    """A topic of 1 MiB segments (Kafka 4's smallest) and 1.2 MiB of records: the first
    segment is rolled, and every replica's offset and time indexes of it are checked
    against it. The records are sent one at a time, so that each Produce carries one
    batch and the index has an entry per 4 KiB, as Kafka's would."""
    topic = uid("tools-rolled")
    servers = cluster.bootstrap_servers

    async def fill() -> int:
        await create_topic(servers, topic, 1, replicas(cluster),
                           {"segment.bytes": "1048576", "index.interval.bytes": "4096"})
        async with Producer(bootstrap_servers=servers, acks="all") as p:
            for i in range(120):
                await p.send(topic, f"{i:05d}".encode() * 2000, key=str(i).encode(), partition=0)
        async with Admin(bootstrap_servers=servers) as admin:
            return (await admin.describe_topics([topic]))[topic].partitions[0].leader

    leader = run(fill())
    settled_segments(cluster, topic, 0)
    replica_dirs = partition_dirs(cluster, topic, 0)
    directory = replica_dirs[leader]
    first = directory / "00000000000000000000.log"
    assert len(list(directory.glob("*.log"))) >= 2, sorted(os.listdir(directory))
    batches = dump(tools, [first])[first]
    assert batches and all(b.valid for b in batches)
    offsets = [r.offset for b in batches for r in b.records]
    assert offsets == list(range(len(offsets))) and 0 < len(offsets) < 120

    indexes = [d / f"00000000000000000000.{kind}" for d in replica_dirs.values()
               for kind in ("index", "timeindex")]
    out = tools("kafka-dump-log", "--files", ",".join(map(str, indexes))).ok()
    for complaint in ("Mismatches in", "not found in", "Found out of order", "Found timestamp"):
        assert complaint not in out, out
    for section in out.split("Dumping ")[1:]:    # every replica's, the leader's first
        name, _, body = section.partition("\n")
        if name.endswith(".index"):
            entries = re.findall(r"^offset: (\d+) position: (\d+)$", body, re.M)
            assert len(entries) > len(offsets) // 2, section
            assert int(entries[-1][0]) <= offsets[-1]
        else:
            assert re.search(r"^timestamp: (\d+) offset: (\d+)$", body, re.M), section
