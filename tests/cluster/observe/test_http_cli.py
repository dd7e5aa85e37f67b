"""The HTTP JSON API and the CLI on top of it (``kaflite connections``, ``kaflite chaos``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from kaflite.cli import app
from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import MetadataRequest

runner = CliRunner()


TOKEN = "test-token"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, str]]:
    with Cluster(brokers=3) as cluster:
        cluster.create_topic("web", 2, 3)
        api = cluster.call(HttpApi(cluster, token=TOKEN).start())
        before = os.environ.get("KAFLITE_TOKEN")
        os.environ["KAFLITE_TOKEN"] = TOKEN      # what the CLI sends
        try:
            yield cluster, api.url
        finally:
            if before is None:
                os.environ.pop("KAFLITE_TOKEN", None)
            else:
                os.environ["KAFLITE_TOKEN"] = before
            cluster.call(api.stop())


def call(url: str, method: str, path: str, body: dict[str, Any] | None = None,
         token: str | None = TOKEN) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"X-Kaflite-Token": token} if token else {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def open_client(cluster: Cluster, client_id: str) -> BrokerConnection:
    import asyncio

    async def run() -> BrokerConnection:
        conn = await BrokerConnection("127.0.0.1", cluster.broker(1).port,
                                      client_id=client_id).open()
        await conn.request(MetadataRequest(topics=None))
        return conn

    assert cluster._loop is not None
    return asyncio.run_coroutine_threadsafe(run(), cluster._loop).result(10)


def test_read_endpoints(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    open_client(cluster, "web-client")
    status, view = call(url, "GET", "/cluster")
    assert status == 200 and view["cluster_id"] == cluster.cluster_id
    assert [b["id"] for b in view["brokers"]] == [0, 1, 2]
    [topic] = [t for t in view["topics"] if t["name"] == "web"]
    assert len(topic["partitions"]) == 2
    assert all(p["leader"] in p["isr"] for p in topic["partitions"])
    status, conns = call(url, "GET", "/connections?client_id=web-client")
    assert status == 200 and len(conns) == 1
    assert conns[0]["broker"] == 1 and conns[0]["roles"] == ["bootstrap"]
    assert conns[0]["apis"]["Metadata"]["count"] == 1
    status, clients = call(url, "GET", "/clients")
    assert status == 200 and any(c["client_id"] == "web-client" and c["fan_out"] == {"1": 1}
                                 for c in clients)
    assert call(url, "GET", "/nothing")[0] == 404


def test_fault_rules_lifecycle(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    status, rule = call(url, "POST", "/faults/error", {
        "api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2, "topic": "web",
        "partition": 1})
    assert status == 200 and rule["error"] == "NOT_LEADER_OR_FOLLOWER"
    assert (rule["api_key"], rule["remaining"], rule["partition"]) == (0, 2, 1)
    status, delay = call(url, "POST", "/faults/delay", {"api": "Fetch", "ms": 100})
    assert status == 200 and delay["remaining"] is None
    status, deny = call(url, "POST", "/faults/deny-topic", {"topic": "web"})
    assert status == 200 and deny["error"] == "TOPIC_AUTHORIZATION_FAILED"
    assert [r["id"] for r in call(url, "GET", "/faults")[1]] == [rule["id"], delay["id"],
                                                                 deny["id"]]
    assert [r.id for r in cluster.faults.rules()] == [rule["id"], delay["id"], deny["id"]]
    assert call(url, "DELETE", f"/faults/{delay['id']}")[1] == {"removed": 1}
    assert call(url, "DELETE", f"/faults/{delay['id']}")[0] == 404
    assert call(url, "POST", "/faults/clear", {})[1] == {"removed": 2}
    assert cluster.faults.rules() == []
    # Bad input is a 400 with the reason.
    status, body = call(url, "POST", "/faults/error", {"api": "Produce", "error": "NO_SUCH"})
    assert status == 400 and "NO_SUCH" in body["error"]
    assert call(url, "POST", "/faults/error", {"api": "Nope", "error": 6})[0] == 400


def test_cluster_faults_over_http(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    leader = cluster.controller.topics["web"].partitions[0].leader
    target = next(r for r in cluster.controller.topics["web"].partitions[0].isr if r != leader)
    status, moved = call(url, "POST", "/leaders/move", {"topic": "web", "partition": 0,
                                                        "to": target})
    assert status == 200 and moved["leader"] == target
    assert cluster.controller.topics["web"].partitions[0].leader == target
    status, body = call(url, "POST", "/brokers/2/isolate", {"isolated": True})
    assert status == 200 and cluster.controller.brokers[2].fenced_replication
    call(url, "POST", "/brokers/2/isolate", {"isolated": False})
    assert not cluster.controller.brokers[2].fenced_replication
    status, body = call(url, "POST", "/brokers/2/kill")
    assert status == 200 and body["running"] is False
    status, body = call(url, "POST", "/brokers/2/restart")
    assert status == 200 and body["running"] is True and cluster.broker(2).running
    assert cluster.broker(2).faults is cluster.faults  # rules survive a restart
    status, body = call(url, "POST", "/records/delete", {"topic": "web", "partition": 1})
    assert status == 200 and body["log_start_offset"] == 0
    # A member the coordinator does not know is a conflict, not a crash.
    status, body = call(url, "POST", "/groups/g/forget", {"member_id": "m"})
    assert status == 409
    status, body = call(url, "POST", "/brokers/9/kill")
    assert status == 409 and "no broker 9" in body["error"]
    status, body = call(url, "POST", "/faults/drop", {"client_id": "nobody"})
    assert status == 200 and body == {"dropped": 0}


def test_cli_connections_and_chaos(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    open_client(cluster, "cli-client")
    result = runner.invoke(app, ["connections", "--http", url, "--clients"])
    assert result.exit_code == 0, result.output
    assert "cli-client" in result.output and "bootstrap" in result.output
    assert "fan-out" in result.output
    result = runner.invoke(app, ["connections", "--http", url, "--json",
                                 "--client-id", "cli-client"])
    assert result.exit_code == 0 and json.loads(result.output)[0]["client_id"] == "cli-client"
    result = runner.invoke(app, ["chaos", "error", "Heartbeat", "ILLEGAL_GENERATION",
                                 "--group", "g", "--count", "3", "--http", url, "--json"])
    assert result.exit_code == 0, result.output
    rule = json.loads(result.output)
    assert (rule["api"], rule["error"], rule["group"], rule["remaining"]) == (
        "Heartbeat", "ILLEGAL_GENERATION", "g", 3)
    result = runner.invoke(app, ["chaos", "throttle", "250", "--client-id", "x", "--http", url])
    [throttle] = [r for r in cluster.faults.rules() if r.kind == "throttle"]
    assert result.exit_code == 0 and result.output == (
        f"rule {throttle.id}: throttle every API by 250 ms, client_id=x, until cleared\n")
    result = runner.invoke(app, ["chaos", "list", "--http", url])
    assert result.exit_code == 0 and "ILLEGAL_GENERATION" in result.output
    assert "throttle" in result.output
    result = runner.invoke(app, ["chaos", "clear", str(rule["id"]), "--http", url])
    assert result.exit_code == 0 and len(cluster.faults.rules()) == 1
    assert result.output == "removed 1 rule\n"
    result = runner.invoke(app, ["chaos", "clear", "--http", url])
    assert result.exit_code == 0 and cluster.faults.rules() == []
    result = runner.invoke(app, ["chaos", "list", "--http", url])
    assert result.exit_code == 0 and result.output.startswith("no fault rules are active")
    result = runner.invoke(app, ["chaos", "move-leader", "web", "1", "--http", url, "--json"])
    assert result.exit_code == 0 and "leader" in json.loads(result.output)
    result = runner.invoke(app, ["chaos", "move-leader", "web", "1", "--http", url])
    leader = cluster.controller.topics["web"].partitions[1].leader
    assert result.exit_code == 0 and result.output == f"web-1: leader is now broker {leader}\n"
    result = runner.invoke(app, ["chaos", "restart", "1", "--http", url])
    assert result.exit_code == 0 and result.output == "broker 1: restart done, running\n"
    result = runner.invoke(app, ["chaos", "error", "Produce", "NOPE", "--http", url])
    assert result.exit_code == 1 and "NOPE" in result.output


def test_cli_without_a_server() -> None:
    result = runner.invoke(app, ["connections", "--http", "http://127.0.0.1:9"])
    assert result.exit_code == 1 and "cannot reach" in result.output


def test_kaflite_up_serves_the_http_api() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite.cli", "up", "--brokers", "1", "--base-port", "0",
         "--http-port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        url = None
        console = None
        for _ in range(10):
            line = proc.stdout.readline()
            if line.startswith("console: "):
                console = line.split()[1]
            if line.startswith("HTTP API on "):
                url = line.split()[3]
                break
        assert url is not None, "kaflite up did not print its HTTP address"
        assert console is not None and console.startswith(url + "/?token=")
        token = console.split("=", 1)[1]
        status, view = call(url, "GET", "/cluster")
        assert status == 200 and [b["id"] for b in view["brokers"]] == [0]
        result = runner.invoke(app, ["connections", "--http", url])
        assert result.exit_code == 0, result.output
        # state changes need the printed token, and nothing else does
        assert call(url, "POST", "/faults/clear", {}, token=None)[0] == 401
        assert call(url, "POST", "/faults/clear", {}, token="wrong")[0] == 401
        assert call(url, "POST", "/faults/clear", {}, token=token) == (200, {"removed": 0})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
