"""The request log with broker processes, read with ``kaflite requests``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kaflite.cli import app
from kaflite.client.sync import Producer
from kaflite.cluster import Cluster
from tests.cli._up import KafliteUp, kaflite
from tests.cluster.request_log._reader import Reader

ON = {"kaflite.request.log.enable": "true", "kaflite.request.log.flush.ms": "50"}


def test_broker_processes_log_their_requests_and_the_cli_reads_them() -> None:
    with Cluster(brokers=2, processes=True, config=ON) as cluster:
        cluster.create_topic("proc-logged", 2, 1)
        with Producer({"bootstrap.servers": cluster.bootstrap_servers,
                       "client.id": "proc-producer"}) as producer:
            for i in range(4):
                producer.send("proc-logged", b"v%d" % i, partition=i % 2)
            producer.flush(10)
        reader = Reader(cluster.bootstrap_servers)
        try:
            seen = reader.wait(lambda rs: {r.broker for r in rs if r.api == "Produce"
                                           and r.client_id == "proc-producer"} == {0, 1},
                               "produce records from both broker processes")
        finally:
            reader.close()
        produced = [r for r in seen if r.api == "Produce" and r.client_id == "proc-producer"]
        assert {p for r in produced for p in r.partitions} == {"proc-logged-0",
                                                               "proc-logged-1"}
        assert all(r.roles == ["partition-leader"] for r in produced)

        runner = CliRunner()
        result = runner.invoke(app, ["requests", "-b", cluster.bootstrap_servers,
                                     "--client-id", "proc-producer", "--api", "Produce",
                                     "--json"])
        assert result.exit_code == 0, result.output
        rows = [json.loads(line) for line in result.output.splitlines() if line]
        assert rows and {r["api"] for r in rows} == {"Produce"}
        assert {r["client_id"] for r in rows} == {"proc-producer"}
        text = runner.invoke(app, ["requests", "-b", cluster.bootstrap_servers,
                                   "--client-id", "proc-producer", "--errors"])
        assert text.exit_code == 0 and text.output == ""     # nothing failed
        lines = runner.invoke(app, ["requests", "-b", cluster.bootstrap_servers,
                                    "-C", "proc-producer", "--api", "0", "-c", "1"])
        assert lines.exit_code == 0
        [line] = lines.output.splitlines()
        assert "proc-producer" in line and " Produce v" in line and "proc-logged-" in line


def test_kaflite_up_request_log_flag(tmp_path: Path) -> None:
    with KafliteUp("--request-log", "--brokers", "1", "--base-port", "0", "--http-port", "-1",
                   "--data-dir", str(tmp_path / "data")) as up:
        bootstrap = up.value("bootstrap.servers=")
        made = kaflite("topics", "create", "flagged", "-b", bootstrap)
        assert made.returncode == 0, made.stderr
        reader = Reader(bootstrap)
        try:
            reader.wait(lambda rs: any(r.api == "CreateTopics" and r.topics == ["flagged"]
                                       and r.roles == ["admin"] for r in rs),
                        "the CreateTopics of `kaflite topics create`")
        finally:
            reader.close()


def test_the_cli_names_the_same_topic_without_loading_the_broker() -> None:
    import subprocess
    import sys

    from kaflite.cli import requests
    from kaflite.cluster.request_log import REQUEST_LOG_TOPIC

    assert requests.REQUEST_LOG_TOPIC == REQUEST_LOG_TOPIC
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, kaflite.cli; "
         "print('kaflite.cluster.broker' in sys.modules)"],
        capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert loaded == "False"
