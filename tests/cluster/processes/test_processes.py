"""A multi-process cluster (``Cluster(processes=True)``): every broker in its own OS process,
the controller in this one, metadata over the wire."""

from __future__ import annotations

import json
import os
import signal
import socket
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner

from kaflite.cli import app
from kaflite.client import ConfigResource, NewTopic
from kaflite.client._quotas import ClientQuotaAlteration as Alter
from kaflite.client.sync import Admin, Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.cluster.http import HttpApi
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Cluster, str]]:
    with Cluster(brokers=3, processes=True,
                 config={"replica.lag.time.max.ms": 1500, "broker.heartbeat.interval.ms": 250,
                         "broker.session.timeout.ms": 3000}) as cluster:
        api = cluster.call(HttpApi(cluster, token=TOKEN).start())
        try:
            yield cluster, api.url
        finally:
            cluster.call(api.stop())
    # every broker process is gone with the cluster
    for process in cluster.processes.values():
        assert process.proc is not None and process.proc.returncode is not None


def describe(cluster: Cluster, node: int) -> dict[str, Any]:
    assert cluster.controller_server is not None
    found = cluster.call(cluster.controller_server.call_broker(node, "describe"))
    assert isinstance(found, dict)
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def confluent_read(bootstrap: str, topic: str, partitions: int, expect: int) -> list[bytes]:
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}",
                            "enable.auto.commit": False})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[bytes] = []
    try:
        for _ in range(60):
            if len(out) >= expect:
                break
            out += [m.value() for m in consumer.consume(1000, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return out


def test_each_broker_is_its_own_process(served: tuple[Cluster, str]) -> None:
    cluster, _ = served
    pids = {p.pid for p in cluster.processes.values()}
    assert len(pids) == 3 and os.getpid() not in pids and all(
        pid is not None and alive(pid) for pid in pids)
    assert cluster.brokers == {}
    assert [b.alive for b in cluster.controller.brokers.values()] == [True, True, True]


def test_produce_and_consume_acks_all_from_both_clients(served: tuple[Cluster, str]) -> None:
    cluster, _ = served
    cluster.create_topic("both", 3, 3)
    # returns once every broker process hosts the new partitions, as in one process
    for node in range(3):
        assert {f"both-{i}" for i in range(3)} <= set(describe(cluster, node)["hosted"])
    bootstrap = cluster.bootstrap_servers
    p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    failed: list[Any] = []
    for i in range(300):
        p.produce("both", b"ck-%d" % i, on_delivery=lambda e, m: e and failed.append(e))
    assert p.flush(30) == 0 and failed == []
    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as kp:
        for i in range(300):
            kp.produce("both", b"kf-%d" % i)
        kp.flush(30)
    values = confluent_read(bootstrap, "both", 3, 600)
    assert sorted(values) == sorted([b"ck-%d" % i for i in range(300)]
                                    + [b"kf-%d" % i for i in range(300)])
    with Consumer({"bootstrap.servers": bootstrap, "group.id": "kf-both",
                   "auto.offset.reset": "earliest"}) as kc:
        kc.subscribe(["both"])
        got: list[bytes] = []
        for _ in range(60):
            if len(got) >= 600:
                break
            got += [r.value for r in kc.poll(500)]
    assert len(got) == 600 and set(got) == set(values)


def test_metadata_changes_reach_every_process(served: tuple[Cluster, str]) -> None:
    cluster, _ = served
    with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        # sent to one broker process, which forwards it to the controller
        admin.create_topics([NewTopic("meta", 2, 3)])
        admin.alter_configs({ConfigResource(2, "meta"): {"retention.ms": "123456"}})
        admin.alter_user_scram_credentials([("alice", "SCRAM-SHA-256", "secret", 4096)])
        admin.alter_client_quotas([Alter({"user": "alice"}, {"producer_byte_rate": 2048})])
        admin.alter_configs({ConfigResource(32, "pg"): {"consumer.session.timeout.ms": "50000"}})
    assert cluster.controller.topics["meta"].configs == {"retention.ms": "123456"}
    assert cluster.controller.group_configs == {"pg": {"consumer.session.timeout.ms": "50000"}}

    def everywhere() -> bool:
        want = [p.to_json() for p in cluster.controller.topics["meta"].partitions]
        views = [describe(cluster, n) for n in range(3)]
        return all(v["topics"].get("meta", {}).get("configs") == {"retention.ms": "123456"}
                   and v["topics"]["meta"]["partitions"] == want
                   and v["scram_users"] == ["alice"] and v["cluster_id"] == cluster.cluster_id
                   and v["quotas"] == [{"entity": [["user", "alice"]],
                                        "values": {"producer_byte_rate": 2048.0}}]
                   # every replica of the new partitions is hosted, led where the
                   # controller says
                   and all(v["hosted"][f"meta-{p.partition}"]["leader"] == (p.leader == n)
                           # and its log applies the new config
                           and v["hosted"][f"meta-{p.partition}"]["retention_ms"] == 123456
                           for p in cluster.controller.topics["meta"].partitions)
                   for n, v in enumerate(views))

    wait_for(everywhere, what="every broker process's replica to hold the change")


def test_sigkill_of_a_leader_loses_no_acked_record_and_it_rejoins(
        served: tuple[Cluster, str]) -> None:
    cluster, _ = served
    cluster.create_topic("crash", 1, 3, assignments=[[1, 0, 2]])
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                     "enable.idempotence": True, "retry.backoff.ms": 50,
                     "message.timeout.ms": 30000})
    acked: list[bytes] = []

    def produce(lo: int, hi: int) -> None:
        for i in range(lo, hi):
            p.produce("crash", b"r-%d" % i, partition=0,
                      on_delivery=lambda e, m: acked.append(m.value()) if e is None else None)
            p.poll(0)

    produce(0, 200)
    assert p.flush(30) == 0
    pid = cluster.processes[1].pid
    assert pid is not None
    produce(200, 400)                   # in flight while the leader dies
    cluster.faults.kill_broker(1)      # SIGKILL
    assert not alive(pid) and not cluster.broker_running(1)
    state = cluster.controller.topics["crash"].partitions[0]
    assert state.leader in (0, 2) and 1 not in state.isr
    produce(400, 600)
    assert p.flush(60) == 0
    assert len(acked) == 600
    values = confluent_read(cluster.bootstrap_servers, "crash", 1, len(acked))
    assert set(acked) <= set(values)
    # the killed broker restarts on its own, recovers its log, and rejoins the ISR
    cluster.faults.restart_broker(1)
    assert cluster.broker_running(1) and cluster.processes[1].pid != pid
    wait_for(lambda: 1 in cluster.controller.topics["crash"].partitions[0].isr,
             what="broker 1 back in the ISR")
    leader = cluster.controller.topics["crash"].partitions[0].leader
    ends = {n: describe(cluster, n)["hosted"]["crash-0"]["log_end_offset"] for n in (1, leader)}
    assert ends[1] == ends[leader] >= 600


