"""``kaflite console --bootstrap`` in front of each three-broker target, Apache Kafka
included: the views that need only the Kafka protocol show the brokers, topics,
partitions, messages and groups; produce, topic creation, config changes and deletion
work with the token; the views that need kaflite's own cluster (connections, broker
kills) answer 501 "not available"."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from kaflite.client import Consumer, Producer
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, run, uid

pytestmark = pytest.mark.interop


@pytest.fixture
def console(target3: ClusterUnderTest) -> Iterator[tuple[str, str]]:
    """(the console's base URL, its token), the console a child process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "kaflite.cli", "console", "--bootstrap",
         target3.bootstrap_servers, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        url = None
        for _ in range(20):
            line = proc.stdout.readline()
            if line.startswith("console: "):
                url = line.split()[1]
                break
        assert url is not None, "kaflite console did not print its URL"
        base, token = url.split("/?token=")
        yield base, token
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


async def traffic(servers: str, topic: str, group: str) -> None:
    await create_topic(servers, topic, 2, 3)
    async with Producer(bootstrap_servers=servers, acks="all") as p:
        for i in range(10):
            await p.send(topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2)
    async with Consumer(bootstrap_servers=servers, group_id=group,
                        auto_offset_reset="earliest", enable_auto_commit=False) as c:
        c.subscribe([topic])
        got = 0
        for _ in range(100):
            got += len(await c.poll(200))
            if got >= 10:
                break
        assert got == 10
        await c.commit()


def test_console_views_and_actions(target3: ClusterUnderTest,
                                   console: tuple[str, str]) -> None:
    topic, group, made = uid("console"), uid("console-group"), uid("console-made")
    run(traffic(target3.bootstrap_servers, topic, group))
    base, token = console
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base, timeout=30) as c:
        info = c.get("/api/info").json()
        assert info["backend"] == "kafka" and info["features"]["chaos"] is False
        brokers = c.get("/api/cluster").json()["brokers"]
        assert sorted(b["id"] if "id" in b else b["node_id"] for b in brokers) == \
            target3.node_ids
        [listed] = [t for t in c.get("/api/topics").json() if t["name"] == topic]
        assert listed["partitions"] == 2 and listed["messages"] == 10
        detail = c.get(f"/api/topics/{topic}").json()
        assert sum(p["log_end_offset"] - p["log_start_offset"]
                   for p in detail["partitions"]) == 10
        [bulk] = [t for t in c.get("/api/partitions").json()["topics"] if t["name"] == topic]
        assert sum(p["high_watermark"] for p in bulk["partitions"]) == 10
        browsed = c.get(f"/api/topics/{topic}/messages", params={"from": "earliest"}).json()
        assert sorted(r["value"]["text"] for r in browsed["records"]) == \
            sorted(f"v{i}" for i in range(10))
        assert group in {g["group_id"] for g in c.get("/api/groups").json()}
        described = c.get(f"/api/groups/{group}").json()
        assert sum(o["committed"] for o in described["offsets"]) == 10
        assert described["lag"] == 0
        # what only kaflite's own cluster knows is refused, saying so
        refused = c.get("/api/connections")
        assert refused.status_code == 501 and "not available" in refused.json()["error"]
        # state changes need the token, and work with it
        assert c.post("/api/produce", json={"topic": topic, "value": "x"}).status_code == 401
        produced = c.post("/api/produce", json={"topic": topic, "key": "k", "value": "x"},
                          headers=auth)
        assert produced.status_code == 200, produced.text
        assert produced.json()["offset"] >= 0
        created = c.post("/api/topics", json={"name": made, "partitions": 3,
                                              "replication_factor": 3}, headers=auth)
        assert created.status_code in (200, 201), created.text
        altered = c.post(f"/api/topics/{made}/configs",
                         json={"set": {"retention.ms": "3600000"}}, headers=auth)
        assert altered.status_code == 200, altered.text
        assert "3600000" in str(altered.json()["configs"])
        deleted = c.delete(f"/api/topics/{made}", headers=auth)
        assert deleted.status_code == 200, deleted.text
