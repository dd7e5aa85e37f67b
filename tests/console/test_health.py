"""The console's Health view (GET /api/health and its panel) over real loopback HTTP: the
doctor's report on the request log of the cluster the console watches, with no finding
for a healthy producer, then a connection fan-out found; and, with the log off, what
to do about it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from kaflite.client.sync import Producer
from kaflite.cluster import Cluster
from kaflite.console import ClientBackend, ConsoleServer
from tests.cluster.request_log._reader import Reader
from tests.console.browser.serve import serve_console
from tests.doctor._traffic import logged

ON = {"kaflite.request.log.enable": "true", "kaflite.request.log.flush.ms": "50"}


@contextmanager
def served_by_bootstrap(cluster: Cluster) -> Iterator[httpx.Client]:
    """``kaflite console --bootstrap``'s console: a ``ClientBackend`` on the address."""
    async def start() -> ConsoleServer:
        backend = ClientBackend(cluster.bootstrap_servers)
        return await ConsoleServer(backend, "127.0.0.1", 0, sampling=False).start()

    server = cluster.call(start())
    try:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            yield client
    finally:
        cluster.call(server.stop())


def produce(servers: str, client_id: str, producers: int = 1) -> None:
    """``producers`` producers under one client id, all open at once, each sending to
    every partition of ``t`` twice (so each keeps its connections in use throughout)."""
    clients = [Producer({"bootstrap.servers": servers, "client.id": client_id})
               for _ in range(producers)]
    try:
        for round_ in range(2):
            for p in clients:
                for partition in range(6):
                    p.send("t", f"{round_}".encode(), partition=partition)
                p.flush()
    finally:
        for p in clients:
            p.close()


def subjects(report: dict[str, object]) -> set[tuple[str, str]]:
    findings = report["findings"]
    assert isinstance(findings, list)
    return {(f["name"], f["subject"]) for f in findings}


def test_health_reports_no_finding_then_a_fanout_as_it_happens() -> None:
    with Cluster(brokers=3, config=ON) as cluster, served_by_bootstrap(cluster) as c:
        cluster.create_topic("t", 6, 3)
        produce(cluster.bootstrap_servers, "calm")
        logged(cluster, "calm's produce", lambda r: r.client_id == "calm" and
               r.api == "Produce")
        report = c.get("/api/health").json()
        assert report["enabled"] is True and report["minutes"] == 10
        assert report["findings"] == [] and report["brokers"] == [0, 1, 2]
        clients = {x["client_id"]: x for x in report["clients"]}
        assert "calm" in clients
        assert set(clients["calm"]["by_role"]["partition-leader"]) == {"0", "1", "2"}
        assert not [x for x in clients if x and x.startswith("kaflite-console")]
        # Four producers under one client id, open together: 12 leader connections
        # to three brokers, more than 2 x 3 + 2.
        produce(cluster.bootstrap_servers, "fanned", producers=4)
        reader = Reader(cluster.bootstrap_servers)
        try:   # each of the four sent t-5 in two Produce requests
            reader.wait(lambda seen: sum(r.client_id == "fanned" and r.api == "Produce" and
                                         "t-5" in r.partitions for r in seen) >= 8,
                        "fanned's last produce")
        finally:
            reader.close()
        again = c.get("/api/health").json()
        assert subjects(again) == {("connection-fanout", "client fanned @ 127.0.0.1")}
        [fanout] = again["findings"]
        assert fanout["counts"]["max_open_connections"] > fanout["counts"]["limit"] == 8
        assert again["records"] > report["records"]      # read on from where it was
        # another window starts over, and a bad one is refused
        whole = c.get("/api/health", params={"minutes": 0}).json()
        assert whole["minutes"] == 0 and subjects(whole) == subjects(again)
        assert c.get("/api/health", params={"minutes": "soon"}).status_code == 400
        assert c.get("/api/health", params={"minutes": -1}).status_code == 400


def test_health_with_the_request_log_off_says_how_to_turn_it_on() -> None:
    with Cluster(brokers=1) as cluster, serve_console(cluster) as server, \
            httpx.Client(base_url=server.url, timeout=60) as c:
        report = c.get("/api/health").json()
        assert report["enabled"] is False and report["topic"] == "__kaflite_requests"
        assert "does not exist" in report["message"]
        assert "kaflite up --request-log" in report["how_to_enable"]
        assert "kaflite.request.log.enable=true" in report["how_to_enable"]
        # the page has the view: its tab, its module, and the route in the API's schema
        assert 'href="#health"' in c.get("/").text
        module = c.get("/static/js/health.js")
        assert module.status_code == 200 and "ROUTES.health" in module.text
        assert "/api/health" in c.get("/openapi.json").json()["paths"]

