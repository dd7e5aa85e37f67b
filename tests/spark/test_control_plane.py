"""``kaflite pipeline control-plane`` on a 3-broker cluster with the request log on: a
producer behind a round-robin VIP (kaflite's naive proxy) gives a ``vip-bootstrap``
record in ``__kaflite_findings``, and a query restarted from its checkpoint rebuilds the
analyzer from the log; a healthy producer and consumer give no record at all."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kaflite.client import TopicPartition
from kaflite.client.sync import Admin, Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.pipelines import control_plane
from kaflite.spark import AVAILABLE_NOW_WRAPPER
from tests.doctor._traffic import logged, storm_behind_vip
from tests.spark.conftest import source

ON = {"kaflite.request.log.enable": "true", "kaflite.request.log.flush.ms": "50"}
FINDINGS = control_plane.FINDINGS_TOPIC


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=ON) as c:
        yield c


def findings_in(spark: Any, servers: str) -> list[tuple[str, dict[str, Any]]]:
    rows = source(spark, servers, subscribe=FINDINGS).selectExpr(
        "CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value").collect()
    return [(r.key, json.loads(r.value)) for r in rows]


def run_query(spark: Any, servers: str, checkpoint: Path,
              said: list[str]) -> control_plane.Started:
    started = control_plane.start(spark, servers, str(checkpoint), available_now=True,
                                  say=said.append)
    try:
        started.query.awaitTermination(300)
        assert started.query.exception() is None
    finally:
        if started.query.isActive:
            started.query.stop()
        spark.conf.unset(AVAILABLE_NOW_WRAPPER)   # set on Spark 4.0/4.1 only
    return started


def test_a_vip_is_written_to_the_findings_topic_and_rebuilt_after_a_restart(
        spark: Any, cluster: Cluster, tmp_path: Path) -> None:
    pytest.importorskip("confluent_kafka")
    servers = cluster.bootstrap_servers
    cluster.create_topic("vip", 6, 3)
    cluster.create_topic(FINDINGS, 1, 3)
    stormer = storm_behind_vip(cluster, "vip")
    assert stormer is not None
    logged(cluster, "the stormer's produce",
           lambda r: r.client_id == stormer and r.api == "Produce" and r.errors)
    said: list[str] = []
    first = run_query(spark, servers, tmp_path / "checkpoint", said)
    subject = f"client {stormer} @ 127.0.0.1"
    assert [line for line in said if line.startswith(
        f"control-plane: vip-bootstrap {subject}: ")], said
    written = findings_in(spark, servers)
    vips = [v for k, v in written if k == subject and v["name"] == "vip-bootstrap"]
    assert vips, written
    assert vips[-1]["client_id"] == stormer and vips[-1]["records"]
    assert vips[-1]["counts"]["not_leader_or_follower"] >= 20
    assert first.rebuilt == 0 and first.plane.batches >= 1
    # Restarted from its checkpoint with nothing new to read: the analyzer is rebuilt
    # from the log up to the committed offsets, and the finding is not announced again.
    said.clear()
    again = run_query(spark, servers, tmp_path / "checkpoint", said)
    assert again.rebuilt == first.plane.values > 0
    assert ("vip-bootstrap", subject) in {(f.name, f.subject)
                                          for f in again.plane.analyzer.findings()}
    assert not [line for line in said if "vip-bootstrap" in line], said


def test_a_healthy_run_writes_no_finding(cluster: Cluster, tmp_path: Path) -> None:
    servers = cluster.bootstrap_servers
    cluster.create_topic("healthy", 6, 3)
    with Producer({"bootstrap.servers": servers, "client.id": "healthy-producer",
                   "acks": "all"}) as producer:
        for i in range(200):
            producer.send("healthy", f"v{i}".encode(), key=f"k{i}".encode())
        producer.flush()
    got = 0
    with Consumer({"bootstrap.servers": servers, "client.id": "healthy-consumer",
                   "group.id": "healthy", "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe(["healthy"])
        for _ in range(100):
            if got >= 200:
                break
            got += sum(len(r) for r in consumer.getmany(timeout_ms=500).values())
        consumer.commit()
    assert got == 200
    logged(cluster, "the consumer's commit",
           lambda r: r.client_id == "healthy-consumer" and r.api == "OffsetCommit")
    log = tmp_path / "spark.log"
    proc = subprocess.run(
        [sys.executable, "-m", "kaflite.cli", "pipeline", "control-plane", "-b", servers,
         "--available-now", "--master", "local[1]", "--log-file", str(log)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    out = (proc.stdout + proc.stderr).splitlines()
    assert proc.returncode == 0, out
    summary = [line for line in out if line.startswith("control-plane: read ")]
    assert summary and summary[0].endswith("; no findings"), out
    assert int(summary[0].split()[2]) > 200, out        # the requests it analyzed
    with Admin({"bootstrap.servers": servers}) as admin:   # created, and left empty
        partitions = admin.describe_topics([FINDINGS])[FINDINGS].partitions
    tps = [TopicPartition(FINDINGS, p.partition) for p in partitions]
    with Consumer({"bootstrap.servers": servers}) as reader:
        assert tps and set(reader.end_offsets(tps).values()) == {0}


def test_without_the_request_log_it_says_how_to_turn_it_on(tmp_path: Path) -> None:
    with Cluster(brokers=1) as plain:
        proc = subprocess.run(
            [sys.executable, "-m", "kaflite.cli", "pipeline", "control-plane", "-b",
             plain.bootstrap_servers, "--available-now"],
            capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "__kaflite_requests does not exist" in proc.stderr
    assert "kaflite up --request-log" in proc.stderr
