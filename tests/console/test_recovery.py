"""Recovery per client (GET /api/recovery) over real loopback HTTP: a kaflite producer
writes to a partition led by broker 1, broker 1 is killed through the chaos API, the
producer writes again; its timeline shows the lost connection, the metadata refresh
and the first successful Produce on the new leader, with the milliseconds between."""

from __future__ import annotations

import httpx

from kaflite.client.sync import Producer
from kaflite.cluster import Cluster
from tests.console.browser.serve import serve_console

VICTIM = 1
CLIENT = "orders-app"


def test_a_killed_leader_shows_as_error_then_metadata_then_success() -> None:
    with Cluster(brokers=3) as cluster, serve_console(cluster) as console, \
            httpx.Client(base_url=console.url, timeout=60,
                         headers={"X-Kaflite-Token": console.token}) as http:
        cluster.create_topic("orders", 1, 3, assignments=[[VICTIM, 0, 2]])
        producer: Producer[bytes, bytes] = Producer({
            "bootstrap.servers": f"127.0.0.1:{cluster.broker(0).port}", "client.id": CLIENT})
        try:
            producer.send("orders", b"before", partition=0)
            producer.flush()
            before = http.get("/api/recovery").json()
            assert before["source"] == "registry" and "connection registry" in \
                before["source_text"]
            assert CLIENT not in {c["client_id"] for c in before["clients"]}
            answer = http.post(f"/brokers/{VICTIM}/kill", json={})
            assert answer.status_code == 200 and answer.json()["running"] is False
            producer.send("orders", b"after", partition=0)
            producer.flush()
            report = http.get("/api/recovery").json()
        finally:
            producer.close()
    clients = {c["client_id"]: c for c in report["clients"]}
    assert CLIENT in clients, report
    me = clients[CLIENT]
    assert me["status"] == "recovered" and me["episodes_total"] == 1, me
    ep = me["episodes"][0]
    assert (ep["api"], ep["error"], ep["broker"]) == ("Produce", "NETWORK_EXCEPTION", VICTIM)
    assert ep["targets"] == ["partition orders-0"]
    kinds = [s["kind"] for s in ep["steps"]]
    assert kinds[0] == "error" and kinds[-1] == "success" and "metadata" in kinds, kinds
    assert kinds.index("metadata") < kinds.index("success")
    success = ep["steps"][-1]
    assert success["api"] == "Produce" and success["broker"] != VICTIM
    assert ep["refreshed"] is True and ep["recovered"] is True
    assert ep["recovery_ms"] == success["after_error_ms"] > 0
    metadata = ep["steps"][kinds.index("metadata")]
    assert 0 <= metadata["after_error_ms"] <= ep["recovery_ms"]
    assert not [c for c in clients if c and c.startswith("kaflite-console")]


def test_recovery_needs_the_registry_of_a_kaflite_cluster() -> None:
    from kaflite.console import ClientBackend, ConsoleServer

    with Cluster(brokers=1) as cluster:
        async def start() -> ConsoleServer:
            backend = ClientBackend(cluster.bootstrap_servers)
            return await ConsoleServer(backend, "127.0.0.1", 0, sampling=False).start()

        server = cluster.call(start())
        try:
            answer = httpx.get(f"{server.url}/api/recovery", timeout=60)
            assert answer.status_code == 501, answer.text
        finally:
            cluster.call(server.stop())


def test_an_injected_not_leader_ends_at_the_retry_that_succeeds() -> None:
    """The answer's own error (a fault rule's NOT_LEADER_OR_FOLLOWER, as a moved leader
    gives it): the partition is the episode's, the retry that succeeds ends it. The
    kaflite producer asks for a refresh and retries at once, as Java's does; whether the
    refresh lands before the retry's answer is the client's timing (usually not: a near
    miss, the same broker answered), so both are accepted, each told as it is."""
    with Cluster(brokers=2) as cluster, serve_console(cluster) as console, \
            httpx.Client(base_url=console.url, timeout=60,
                         headers={"X-Kaflite-Token": console.token}) as http:
        cluster.create_topic("orders", 1, 2, assignments=[[VICTIM, 0]])
        producer: Producer[bytes, bytes] = Producer({
            "bootstrap.servers": cluster.bootstrap_servers, "client.id": CLIENT})
        try:
            producer.send("orders", b"before", partition=0)
            producer.flush()
            rule = http.post("/faults/error", json={
                "api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 1,
                "client_id": CLIENT})
            assert rule.status_code == 200, rule.text
            producer.send("orders", b"after", partition=0)
            producer.flush()
            report = http.get("/api/recovery").json()
        finally:
            producer.close()
    (me,) = [c for c in report["clients"] if c["client_id"] == CLIENT]
    assert me["status"] == "recovered" and me["episodes_total"] == 1, me
    ep = me["episodes"][0]
    assert (ep["api"], ep["error"], ep["broker"]) == ("Produce", "NOT_LEADER_OR_FOLLOWER",
                                                      VICTIM)
    assert ep["targets"] == ["partition orders-0"] and ep["cause"] is None
    kinds = [s["kind"] for s in ep["steps"]]
    assert kinds in (["error", "success"], ["error", "metadata", "success"]), kinds
    assert ep["refreshed"] is ("metadata" in kinds)
    assert ep["note"] == ("" if ep["refreshed"] else
                          "recovered without a lookup: it retried and the same owner answered")
    error, success = ep["steps"][0], ep["steps"][-1]
    assert (success["broker"], success["connection_id"]) == (VICTIM, error["connection_id"])
    assert success["detail"] == "partition orders-0"
    assert ep["recovery_ms"] == success["after_error_ms"]
