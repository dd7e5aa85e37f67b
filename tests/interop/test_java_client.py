"""Apache Kafka's own Java client (``kafka-clients``, the version ``tools/ensure_kafka.sh``
fetched) against each target: the idempotent producer and a consumer of each group
protocol (classic, and KIP-848's ``consumer``), and a transactional producer read
back under read_committed. The driver is ``java/KafkaDriver.java``, run as a single
source file, so it is compiled against the fetched jars at each run.

On kaflite's cluster, which finalizes ``transaction.version`` 2 as Kafka 4.x does, the
Java producer runs transactions v2 (KIP-890): its partitions are added by their
leaders, so the brokers never see an AddPartitionsToTxn from it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kaflite.testing import ClusterUnderTest, KafliteCluster
from kaflite.testing._kafka_node import JVM_OPTS, java_executable
from tests.interop._clients import uid

pytestmark = pytest.mark.interop

DRIVER = Path(__file__).parent / "java" / "KafkaDriver.java"
RECORDS = 200


def drive(libs: Path, log: Path, *args: str) -> dict[str, str]:
    """Run the driver; its ``RESULT key=value`` lines."""
    cmd = [java_executable(), *JVM_OPTS, f"-Dlog4j2.configurationFile={libs.parent}/log4j2.properties",
           f"-Dkaflite.kafka.log={log}", "-cp", f"{libs}/*", str(DRIVER), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
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
