"""The seeds' fan-out picture, drawn by the console from the registry.

A confluent-kafka consumer, in its own process, reads the seeds' 12-partition topic whose
partition i is led by broker i of a 12-broker cluster. The page's picture for that client
shows 12 partition-leader connections and one coordinator connection, each drawn to its
broker, and as many lines as the kernel (what ``ss -tnp`` prints) shows TCP connections.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kaflite.cluster import Cluster
from tests.cluster.observe.kernel import established_connections, ss_connections
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytest.importorskip("confluent_kafka")

BROKERS = 12
TOPIC, GROUP, CLIENT = "seeds-fanout", "seeds-fanout-group", "seeds-fanout-consumer"
SCRIPT = [sys.executable, str(Path(__file__).resolve().parents[2] / "cluster" / "observe"
                              / "consumer_process.py")]


@pytest.fixture(scope="module")
def cluster12() -> Iterator[Cluster]:
    with Cluster(brokers=BROKERS, config={"offsets.topic.replication.factor": 1,
                                          "offsets.topic.num.partitions": 3,
                                          "group.initial.rebalance.delay.ms": 0}) as cluster:
        cluster.create_topic(TOPIC, BROKERS, 1, assignments=[[i] for i in range(BROKERS)])
        yield cluster


def test_fanout_of_a_confluent_consumer_on_twelve_brokers(browser: Browser,
                                                          cluster12: Cluster) -> None:
    from confluent_kafka import Producer

    cluster = cluster12
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for p in range(BROKERS):
        producer.produce(TOPIC, b"record", partition=p)
    assert producer.flush(30) == 0
    proc = subprocess.Popen([*SCRIPT, cluster.bootstrap_servers.split(",")[0], TOPIC,
                             str(BROKERS), CLIENT, GROUP], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        ports = {b.port for b in cluster.brokers.values()}
        with serve_console(cluster) as console:
            page = context.new_page()
            base = f"{console.url}/?token={console.token}"
            open_panel(page, base, "connections")
            page.fill("section:has(.vtable[data-table=clients]) input.filter", CLIENT)
            # The filter leaves one row; the table draws it on the next animation frame,
            # and hides the pooled row that held it before (attached, with its old text):
            # click only once the filtered view is drawn, and only a row that shows.
            page.locator("section:has(.vtable[data-table=clients]) .vt-count",
                         has_text=re.compile(r"^1 (of \d+ )?rows$")).wait_for()
            page.evaluate("() => new Promise((r) => requestAnimationFrame(() => r(null)))")
            row = page.locator('.vtable[data-table="clients"] .vt-row:visible',
                               has_text=CLIENT).first
            row.wait_for()
            row.click()
            svg = page.locator("#fanout svg.fanout")
            deadline = time.monotonic() + 20
            while True:     # connections still being opened settle (one poll of the page)
                svg.wait_for()
                kernel = established_connections(proc.pid, ports)
                shown = int(svg.get_attribute("data-connections") or -1)
                leaders = int(svg.get_attribute("data-leader-connections") or -1)
                coordinators = int(svg.get_attribute("data-coordinator-connections") or -1)
                if ((shown, leaders, coordinators) == (len(kernel), BROKERS, 1)
                        or time.monotonic() > deadline):
                    break
                page.wait_for_timeout(500)
            assert leaders == BROKERS and coordinators == 1
            assert shown == len(kernel), f"page {shown}, kernel {sorted(kernel)}"
            by_ss = ss_connections(proc.pid, ports)
            assert by_ss is None or len(by_ss) == shown
            lines = page.locator("#fanout svg line")
            assert lines.count() == shown
            leader_brokers = sorted(int(b) for b in lines.evaluate_all(
                "ls => ls.filter(l => l.dataset.role === 'partition-leader')"
                ".map(l => l.dataset.broker)"))
            assert leader_brokers == list(range(BROKERS))   # one to each broker
            screenshot(page, "fanout")
    finally:
        context.close()
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)