TOKEN = "test-token"


def call(url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method,
                                 headers={"X-Kaflite-Token": TOKEN})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def test_registry_http_and_chaos_across_processes(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    cluster.create_topic("web", 3, 3)
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                     "client.id": "xproc", "retry.backoff.ms": 20})
    for i in range(30):
        p.produce("web", b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    leaders = {s.leader for s in cluster.controller.topics["web"].partitions}
    conns = call(url, "GET", "/connections?client_id=xproc")
    assert {c["broker"] for c in conns if "partition-leader" in c["roles"]} == leaders
    assert sum(c["apis"].get("Produce", {}).get("count", 0) for c in conns) >= 3
    assert {c.broker for c in cluster.connections(client_id="xproc")} >= leaders
    result = CliRunner().invoke(app, ["connections", "--http", url, "--clients"])
    assert result.exit_code == 0 and "xproc" in result.output
    # a rule set here acts in the broker processes, and their hits count down here
    rule = call(url, "POST", "/faults/error", {"api": "Produce", "error":
                                               "NOT_LEADER_OR_FOLLOWER", "topic": "web",
                                               "count": 2})
    assert [r["id"] for r in call(url, "GET", "/faults")] == [rule["id"]]
    failed: list[Any] = []
    for i in range(30):
        p.produce("web", b"again-%d" % i, partition=0,
                  on_delivery=lambda e, m: e and failed.append(e))
    assert p.flush(30) == 0 and failed == []
    wait_for(lambda: call(url, "GET", "/faults") == [], what="the rule used up")
    assert call(url, "POST", "/faults/drop", {"client_id": "xproc"})["dropped"] >= 1
    view = call(url, "GET", "/cluster")
    assert [b["running"] for b in view["brokers"]] == [True, True, True]
    # /metrics: each broker process's families, merged under one HELP/TYPE each
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    assert text.count("# TYPE kafka_server_replicamanager_leadercount gauge") == 1
    led = {line.split('"')[1]: float(line.split()[-1]) for line in text.splitlines()
           if line.startswith("kafka_server_replicamanager_leadercount{")}
    assert set(led) == {"0", "1", "2"} and sum(led.values()) == sum(
        len(t.partitions) for t in cluster.controller.topics.values())


def test_a_hung_broker_misses_its_heartbeats_and_is_fenced(served: tuple[Cluster, str]) -> None:
    cluster, _ = served
    cluster.create_topic("hung", 1, 3, assignments=[[2, 0, 1]])
    wait_for(lambda: cluster.controller.topics["hung"].partitions[0].isr == [2, 0, 1],
             what="a full ISR")
    pid = cluster.processes[2].pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)         # alive, connected, silent
    try:
        # Read on the cluster's loop, as a request is served: the fence and the first
        # chunk of leader changes land in one loop turn, but a read from this thread may
        # fall between the two (a CI failure read alive=False and leader 2 still).
        async def fenced() -> tuple[bool, int, list[int]]:
            p = cluster.controller.topics["hung"].partitions[0]
            return cluster.controller.brokers[2].alive, p.leader, list(p.isr)

        wait_for(lambda: not cluster.call(fenced())[0], timeout=20,
                 what="broker 2 fenced after broker.session.timeout.ms without heartbeats")
        alive_now, leader, isr = cluster.call(fenced())
        assert not alive_now and leader in (0, 1) and 2 not in isr
    finally:
        os.kill(pid, signal.SIGCONT)
    # once it runs again it finds its controller connection closed, and exits
    wait_for(lambda: not alive(pid), what="the fenced broker process to exit")
    cluster.faults.restart_broker(2)
    wait_for(lambda: 2 in cluster.controller.topics["hung"].partitions[0].isr,
             what="broker 2 back in the ISR")


