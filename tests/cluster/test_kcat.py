"""kcat (librdkafka's command-line client, from Debian) against the embedded cluster."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kaflite.cluster import Cluster

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed")


def run(*args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    proc = subprocess.run([KCAT, *args], input=stdin, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_kcat_lists_metadata_produces_and_consumes(cluster3: Cluster) -> None:
    cluster3.create_topic("kcat-topic", partitions=3, replication_factor=3)
    listing = run("-b", cluster3.bootstrap_servers, "-L")
    assert "3 brokers:" in listing
    for node in range(3):
        assert f"broker {node} at 127.0.0.1:{cluster3.broker(node).port}" in listing
    assert 'topic "kcat-topic" with 3 partitions' in listing
    lines = [f"key{i}:value-{i}" for i in range(300)]
    run("-b", cluster3.bootstrap_servers, "-P", "-t", "kcat-topic", "-K:", "-z", "snappy",
        stdin="\n".join(lines) + "\n")
    out = run("-b", cluster3.bootstrap_servers, "-C", "-t", "kcat-topic", "-o", "beginning",
              "-e", "-f", "%k:%s\n")
    assert sorted(out.splitlines()) == sorted(lines)
