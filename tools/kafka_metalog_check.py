"""Read kaflite's metadata log and snapshot with Apache Kafka's own tools, and compare.

Usage::

    PYTHONPATH=src python -m tools.kafka_metalog_check [--jars DIR] [--version 4.0.0]

Theory of operation: a ``Controller`` with a data directory makes one change of
every kind it records (topics, partition changes, configs, brokers, SCRAM, ACLs,
quotas, producer ids), then snapshots. Kafka's jars (``kafka_2.13`` and
``kafka-shell``, fetched once with Maven's dependency plugin into ``--jars``)
then read the files:

* ``kafka.tools.DumpLogSegments --cluster-metadata-decoder`` must decode every
  batch of the log and of the snapshot as valid;
* ``org.apache.kafka.shell.MetadataShell --snapshot`` replays the snapshot, and
  then the whole log, through Kafka's own image builder. The partitions it shows
  (replicas, ISR, leader, leader epoch, partition epoch) must equal kaflite's.

Needs Java 17+ and Maven, so it is a tool, not a test (docs/metadata-log.md).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from kaflite.cluster import metalog
from kaflite.cluster.controller import BrokerInfo, Controller, PartitionState, TopicState
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kaflite.security.scram import scram_credential

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>kaflite-metalog-check</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{v}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-shell</artifactId>
      <version>{v}</version></dependency>
  </dependencies>
</project>
"""
PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
_PARTITION = re.compile(r"PartitionRegistration\(replicas=\[([\d, ]*)\].*?isr=\[([\d, ]*)\]"
                        r".*?leader=(-?\d+).*?leaderEpoch=(\d+), partitionEpoch=(\d+)")


class _Quiet:
    def on_partition_change(self, topic: TopicState, state: PartitionState) -> None:
        pass

    def on_topic_deleted(self, topic: TopicState) -> None:
        pass

    def log_preparer(self, name: str, topic_id: uuid.UUID, configs: dict[str, str],
                     partitions: list[int]) -> Callable[[], int] | None:
        return None

    def drop_prepared(self, name: str, topic_id: uuid.UUID) -> None:
        pass


def fetch_jars(jars: Path, version: str) -> None:
    if any(jars.glob(f"kafka-shell-{version}.jar")):
        return
    jars.mkdir(parents=True, exist_ok=True)
    pom = jars / "pom.xml"
    pom.write_text(POM.format(v=version))
    subprocess.run(["mvn", "-q", "-B", "-f", str(pom), PLUGIN, "-DincludeScope=runtime",
                    f"-DoutputDirectory={jars}"], check=True, timeout=1800)


def exercise(data_dir: Path) -> Controller:
    """A controller that made one change of every kind it records."""
    c = Controller(data_dir)
    for i in range(3):
        c.register_broker(BrokerInfo(i, "127.0.0.1", 9092 + i), _Quiet())
        c.broker_started(i)
    c.create_topic("a", [[0, 1, 2], [1, 2, 0]], {"retention.ms": "1000"})
    c.create_topic("b", [[2, 0, 1]])
    c.create_topic("gone", [[0, 1]])
    c.delete_topic("gone")
    c.create_partitions("b", [[0, 2, 1]])
    c.alter_isr("a", 0, leader=0, leader_epoch=0, isr=[0, 2])
    c.broker_stopped(1)
    c.broker_started(1)
    c.reassign("a", 1, [2, 0])
    c.allocate_producer_id()
    c.alter_scram([("alice", scram_credential("SCRAM-SHA-256", "pw", iterations=4096))], [])
    c.create_acls([_acl("a", "User:alice"), _acl("b", "User:bob")])
    c.delete_acls([AclBindingFilter(principal="User:bob")])
    c.alter_client_quotas([((("user", "alice"),), {"producer_byte_rate": 1024.0}, set())])
    c.set_group_configs("g", {"consumer.session.timeout.ms": "45000"})
    return c


def _acl(topic: str, principal: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, PatternType.LITERAL, principal, "*",
                      AclOperation.READ, AclPermissionType.ALLOW)


Partition = tuple[tuple[int, ...], tuple[int, ...], int, int, int]


def partitions_of(c: Controller) -> set[Partition]:
    return {(tuple(p.replicas), tuple(p.isr), p.leader, p.leader_epoch, p.partition_epoch)
            for t in c.topics.values() for p in t.partitions}


def java(jars: Path, *args: str) -> str:
    done = subprocess.run(["java", "-cp", f"{jars}/*", *args], capture_output=True,
                          text=True, timeout=300, check=True)
    return done.stdout


def dump(jars: Path, files: list[Path]) -> bool:
    out = java(jars, "kafka.tools.DumpLogSegments", "--cluster-metadata-decoder", "--files",
               ",".join(str(f) for f in files))
    valid, invalid = out.count("isvalid: true"), out.count("isvalid: false")
    types = sorted(set(re.findall(r'"type":"([A-Z_]+)"', out)))
    print(f"DumpLogSegments {[f.name for f in files]}: {valid} valid batches, "
          f"{invalid} invalid; record types {types}")
    return valid > 0 and invalid == 0


def shell_agrees(jars: Path, path: Path, ours: set[Partition]) -> bool:
    out = java(jars, "org.apache.kafka.shell.MetadataShell", "--snapshot", str(path),
               "tree", "/image/topics/byId")
    theirs = {(tuple(_ints(m[0])), tuple(_ints(m[1])), int(m[2]), int(m[3]), int(m[4]))
              for m in _PARTITION.findall(out)}
    same = theirs == ours
    print(f"MetadataShell replaying {path.name}: {len(theirs)} partitions, "
          f"{'the same as kaflite' if same else f'DIFFERENT: {theirs} vs {ours}'}")
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.kafka_metalog_check")
    ap.add_argument("--jars", type=Path,
                    default=Path(tempfile.gettempdir()) / "kaflite-kafka-jars")
    ap.add_argument("--version", default="4.0.0")
    args = ap.parse_args(argv)
    fetch_jars(args.jars, args.version)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = Path(tmp) / metalog.DIRECTORY
        c = exercise(Path(tmp))
        c.flush()
        # the whole log, replayed by Kafka from its first record
        ok &= dump(args.jars, sorted(log_dir.glob("*.log")))
        ok &= shell_agrees(args.jars, next(log_dir.glob("*.log")), partitions_of(c))
        # a snapshot, then one more change after it
        assert c.log is not None
        c.log.start_snapshot()
        c.flush()
        at_snapshot = partitions_of(c)
        p = c.topics["b"].partitions[0]
        c.alter_isr("b", 0, p.leader, p.leader_epoch, p.isr[:1])
        c.close()
        snapshot = metalog.list_snapshots(log_dir)[-1][1]
        ok &= dump(args.jars, [snapshot, *sorted(log_dir.glob("*.log"))])
        ok &= shell_agrees(args.jars, snapshot, at_snapshot)
        same = partitions_of(Controller(Path(tmp))) == partitions_of(c)
        print(f"kaflite's own recovery from snapshot + log: "
              f"{'the same' if same else 'DIFFERENT'}")
        ok &= same
    return 0 if ok else 1


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


if __name__ == "__main__":
    sys.exit(main())
