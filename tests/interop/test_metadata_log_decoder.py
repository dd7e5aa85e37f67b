"""Apache Kafka 4.4's own code reads kaflite's ``__cluster_metadata``: DumpLogSegments
with ``--cluster-metadata-decoder`` (``kafka-dump-log``) decodes every record of its log
and of its snapshot, in the version each record names, and Kafka's metadata image
(``MetadataDelta.replay``, what a KRaft broker applies; java/MetadataReplay.java)
replays them into the state kaflite's controller has.

The log is written by a controller of brokers with named listeners (as a running
cluster's are) at metadata.version 22 (4.0-IV0, what an older kaflite formatted),
which is then upgraded to 33 (4.4-IV2): the records before the upgrade are in the
versions Kafka writes at 22 (PartitionRecord v1, RegisterBrokerRecord v3), those after
it in 4.4-IV2's (v2, v4).
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from kaflite.cluster import features, metalog
from kaflite.cluster.controller import BrokerInfo, Controller
from kaflite.testing._kafka_node import JVM_OPTS, java_executable
from tests.cluster.test_metadata_log import Quiet, busy

pytestmark = pytest.mark.interop

REPLAY = Path(__file__).parent / "java" / "MetadataReplay.java"
PAYLOAD = re.compile(r"^\| offset: (\d+) .* payload: (\{.*\})$")
MIGRATING = "AAAAAAAAAAAAAAAAAAAAAA"        # DirectoryId.MIGRATING, as Kafka prints it


def register(c: Controller, node: int) -> None:
    c.register_broker(BrokerInfo(node, "127.0.0.1", 9092 + node,
                                 endpoints={"PLAINTEXT": ("127.0.0.1", 9092 + node)}), Quiet())
    c.broker_started(node)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Controller]:
    """A metadata log at 22 then 33, with every kind of record, and a snapshot."""
    data = tmp_path_factory.mktemp("metadata")
    c = Controller(data)
    c.set_feature("metadata.version", 22)
    for node in range(3):
        register(c, node)
    busy(c)
    c.set_feature("metadata.version", 33)
    register(c, 3)
    c.create_topic("after", [[0, 1, 2], [3, 0, 1]])
    c.reassign("after", 0, [2, 1])
    c.alter_isr("after", 1, leader=3, leader_epoch=0, isr=[3, 0])
    c.close()
    again = Controller(data)
    assert again.log is not None
    again.log.write_snapshot_now(metalog.snapshot_records(again))
    again.flush()
    return data / metalog.DIRECTORY, again


def java(libs: Path, *args: str) -> str:
    proc = subprocess.run([java_executable(), *JVM_OPTS, "-cp", f"{libs}/*", *args],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def decoded(out: str) -> list[tuple[int, dict[str, object]]]:
    return [(int(m.group(1)), json.loads(m.group(2)))
            for m in map(PAYLOAD.match, out.splitlines()) if m]


def test_dump_log_decodes_every_record_in_its_version(written: tuple[Path, Controller],
                                                      kafka_libs: Path) -> None:
    directory, _ = written
    (segment,) = directory.glob("*.log")
    out = java(kafka_libs, "org.apache.kafka.tools.DumpLogSegments",
               "--cluster-metadata-decoder", "--files", str(segment))
    records = decoded(out)
    assert "isvalid: false" not in out and "Exception" not in out
    assert [o for o, _ in records] == list(range(len(records))) and len(records) > 50
    level, seen = 0, set()
    for _, r in records:
        kind, version, data = r["type"], r["version"], r["data"]
        assert isinstance(data, dict), r
        seen.add((kind, version, level))
        if kind == "FEATURE_LEVEL_RECORD" and data["name"] == "metadata.version":
            level = int(data["featureLevel"])
        if kind == "PARTITION_RECORD":
            assert data["directories"] == [MIGRATING] * len(data["replicas"]), r
    assert {("PARTITION_RECORD", 1, 22), ("PARTITION_RECORD", 2, 33),
            ("PARTITION_CHANGE_RECORD", 1, 22), ("PARTITION_CHANGE_RECORD", 2, 33),
            ("REGISTER_BROKER_RECORD", 3, 22), ("REGISTER_BROKER_RECORD", 4, 33)} <= seen
    assert not {s for s in seen if s[0] in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD")
                and s[1] != (1 if s[2] < 23 else 2) and s[2] > 0}

    (snapshot,) = directory.glob("*.checkpoint")
    out = java(kafka_libs, "org.apache.kafka.tools.DumpLogSegments",
               "--cluster-metadata-decoder", "--files", str(snapshot))
    records = decoded(out)
    assert records[0][1]["data"] == {"name": "metadata.version", "featureLevel": 33}
    assert {(r["type"], r["version"]) for _, r in records
            if r["type"] == "PARTITION_RECORD"} == {("PARTITION_RECORD", 2)}
    assert "SnapshotHeader" in out and "SnapshotFooter" in out


def test_kafkas_metadata_image_replays_the_log_into_the_controllers_state(
        written: tuple[Path, Controller], kafka_libs: Path) -> None:
    directory, c = written
    (segment,) = directory.glob("*.log")
    (snapshot,) = directory.glob("*.checkpoint")
    out = java(kafka_libs, str(REPLAY), str(segment), str(snapshot))
    from_log, from_snapshot = out.split("file ")[1:]
    expected = [f"feature {name} {level}" for name, level in sorted(features.finalized(c).items())
                if name != "metadata.version"]
    expected.append("metadata.version 33 4.4-IV2")
    for t in sorted(c.topics.values(), key=lambda t: t.name):
        for p in t.partitions:
            expected.append(
                f"partition {t.name} {p.partition} replicas={p.replicas} isr={p.isr} "
                f"leader={p.leader} leaderEpoch={p.leader_epoch} "
                f"partitionEpoch={p.partition_epoch} "
                f"directories=[{', '.join([MIGRATING] * len(p.replicas))}] elr=[]")
    expected.append(f"acls {len(c.acl_ids)}")
    expected += [f"scram {m} {u}" for u, creds in sorted(c.scram.items()) for m in creds]
    expected.append(f"nextProducerId {c.next_producer_id}")
    for image in (from_log, from_snapshot):
        lines = [line for line in image.splitlines()[1:] if not line.startswith("broker ")]
        assert lines == expected, image
    # the log has the registrations (4 brokers); the snapshot none: kaflite's brokers
    # register again at each start
    assert [line for line in from_log.splitlines() if line.startswith("broker ")] == [
        f"broker {n} fenced=false" for n in range(4)]
