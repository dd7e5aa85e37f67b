"""``kaflite proxy`` as a command: it starts, says where it listens, serves clients
and its HTTP API, refuses an unknown filter, and stops on Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator

import pytest

from kaflite.cluster import Cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=2) as c:
        yield c


def test_proxy_command_serves_and_stops(cluster: Cluster) -> None:
    from confluent_kafka import Producer

    cluster.create_topic("px-cli", 2, 2)
    proc = subprocess.Popen([sys.executable, "-m", "kaflite.cli", "proxy", "--upstream",
                             cluster.bootstrap_servers, "--listen", "127.0.0.1:0",
                             "--http-port", "0", "--filter", "audit"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines: list[str] = []
        ready = threading.Event()

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if line.startswith("Ctrl-C"):
                    ready.set()
                    return

        threading.Thread(target=read, daemon=True).start()
        assert ready.wait(30), lines
        bootstrap = next(line.split("=", 1)[1].strip() for line in lines
                         if line.startswith("bootstrap.servers="))
        url = next(line.split()[3] for line in lines if line.startswith("HTTP API on"))
        producer = Producer({"bootstrap.servers": bootstrap, "client.id": "cli-producer"})
        for i in range(20):
            producer.produce("px-cli", f"{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        brokers = json.loads(urllib.request.urlopen(url + "/brokers", timeout=10).read())
        assert {b["node_id"] for b in brokers} == {0, 1}
        assert all(b["upstream"] != b["local"] for b in brokers)
        rows = json.loads(urllib.request.urlopen(url + "/connections?client_id=cli-producer",
                                                 timeout=10).read())
        assert any("partition-leader" in r["roles"] for r in rows)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


def test_unknown_filter_is_refused(cluster: Cluster) -> None:
    out = subprocess.run([sys.executable, "-m", "kaflite.cli", "proxy", "--upstream",
                          cluster.bootstrap_servers, "--filter", "nosuch"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "unknown filter 'nosuch'" in out.stderr and "topic-prefix" in out.stderr
