"""Apache Kafka's own Java client (``kafka-clients``, the version ``tools/ensure_kafka.sh``
fetched) against each target: the idempotent producer and a consumer of each group
protocol (classic, and KIP-848's ``consumer``), a transactional producer read back
under read_committed, ``KafkaShareConsumer`` (KIP-932), and a session over the Admin
client's methods. The drivers are ``java/KafkaDriver.java`` and ``java/AdminDriver.java``,
each run as a single source file, so they are compiled against the fetched jars at
each run.

The admin session is differential: its normalized answers on kaflite are compared with
Apache Kafka's for the same number of brokers, key by key, by
``test_java_admin_agrees_with_kafka`` once every target has run (the targets run one
after the other, so each run leaves its answers in ``ADMIN_RESULTS``). A difference
fails the test unless ``ADMIN_DIFFERENCES`` lists it with its reason.

On kaflite's cluster, which finalizes ``transaction.version`` 2 as Kafka 4.x does, the
Java producer runs transactions v2 (KIP-890): its partitions are added by their
leaders, so the brokers never see an AddPartitionsToTxn from it."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import pytest

from kaflite.testing import ClusterUnderTest, KafliteCluster
from kaflite.testing._kafka_node import JVM_OPTS, java_executable
from tests.interop._clients import uid
from tests.interop.conftest import TARGETS, unavailable

pytestmark = pytest.mark.interop

DRIVER = Path(__file__).parent / "java" / "KafkaDriver.java"
ADMIN_DRIVER = Path(__file__).parent / "java" / "AdminDriver.java"
RECORDS = 200
SHARED, SPLIT = 100, 40     # the share consumer's records: read by one member, then by two


def drive(libs: Path, log: Path, *args: str, driver: Path = DRIVER) -> dict[str, str]:
    """Run a driver; its ``RESULT key=value`` lines."""
    cmd = [java_executable(), *JVM_OPTS, f"-Dlog4j2.configurationFile={libs.parent}/log4j2.properties",
           f"-Dkaflite.kafka.log={log}", "-cp", f"{libs}/*", str(driver), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    logged = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    assert proc.returncode == 0, f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}\n{logged}"
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            key, _, value = line.removeprefix("RESULT ").partition("=")
            out[key] = value
    return out


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_java_producer_and_group_consumer(target: ClusterUnderTest, kafka_libs: Path,
                                          tmp_path: Path, protocol: str) -> None:
    got = drive(kafka_libs, tmp_path / "java-client.log", "groups", target.bootstrap_servers,
                uid(f"java-{protocol}"), protocol, str(RECORDS))
    assert got["brokers"] == str(len(target.node_ids))
    assert got["produced"] == str(RECORDS)
    assert got["distinct"] == str(RECORDS)
    assert got["consumed"] == str(RECORDS), "a record was consumed twice"
    assert got["assigned"] == "3"
    assert got["committed"] == str(RECORDS)


def test_java_transactions_read_committed(target: ClusterUnderTest, kafka_libs: Path,
                                          tmp_path: Path) -> None:
    got = drive(kafka_libs, tmp_path / "java-client.log", "transactions",
                target.bootstrap_servers, uid("java-txn"))
    assert got["read_committed"].split(",") == sorted(f"c{i}" for i in range(11))
    if isinstance(target, KafliteCluster):
        sent = next(c.requests for c in target.cluster.clients(include_closed=True)
                    if c.client_id == "java-driver")
        assert sent.get("EndTxn", 0) >= 3 and "AddPartitionsToTxn" not in sent, sent


def test_java_share_consumer(target: ClusterUnderTest, kafka_libs: Path, tmp_path: Path) -> None:
    """KafkaShareConsumer with explicit acknowledgement: the group (set to read from the
    earliest offset by a group config) gets every record once; the three released ones
    come back once with their delivery count raised, the rejected one never; then two
    members share the one partition and split what follows, each record once."""
    got = drive(kafka_libs, tmp_path / "java-share.log", "share", target.bootstrap_servers,
                uid("java-share"), str(SHARED), str(SPLIT))
    assert got["accepted"] == got["accepted_distinct"] == str(SHARED - 1)
    assert got["rejected_deliveries"] == "1"
    assert got["released_deliveries"] == "s3:1,s3:2,s5:1,s5:2,s7:1,s7:2"
    assert got["members_assigned"] == "2"
    assert got["split_distinct"] == str(SPLIT) and got["split_twice"] == "0"
    assert got["split_both"] == "true", got["split_counts"]


# -- the Admin client, kaflite against Apache Kafka ---------------------------------------

# (kind, brokers) -> the admin session's answers; filled by each target's run
ADMIN_RESULTS: dict[tuple[str, int], dict[str, str]] = {}

# The known differences: a key (an fnmatch pattern) -> why kaflite's answer is not
# Kafka's. A pattern that matches no difference on any pair of targets compared fails
# the comparison too: it was fixed, take it out.
_FEATURES = ("kaflite supports metadata.version from 22 (Kafka 4.4: from 7) and finalizes "
             "33 as Kafka 4.4; it has share.version to 1 (Kafka 2) and no kraft.version, "
             "streams.version or eligible.leader.replicas.version above 0 "
             "(docs/compatibility.md, docs/architecture.md)")
_EPOCHS = ("Kafka 4.4 computes a group's target assignment on a schedule of its own "
           "(group.consumer.assignment.interval.ms and group.share.assignment.interval.ms, "
           "1 s, with the assignor offloaded: new in 4.4's GroupCoordinatorConfig): a join "
           "leaves the group epoch at 2 (consumer) or 3 (share, whose partitions are "
           "initialized first), and the last member's leave moves the target epoch along. "
           "kaflite assigns in the heartbeat that changes the group, as Kafka did up to 4.3: "
           "epoch 1, and a consumer group's target epoch stays when its last member leaves. "
           "States, members and assignments agree")
ADMIN_DIFFERENCES = {
    # what kaflite does not serve yet (issue 38)
    "admin.describeFeatures.supported.metadata.version": _FEATURES,
    "admin.describeFeatures.*.share.version": _FEATURES,
    "admin.describeFeatures.supported.kraft.version": _FEATURES,
    "admin.describeFeatures.*.streams.version": _FEATURES,
    "admin.describeFeatures.*.eligible.leader.replicas.version": _FEATURES,
    # configs
    "admin.*.min.insync.replicas": "Kafka 4.4 formats the cluster with min.insync.replicas "
                                   "as a cluster-wide dynamic default (source "
                                   "DYNAMIC_DEFAULT_BROKER_CONFIG); kaflite reports its static "
                                   "default (DEFAULT_CONFIG). The value agrees",
    # the group coordinators
    "admin.describe*Groups*.epochs": _EPOCHS,
    "admin.listShareGroupOffsets": "once its member has acknowledged all five records, "
                                   "Kafka 4.4's summary keeps the start offset at 0 (the "
                                   "acknowledged records persisted as a state batch), also "
                                   "after the member leaves; kaflite's has moved it to 5. "
                                   "Both answer lag 0",
    "admin.listShareGroupOffsets.left": "the same",
    # the targets' shapes
    "admin.describeMetadataQuorum": "kaflite's brokers follow one controller (1 voter, the "
                                    "other brokers observers); the Kafka target runs every "
                                    "node as a combined broker and controller (all voters)",
}


def _kind(target: ClusterUnderTest) -> tuple[str, int]:
    return ("kaflite" if isinstance(target, KafliteCluster) else "kafka", len(target.node_ids))


def test_java_admin_session(target: ClusterUnderTest, kafka_libs: Path, tmp_path: Path) -> None:
    """Every Admin method, one scripted session (java/AdminDriver.java); its answers are
    kept for the comparison below, and checked here for what must hold on any broker."""
    got = drive(kafka_libs, tmp_path / "java-admin.log", "admin", target.bootstrap_servers,
                uid("jadm"), driver=ADMIN_DRIVER)
    ADMIN_RESULTS[_kind(target)] = got
    assert got["brokers"] == str(len(target.node_ids))
    assert got["admin.createTopics"].startswith("{P-a=ok, P-b=ok, P-c=ok, P-d=ok, P-r=ok, P-s=ok}")
    assert got["admin.describeTopics.byId"] == "P-b partitions=1 sameId=true"
    assert got["admin.deleteTopics.listed"] == "[P-a, P-b, P-r, P-s]"
    assert got["share_read"] == "5"


def _differing(kaflite: dict[str, str], kafka: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {k: (kaflite.get(k, "(missing)"), kafka.get(k, "(missing)"))
            for k in sorted(kaflite.keys() | kafka.keys()) if kaflite.get(k) != kafka.get(k)}


def _allowed(key: str) -> str | None:
    return next((p for p in ADMIN_DIFFERENCES if fnmatch.fnmatchcase(key, p)), None)


def test_java_admin_agrees_with_kafka() -> None:
    """kaflite's answers against Apache Kafka's, for each number of brokers both ran."""
    sizes = sorted({n for kind, n in ADMIN_RESULTS if kind == "kaflite"})
    if not sizes:
        pytest.skip("no admin session ran against kaflite (deselected, or it failed)")
    missing = [n for n in sizes if ("kafka", n) not in ADMIN_RESULTS]
    if missing:
        unavailable("Apache Kafka", f"no admin session ran against Kafka with {missing} "
                                    "broker(s): the comparison needs both")
    unexplained: list[str] = []
    seen_patterns: set[str] = set()
    for n in sizes:
        for key, (ours, theirs) in _differing(ADMIN_RESULTS[("kaflite", n)],
                                              ADMIN_RESULTS[("kafka", n)]).items():
            pattern = _allowed(key)
            # every difference, for the report (pytest shows it with -rA, or on a failure)
            print(f"{n} broker(s) {key} [{pattern or 'NOT LISTED'}]\n  kaflite: {ours}\n"
                  f"  kafka:   {theirs}")
            if pattern is None:
                unexplained.append(f"{n} broker(s) {key}:\n  kaflite: {ours}\n  kafka:   {theirs}")
            else:
                seen_patterns.add(pattern)
    assert not unexplained, "kaflite's Admin answers differ from Kafka's:\n" + \
        "\n".join(unexplained)
    every_size = {int(t.split("-")[1].removesuffix("p")) for t in TARGETS}
    if every_size <= set(sizes):
        stale = sorted(set(ADMIN_DIFFERENCES) - seen_patterns)
        assert not stale, f"listed differences that no longer show (fixed? take them out): {stale}"


def test_java_producer_pushes_telemetry_to_kaflite(kafka_libs: Path, tmp_path: Path) -> None:
    """KIP-714 with Kafka 4.4's Java producer and its defaults: it asks kaflite for its
    subscription, pushes the producer metrics the subscription names at its interval,
    and kaflite decodes them onto the producer's connection in the registry."""
    import asyncio
    import time

    from kaflite.client import Admin
    from kaflite.client.admin import ConfigResource
    from kaflite.cluster import Cluster

    with Cluster(brokers=1) as cluster:
        async def subscribe() -> None:
            async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
                await admin.alter_configs({ConfigResource(16, "java-sub"): {
                    "metrics": "org.apache.kafka.producer.", "interval.ms": "500",
                    "match": "client_id=java-telemetry"}})
        asyncio.run(subscribe())
        log = tmp_path / "java-telemetry.log"
        cmd = [java_executable(), *JVM_OPTS,
               f"-Dlog4j2.configurationFile={kafka_libs.parent}/log4j2.properties",
               f"-Dkaflite.kafka.log={log}", "-cp", f"{kafka_libs}/*", str(DRIVER),
               "telemetry", cluster.bootstrap_servers, uid("java-telemetry"), "8000"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pushed = None
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                seen = [c for c in cluster.connections(client_id="java-telemetry")
                        if c.telemetry_pushes >= 3]
                if seen:
                    pushed = seen[0]
                    break
                time.sleep(0.2)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, f"{out[-2000:]}\n{err[-3000:]}"
        assert pushed is not None, [c.to_dict() for c in cluster.connections(
            client_id="java-telemetry", include_closed=True)]
        assert pushed.software_name == "apache-kafka-java"
        assert pushed.client_instance_id
        names = {k.partition("{")[0] for k in pushed.telemetry}
        assert names and all(n.startswith("org.apache.kafka.producer.") for n in names), names
        assert "org.apache.kafka.producer.record.send.total" in names, sorted(names)
        assert "partition-leader" in pushed.roles