def closed_unanswered(s: socket.socket) -> bool:
    """The peer closed ``s`` without sending anything (a reset is a close too: the
    controller closes with our unread request still in its buffer)."""
    try:
        return s.recv(1 << 16) == b""
    except ConnectionResetError:
        return True


def test_the_controller_serves_only_its_own_broker_processes(
        served: tuple[Cluster, str]) -> None:
    cluster, _ = served
    from kaflite.cluster.metadata_image import frame

    assert cluster.controller_server is not None
    port = cluster.controller_server.port
    for hello in ({"node_id": 7, "token": "guessed"}, None):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            if hello is not None:
                s.sendall(frame({"op": "call", "id": 1, "method": "hello", "args": hello}))
            s.sendall(frame({"op": "call", "id": 2, "method": "create_topic", "args": {
                "name": "intruder", "assignments": [[0]], "configs": {},
                "topic_id": "00000000-0000-0000-0000-000000000001"}}))
            assert closed_unanswered(s)
    assert "intruder" not in cluster.controller.topics
    assert sorted(cluster.controller_server.channels) == [0, 1, 2]


def test_the_console_reads_offsets_from_broker_processes(served: tuple[Cluster, str]) -> None:
    cluster, url = served
    cluster.create_topic("console-pt", 2, 2)
    p = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(10):
        p.produce("console-pt", b"x", partition=i % 2)
    assert p.flush(30) == 0
    [topic] = [t for t in call(url, "GET", "/api/topics") if t["name"] == "console-pt"]
    assert topic["messages"] == 10 and topic["size_bytes"] is None   # sizes: in-process only
    rows = call(url, "GET", "/api/topics/console-pt")["partitions"]
    assert [(r["log_start_offset"], r["high_watermark"]) for r in rows] == [(0, 5), (0, 5)]
