"""Other clients' re-bootstrap (KIP-899, KIP-1102) when the whole kaflite cluster behind
the bootstrap address is replaced (``FrontedCluster.replace``: a new cluster id, new
ports, the old brokers stopped): Apache Kafka's Java client (producer, group consumer
and admin, ``metadata.recovery.strategy=rebootstrap``) and librdkafka's producer keep
working through the stable bootstrap address, as kaflite's own client does
(``tests/client/test_rebootstrap_replace.py``)."""

from __future__ import annotations

import queue
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

import pytest

from kaflite.cluster.replace import FrontedCluster
from kaflite.testing._kafka_node import JVM_OPTS, java_executable
from tests.interop.conftest import KAFLITE_CONFIG

pytestmark = pytest.mark.interop

DRIVER = Path(__file__).parent / "java" / "KafkaDriver.java"
TOPIC = "rb"
PARTITIONS = 2
AFTER = 20
WAIT_S = 150


def _lines(stream: IO[str], out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line.rstrip("\n"))
    out.put(None)


def test_java_client_follows_a_replaced_cluster(kafka_libs: Path, tmp_path: Path) -> None:
    log = tmp_path / "java-client.log"
    with FrontedCluster(brokers=2, config=KAFLITE_CONFIG) as fronted:
        fronted.cluster.create_topic(TOPIC, PARTITIONS, 2)
        old_id = fronted.cluster.cluster_id
        cmd = [java_executable(), *JVM_OPTS,
               f"-Dlog4j2.configurationFile={kafka_libs.parent}/log4j2.properties",
               f"-Dkaflite.kafka.log={log}", "-cp", f"{kafka_libs}/*", str(DRIVER),
               "rebootstrap", fronted.bootstrap_servers, TOPIC, str(PARTITIONS), str(AFTER)]
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True)
        reader.start()
        out: list[str] = []
        try:
            while True:         # until READY (each wait bounded)
                line = lines.get(timeout=WAIT_S)
                assert line is not None, f"the driver ended early: {out}"
                out.append(line)
                if line == "READY":
                    break
            fronted.replace()
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
            proc.wait(timeout=WAIT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(10)
        while not lines.empty():
            line = lines.get()
            if line is not None:
                out.append(line)
        logged = log.read_text(errors="replace")[-3000:] if log.exists() else ""
        assert proc.returncode == 0, f"{out}\n{logged}"
        got = dict(line.removeprefix("RESULT ").split("=", 1)
                   for line in out if line.startswith("RESULT "))
        assert got["cluster_before"] == old_id
        assert got["before_consumed"] == str(PARTITIONS)
        assert got["settled"] == "true", f"{got}\n{logged}"
        assert got["after_produced"] == str(AFTER)
        assert got["after_consumed"] == str(AFTER)
        assert got["cluster_after"] == fronted.cluster.cluster_id != old_id
        assert "java-driver" in {c.client_id for c in fronted.cluster.clients(include_closed=True)}


def test_librdkafka_producer_follows_a_replaced_cluster() -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    with FrontedCluster(brokers=2) as fronted:
        fronted.cluster.create_topic(TOPIC, PARTITIONS, 2)
        reports: list[tuple[str | None, str]] = []

        def report(err: Any, msg: Any) -> None:
            reports.append((None if err is None else str(err), msg.value().decode()))

        p = confluent_kafka.Producer({
            "bootstrap.servers": fronted.bootstrap_servers, "client.id": "rdk-rb",
            "metadata.recovery.strategy": "rebootstrap",
            # librdkafka keeps a metadata refresh due every 1 s while a leader is unknown
            "topic.metadata.refresh.interval.ms": 1000})
        try:
            p.produce(TOPIC, b"before", on_delivery=report)
            assert p.flush(60) == 0
            fronted.replace()
            for i in range(5):
                p.produce(TOPIC, f"after-{i}".encode(), on_delivery=report)
            assert p.flush(WAIT_S) == 0
        finally:
            p.flush(0)
        assert [r for r in reports if r[0] is not None] == []
        assert sorted(v for _, v in reports) == ["after-0", "after-1", "after-2", "after-3",
                                                 "after-4", "before"]
        assert "rdk-rb" in {c.client_id for c in fronted.cluster.clients()}
