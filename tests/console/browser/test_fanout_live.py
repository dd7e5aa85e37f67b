"""The live fan-out (``#fanout``) against a 3-broker cluster with real clients.

A confluent-kafka producer writes to a topic whose partition i is led by broker i, a
confluent-kafka consumer in a group reads it. The page's edges are the registry's open
client connections, one each, with the role the shared helper (``roles.js``) gives the
registry's roles; requests travel along them. Then a broker is killed through the chaos
API: the page draws it down, keeps no open edge to it, and says the producer's partition
that it led was re-routed to another broker, on whose edge the partition now is. With
reduced motion, the same page draws no dots and still shows the broker down. Enter on a
client opens its detail (the Connections page with that client's fan-out).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from kaflite.cluster import Cluster
from kaflite.console.backend import is_console
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytest.importorskip("confluent_kafka")

TOPIC, GROUP = "live-orders", "live-group"
PRODUCER, CONSUMER = "live-producer", "live-consumer"
VICTIM = 1


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    config = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3,
              "offsets.topic.replication.factor": 3}
    with Cluster(brokers=3, config=config) as cluster:
        cluster.create_topic(TOPIC, 3, 3, assignments=[[0, 1, 2], [1, 2, 0], [2, 0, 1]])
        yield cluster


def _traffic(cluster: Cluster, stop: threading.Event) -> list[threading.Thread]:
    from confluent_kafka import Consumer, Producer

    def produce() -> None:
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                             "client.id": PRODUCER, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            for p in range(3):
                producer.produce(TOPIC, b"order %d" % i, partition=p)
            i += 1
            producer.poll(0.05)
        producer.flush(10)

    def consume() -> None:
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "group.id": GROUP, "client.id": CONSUMER,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([TOPIC])
        try:
            while not stop.is_set():
                consumer.poll(0.2)
        finally:
            consumer.close()

    threads = [threading.Thread(target=f, daemon=True) for f in (produce, consume)]
    for t in threads:
        t.start()
    return threads


def _registry(cluster: Cluster) -> list[tuple[int, int, list[str]]]:
    async def read() -> list[tuple[int, int, list[str]]]:
        return [(c.broker, c.connection_id, c.roles) for c in cluster.registry.connections()
                if not is_console(c.client_id)]
    return cluster.call(read())


def _page_edges(page: Page) -> set[tuple[int, int, str]]:
    rows = page.evaluate("""() => [...document.querySelectorAll(
        '#fan-box path.edge:not(.closed)')].map((p) => [+p.dataset.broker, +p.dataset.conn,
        p.dataset.role])""")
    return {(b, c, r) for b, c, r in rows}


def _expected(page: Page, registry: list[tuple[int, int, list[str]]]) -> set[tuple[int, int, str]]:
    """The registry's connections, each with the role the page's own helper gives it."""
    roles = page.evaluate("""async (rows) => {
        const { mainRole } = await import('/static/js/roles.js');
        return rows.map((roles) => mainRole(roles));
    }""", [r for _, _, r in registry])
    return {(b, c, role) for (b, c, _), role in zip(registry, roles, strict=True)}


def _leader_partitions(page: Page, client: str) -> dict[str, int]:
    """partition -> broker of the client's open partition-leader edges on the page."""
    rows = page.evaluate("""(client) => [...document.querySelectorAll(
        `#fan-box path.edge.partition-leader:not(.closed)[data-row^="${client}@"]`)]
        .map((p) => [+p.dataset.broker, p.dataset.partitions || ''])""", client)
    return {part: b for b, parts in rows for part in parts.split()}


def _until(check: object, timeout: float = 25) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:     # type: ignore[operator]
        time.sleep(0.5)


def test_live_fanout_follows_the_registry_and_a_broker_kill(browser: Browser,
                                                             cluster: Cluster) -> None:
    stop = threading.Event()
    threads = _traffic(cluster, stop)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        with serve_console(cluster) as console:
            page = context.new_page()
            base = f"{console.url}/?token={console.token}"
            open_panel(page, base, "fanout")
            # both clients have their leader connections to the three brokers
            _until(lambda: set(_leader_partitions(page, PRODUCER).values()) == {0, 1, 2}
                   and set(_leader_partitions(page, CONSUMER).values()) == {0, 1, 2})
            assert _leader_partitions(page, PRODUCER) == {f"{TOPIC}-{p}": p for p in range(3)}
            # the page's edges are the registry's connections, by role (one look behind)
            shown: set[tuple[int, int, str]] = set()
            want: set[tuple[int, int, str]] = {(-1, -1, "")}

            def same() -> bool:
                nonlocal shown, want
                shown, want = _page_edges(page), _expected(page, _registry(cluster))
                return shown == want
            _until(same)
            assert shown == want
            assert {r for _, _, r in shown} >= {"partition-leader", "group-coordinator"}
            # requests since the last look travel along their edges
            page.wait_for_selector("#fan-box circle.pulse", state="attached", timeout=5_000)
            assert page.locator("#fan-box svg").get_attribute("data-motion") == "on"
            screenshot(page, "fanout-live")

            page.evaluate("window.__sameDocument = true")
            resp = httpx.post(f"{console.url}/brokers/{VICTIM}/kill",
                              headers={"X-Kaflite-Token": console.token}, timeout=30)
            assert resp.status_code == 200, resp.text
            page.wait_for_selector(f'.fan-broker[data-broker="{VICTIM}"][data-state="down"]',
                                   timeout=20_000)
            moved = f"{TOPIC}-{VICTIM}"
            _until(lambda: _leader_partitions(page, PRODUCER).get(moved, VICTIM) != VICTIM
                   and not page.locator(f'#fan-box path.edge:not(.closed)'
                                        f'[data-broker="{VICTIM}"]').count())
            now = _leader_partitions(page, PRODUCER)
            assert now.get(moved, VICTIM) != VICTIM, now
            assert page.locator(f'#fan-box path.edge:not(.closed)[data-broker="{VICTIM}"]'
                                ).count() == 0
            line = page.locator("#fan-events li[data-kind=rerouted]",
                                has_text=f"{PRODUCER}@")
            line.first.wait_for(timeout=5_000)
            told = line.first.inner_text()
            assert f"re-routed broker {VICTIM} → broker {now[moved]}" in told and moved in told
            assert page.locator("#fan-events li[data-kind=broker-down]",
                                has_text=f"broker {VICTIM} down").count() == 1
            assert page.evaluate("window.__sameDocument") is True      # no reload
            screenshot(page, "fanout-live-broker-down")

            # the keyboard: Enter on a client opens its detail, its own fan-out picture
            page.focus(f'.fan-row[data-key="{PRODUCER}@127.0.0.1"]')
            page.keyboard.press("Enter")
            page.wait_for_selector('#panel[data-panel="connections"][data-ready="1"]')
            page.locator("#fanout svg.fanout").wait_for()
            assert page.inner_text("#fanout-summary").startswith(f"{PRODUCER}:")

            # reduced motion: no dots, the broker still down
            page.emulate_media(reduced_motion="reduce")
            open_panel(page, base, "fanout")
            svg = page.locator("#fan-box svg")
            assert svg.get_attribute("data-motion") == "off"
            page.wait_for_timeout(2500)      # looks with requests since the last
            assert page.locator("#fan-box path.edge.busy").count() > 0
            assert page.locator("#fan-box circle.pulse").count() == 0
            assert page.locator(f'.fan-broker[data-broker="{VICTIM}"]'
                                ).get_attribute("data-state") == "down"
    finally:
        stop.set()
        for t in threads:
            t.join(20)
        context.close()
