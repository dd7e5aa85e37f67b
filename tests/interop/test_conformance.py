"""Differential conformance (issue 37 §4): a client's session with a one-node Apache
Kafka, recorded through ``kaflite proxy``, is replayed request by request against a
one-broker kaflite, and every answer is compared field by field
(``kaflite.testing.conformance``: the normalisation is documented there).

Every difference must be in ``EXPLAINED``, with its reason; any other fails the test,
and so does an explained one that no longer shows (it was fixed: take it out).
The table of what agreed is printed, for ``docs/compatibility.md``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kaflite.client import Admin, ConfigResource, Consumer, NewTopic, Producer, TopicPartition
from kaflite.proxy import Proxy
from kaflite.testing import ClusterUnderTest
from kaflite.testing.conformance import Recorded, Recorder, replay, scorecard
from tests.interop._clients import run
from tests.interop.conftest import make_target, started
from tests.interop.test_java_client import drive

pytestmark = pytest.mark.interop

# (API, field path pattern) -> (why the two brokers differ there, whether it shows in
# every run). A difference that always shows and no longer does was fixed: take it out.
NOT_SERVED = ("kaflite does not serve it, by decision (docs/architecture.md): KRaft's "
              "AddRaftVoter and RemoveRaftVoter (80-81) and UnregisterController (94), "
              "and the Streams group APIs (88-89, 93)")
EXPLAINED: dict[tuple[str, str], tuple[str, bool]] = {
    ("ApiVersions", "api_keys[api_key=17].min_version"): (
        "Kafka 4.4's broker advertises SaslHandshake from v1; kaflite keeps v0 and "
        "its bare SASL tokens, for the oldest clients", True),
    ("ApiVersions", "api_keys[api_key=27].min_version|api_keys[api_key=29].min_version"): (
        "KIP-896: Kafka 4.x removed WriteTxnMarkers v0 and DescribeAcls v0; "
        "kaflite still serves them", True),
    ("ApiVersions", "api_keys[api_key=30].min_version|api_keys[api_key=31].min_version"): (
        "KIP-896: Kafka 4.x removed CreateAcls v0 and DeleteAcls v0; kaflite still "
        "serves them", True),
    ("ApiVersions", "api_keys[api_key=7*].min_version"): (
        "Kafka 4.4's share-group APIs start at v1 (KIP-932 as released); kaflite also "
        "serves v0, the 4.0 early-access version", True),
    ("ApiVersions", "api_keys[api_key=*]"): (NOT_SERVED, True),
    ("ApiVersions", "supported_features*"): (
        "kaflite's features: metadata.version from 22 (4.0-IV0, its oldest log; Kafka "
        "4.4: from 7, 3.3-IV3) to 33 (4.4-IV2, as Kafka 4.4); share.version to 1 (no "
        "dead-letter queues, Kafka 4.4: 2); kraft.version, streams.version and "
        "eligible.leader.replicas.version at 0 only (no dynamic quorum, no Streams "
        "groups, no ELR; Kafka 4.4: 1)",
        True),
    ("ApiVersions", "finalized_features*"): (
        "the finalized levels follow the supported ones (above: metadata.version 33 on "
        "both, share.version 1 against 2, no ELR or Streams); the epoch is "
        "each cluster's own count of feature changes", True),
    ("CreateTopics", "topics[name=*].configs[name=min.insync.replicas].config_source"): (
        "Kafka 4.4 reports min.insync.replicas as a cluster-wide dynamic default "
        "(source 3), set when its cluster was formatted; kaflite as the static "
        "default (source 5)", True),
    ("DescribeConfigs", "results[*].configs[name=min.insync.replicas].config_source"): (
        "as for CreateTopics", True),
    ("CreateTopics", "topics[name=*].configs[name=*]"): (
        "topic configs kaflite does not implement: tiered storage (remote.*, local.*), "
        "compression levels (KIP-390), max.decompressed.message.bytes, replication "
        "throttles, errors.deadletterqueue.group.enable", True),
    ("DescribeConfigs", "results[*].configs[name=*]"): ("as for CreateTopics", True),
    ("InitProducerId", "*"): (
        "timing: a freshly formatted Kafka answers its first InitProducerId "
        "COORDINATOR_LOAD_IN_PROGRESS while it allocates its first block of producer "
        "ids; the client retries", False),
    ("AddPartitionsToTxn", "results_by_topic_v3_and_below[*].partition_error_code"): (
        "timing: both brokers complete a transaction after answering EndTxn; Kafka's "
        "markers go through its inter-broker channel and were still being written "
        "(CONCURRENT_TRANSACTIONS, which the client retries), kaflite's were done", False),
}


@pytest.fixture(scope="module")
def kafka1(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    yield from started(make_target("kafka-1", request))


@pytest.fixture(scope="module")
def kaflite1(request: pytest.FixtureRequest) -> Iterator[ClusterUnderTest]:
    yield from started(make_target("kaflite-1", request))


# Recent record timestamps: older ones are past retention.ms, and the brokers' retention
# checks (Kafka's first comes 30 s after it starts) would delete them mid-session.
BASE_MS = int(time.time() * 1000) - 60_000


async def session(servers: str, java: Callable[[str], None]) -> None:
    """What an application does in its first minutes: admin, produce, consume in a
    group of each protocol, a transaction, and a few mistakes."""
    topic, other = "conf-main", "conf-other"
    async with Admin(bootstrap_servers=servers, client_id="conf-admin") as admin:
        await admin.create_topics([NewTopic(topic, 3, 1), NewTopic(other, 1, 1)])
        await admin.describe_cluster()
        for _ in range(50):      # Kafka's brokers learn a new topic a moment later
            with contextlib.suppress(Exception):
                await admin.describe_topics([topic, other])
                break
            await asyncio.sleep(0.1)
        await admin.describe_configs([ConfigResource(2, topic)])
        await admin.alter_configs({ConfigResource(2, other): {"retention.ms": "86400000"}})
        for mistake in (admin.create_topics([NewTopic(topic, 3, 1)]),
                        admin.create_topics([NewTopic("conf-bad", 0, 1)]),
                        admin.describe_topics(["conf-missing"])):
            with contextlib.suppress(Exception):
                await mistake
    async with Producer(bootstrap_servers=servers, client_id="conf-producer", acks="all",
                        enable_idempotence=True, linger_ms=0) as p:
        for i in range(12):
            await p.send(topic, f"v{i}".encode(), key=f"k{i % 4}".encode(),
                         partition=i % 3, timestamp=BASE_MS + i)
    for protocol, group in (("classic", "conf-classic"), ("consumer", "conf-848")):
        async with Consumer(bootstrap_servers=servers, group_id=group,
                            client_id=f"conf-{protocol}", group_protocol=protocol,
                            auto_offset_reset="earliest", enable_auto_commit=False) as c:
            c.subscribe([topic])
            got = 0
            for _ in range(100):
                got += len(await c.poll(300))
                if got >= 12:
                    break
            await c.commit()
    async with Producer(bootstrap_servers=servers, client_id="conf-txn",
                        transactional_id="conf-tid") as t:
        await t.init_transactions()
        t.begin_transaction()
        await t.send(other, b"committed", partition=0, timestamp=BASE_MS + 1000)
        await t.commit_transaction()
        t.begin_transaction()
        await t.send(other, b"aborted", partition=0, timestamp=BASE_MS + 2000)
        await t.abort_transaction()
    async with Consumer(bootstrap_servers=servers, client_id="conf-reader",
                        isolation_level="read_committed") as c:
        tp = TopicPartition(other, 0)
        c.assign([tp])
        c.seek(tp, 0)
        for _ in range(10):
            if await c.poll(300):
                break
        await c.end_offsets([tp])
    await asyncio.to_thread(librdkafka_session, servers, topic)
    await asyncio.to_thread(java, servers)
    async with Admin(bootstrap_servers=servers, client_id="conf-admin") as admin:
        await admin.list_groups()
        await admin.describe_groups(["conf-classic"])
        await admin.list_group_offsets("conf-classic")
        await admin.list_group_offsets("conf-848")
        await admin.list_offsets({TopicPartition(topic, 0): "earliest",
                                  TopicPartition(topic, 1): "latest"})
        await admin.list_transactions()
        await admin.describe_transactions(["conf-tid"])
        await admin.describe_features()
        await admin.delete_groups(["conf-classic"])
        await admin.delete_topics([topic, other])


def librdkafka_session(servers: str, topic: str) -> None:
    """The same with librdkafka (confluent-kafka): its own request versions and pacing."""
    import confluent_kafka as ck

    p = ck.Producer({"bootstrap.servers": servers, "client.id": "conf-rdkafka",
                     "enable.idempotence": True, "linger.ms": 0})
    for i in range(6):
        p.produce(topic, f"rd{i}".encode(), key=b"rd", partition=i % 3,
                  timestamp=BASE_MS + 3000 + i)
    assert p.flush(30) == 0
    c = ck.Consumer({"bootstrap.servers": servers, "client.id": "conf-rdkafka",
                     "group.id": "conf-rdkafka", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    for _ in range(100):
        msg = c.poll(0.3)
        if msg is not None and msg.error() is None:
            got += 1
            if got >= 18:
                break
    c.commit(asynchronous=False)
    c.close()


def _matches(api: str, path: str) -> tuple[str, str] | None:
    """The first explanation whose pattern matches: ``*`` is any text, ``|``
    separates alternatives, everything else is literal (brackets included)."""
    for (pattern_api, pattern), (why, _) in EXPLAINED.items():
        alternatives = "|".join(".*".join(map(re.escape, alt.split("*")))
                                for alt in pattern.split("|"))
        if pattern_api == api and re.fullmatch(alternatives, path):
            return pattern, why
    return None


def test_a_session_recorded_on_kafka_gets_the_same_answers_from_kaflite(
        kafka1: ClusterUnderTest, kaflite1: ClusterUnderTest, kafka_libs: Path,
        tmp_path: Path) -> None:
    def java(servers: str) -> None:
        """Kafka's own Java client: an idempotent producer and a KIP-848 consumer, then
        a transaction read back under read_committed (tests/interop/java)."""
        got = drive(kafka_libs, tmp_path / "java.log", "groups", servers, "conf-java",
                    "consumer", "30")
        assert got["consumed"] == "30", got
        drive(kafka_libs, tmp_path / "java.log", "transactions", servers, "conf-java-txn")

    recorder = Recorder()
    with Proxy(kafka1.bootstrap_servers, filters=[recorder]) as proxy:
        run(session(proxy.bootstrap_servers, java), timeout=240)
    recording: list[Recorded] = recorder.exchanges
    # Every client went through the proxy, Kafka 4.4's Java client included (it once
    # went around it: the proxy passed on an ApiVersions v5 it could not read)
    java = {r.api_key for r in recording if r.client_id == "java-driver"}
    assert {0, 1, 3, 19, 68} <= java, sorted(java)   # Produce, Fetch, Metadata, ...
    unanswered = [(r.seq, r.api_key, r.client_id) for r in recording if r.response is None]
    print("requests the client closed its connection on before an answer:", unanswered)
    outcomes = run(replay(recording, kaflite1.bootstrap_servers.split(",")[0]), timeout=180)
    unexplained: list[str] = []
    used: set[tuple[str, str]] = set()
    lines = []
    for (api, version), results in scorecard(outcomes).items():
        differing = 0
        for o in results:
            if o.error:
                unexplained.append(f"{api} v{version} #{o.recorded.seq}: {o.error}")
            for d in o.diffs:
                found = _matches(api, d.path)
                if found is None:
                    unexplained.append(f"{api} v{version} #{o.recorded.seq}: {d}")
                else:
                    used.add((api, found[0]))
            differing += bool(o.diffs)
        lines.append(f"| {api} | {version} | {len(results)} | {len(results) - differing} |")
    print("\n".join(lines))
    report = os.environ.get("KAFLITE_CONFORMANCE_REPORT")
    if report:
        with open(report, "w") as f:
            for o in outcomes:
                r = o.recorded
                f.write(f"#{r.seq} c{r.connection} {r.sent_at:.3f} api {r.api_key} v{r.version} "
                        f"{r.client_id} error={o.error}\n  REQ {r.request}\n  RESP {r.response}\n"
                        f"  KAFLITE {o.answer}\n")
                for d in o.diffs:
                    f.write(f"  DIFF {d}\n")
    assert not unexplained, "\n".join(unexplained[:60])
    gone = [key for key, (_, always) in EXPLAINED.items() if always and key not in used]
    assert not gone, f"explained differences that no longer show (fixed?): {gone}"
