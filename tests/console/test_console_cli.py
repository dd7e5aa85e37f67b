"""``kaflite console --bootstrap`` against a third-party broker (Tansu)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import httpx
import pytest

from kaflite.client import Admin, Consumer, NewTopic, Producer
from tests._tansu import tansu_broker

pytestmark = pytest.mark.interop


async def _traffic(bootstrap: str) -> None:
    async with Admin(bootstrap_servers=bootstrap) as admin:
        await admin.create_topics([NewTopic("console-tansu", 2, 1)])
    async with Producer(bootstrap_servers=bootstrap) as p:
        for i in range(10):
            await p.send("console-tansu", b"v%d" % i, key=b"k%d" % i)
    async with Consumer(bootstrap_servers=bootstrap, group_id="console-group",
                        auto_offset_reset="earliest", enable_auto_commit=False,
                        session_timeout_ms=10000, heartbeat_interval_ms=1000) as c:
        c.subscribe(["console-tansu"])
        got = 0
        for _ in range(30):
            got += len(await c.poll(1000))
            if got >= 10:
                break
        assert got == 10
        await c.commit()


@pytest.mark.peer
def test_console_serves_tansu_topics_and_groups() -> None:
    with tansu_broker() as bootstrap:
        asyncio.run(_traffic(bootstrap))
        proc = subprocess.Popen(
            [sys.executable, "-m", "kaflite.cli", "console", "--bootstrap", bootstrap,
             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert proc.stdout is not None
            url = None
            for _ in range(10):
                line = proc.stdout.readline()
                if line.startswith("console: "):
                    url = line.split()[1]
                    break
            assert url is not None, "kaflite console did not print its URL"
            base, token = url.split("/?token=")
            with httpx.Client(base_url=base, timeout=30) as c:
                info = c.get("/api/info").json()
                assert info["backend"] == "kafka" and info["features"]["chaos"] is False
                [topic] = [t for t in c.get("/api/topics").json()
                           if t["name"] == "console-tansu"]
                assert topic["partitions"] == 2 and topic["messages"] == 10
                detail = c.get("/api/topics/console-tansu").json()
                assert sum(p["log_end_offset"] - p["log_start_offset"]
                           for p in detail["partitions"]) == 10
                [bulk] = [t for t in c.get("/api/partitions").json()["topics"]
                          if t["name"] == "console-tansu"]
                rows = bulk["partitions"]
                assert [p["partition"] for p in rows] == [0, 1]
                assert sum(p["high_watermark"] for p in rows) == 10
                browsed = c.get("/api/topics/console-tansu/messages",
                                params={"from": "earliest"}).json()
                assert sorted(r["value"]["text"] for r in browsed["records"]) == \
                    sorted(f"v{i}" for i in range(10))
                groups = {g["group_id"]: g for g in c.get("/api/groups").json()}
                assert "console-group" in groups
                group = c.get("/api/groups/console-group").json()
                assert sum(o["committed"] for o in group["offsets"]) == 10
                assert group["lag"] == 0
                # what only kaflite knows is "not available", clearly
                refused = c.get("/api/connections")
                assert refused.status_code == 501 and "not available" in refused.json()["error"]
                assert c.post("/brokers/0/kill",
                              headers={"X-Kaflite-Token": token}).status_code == 501
                # and state changes need the token here too
                assert c.post("/api/produce", json={"topic": "console-tansu",
                                                    "value": "x"}).status_code == 401
                out = c.post("/api/produce", json={"topic": "console-tansu", "key": "k",
                                                   "value": "x"},
                             headers={"Authorization": f"Bearer {token}"})
                assert out.status_code == 200, out.text
                assert out.json()["offset"] >= 0
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        assert proc.returncode == 0
