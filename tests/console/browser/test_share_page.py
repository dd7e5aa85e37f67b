"""The groups page on a share group (KIP-932), in Chromium: a kaflite share consumer acquires
three records and holds them; the page lists them acquired by that consumer, delivered once,
as the partition leader's share-partition has them; once the consumer accepts the first, the
page follows without a reload (the start offset moves past it). Against the Kafka protocol
alone the page says plainly that the in-flight records cannot be shown.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kaflite.client import AcknowledgeType
from kaflite.client import sync as ksync
from kaflite.cluster import Cluster
from kaflite.console.share_groups import NOT_IN_KAFKA
from tests.client.share.conftest import fetching, produce
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import Console, serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

TOPIC, GROUP, CLIENT = "jobs", "job-workers", "job-worker-1"
CONFIG = {
    "group.share.record.lock.duration.ms": "60000",   # no lock expires during the test
    "group.share.heartbeat.interval.ms": "200",
    "group.share.min.heartbeat.interval.ms": "100",
}

# counts the DOM changes after which the share-partitions view is missing
BLANK_WATCH = """() => { window.shareBlank = 0; new MutationObserver(() => {
  if (!document.querySelector('#share-partitions')) window.shareBlank += 1; })
  .observe(document.body, {childList: true, subtree: true}); }"""

@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Cluster, Console]]:
    with Cluster(brokers=1, config=CONFIG) as cluster:
        cluster.create_topic(TOPIC, 1, 1)
        with serve_console(cluster) as console:
            yield cluster, console


def _rows(page: Page) -> list[dict[str, str]]:
    return list(page.locator("#share-partitions table[data-table=in-flight] tbody tr").evaluate_all(
        "rows => rows.map(tr => ({offset: tr.dataset.offset, state: tr.dataset.state,"
        " ...Object.fromEntries([...tr.cells].filter(c => c.dataset.col)"
        ".map(c => [c.dataset.col, c.textContent]))}))"))


def test_share_group_in_flight_records(env: tuple[Cluster, Console], browser: Browser) -> None:
    cluster, console = env
    c = ksync.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                             "client.id": CLIENT, "share.acknowledgement.mode": "explicit"})
    page = browser.new_context(viewport={"width": 1366, "height": 900}).new_page()
    try:
        c.subscribe([TOPIC])
        deadline = time.monotonic() + 15
        while not fetching(c._async) and time.monotonic() < deadline:
            assert not c.poll(100)
        assert fetching(c._async)
        cluster.call(produce(cluster.bootstrap_servers, TOPIC, 3, partitions=1))
        records = []
        deadline = time.monotonic() + 15
        while len(records) < 3 and time.monotonic() < deadline:
            records.extend(c.poll(200))
        assert len(records) == 3
        broker = cluster.broker(0)
        assert broker.share is not None
        held = cluster.call(broker.share.snapshot(GROUP, broker.partitions[(TOPIC, 0)], 10))
        assert held is not None and held.live

        open_panel(page, console.url, f"groups/{GROUP}")
        page.wait_for_selector("#share-partitions table[data-table=in-flight] tr[data-offset='2']")
        # every refresh replaces the view in one step: the table is never blank while the
        # page waits for the next answer (it was, and the check below once read it so)
        page.evaluate(BLANK_WATCH)
        rows = _rows(page)
        assert [{k: v for k, v in r.items() if k != "lock"} for r in rows] == [
            {"offset": str(r.offset), "state": r.state.name.lower(),
             "deliveries": f"{r.delivery_count} of 5", "holder": CLIENT} for r in held.records]
        assert [r.state.name for r in held.records] == ["ACQUIRED"] * 3
        assert all(r.member_id == c._async.member_id for r in held.records)
        assert all(r["lock"].endswith(" s") for r in rows)
        summary = page.locator("#share-partitions table[data-table=share-offsets] tbody tr")
        assert summary.locator("td[data-col=acquired]").text_content() == "3"
        assert summary.locator("td[data-col=start]").text_content() == "0"
        assert page.locator("table[data-table=share-members] td").first.text_content() == CLIENT
        assert page.locator("#share-note").count() == 0
        screenshot(page, "share-group")

        c.acknowledge(records[0], AcknowledgeType.ACCEPT)
        c.commit_sync()
        page.wait_for_selector("#share-partitions tr[data-offset='0']", state="detached")
        assert [r["offset"] for r in _rows(page)] == ["1", "2"]
        assert summary.locator("td[data-col=start]").text_content() == "1"
        assert summary.locator("td[data-col=acquired]").text_content() == "2"
        assert page.evaluate("window.shareBlank") == 0
    finally:
        page.context.close()
        c.close()


def test_the_kafka_protocol_alone_shows_start_offsets_and_says_why(static_page: Page) -> None:
    """The view of what ``kaflite console --bootstrap`` answers for a Kafka cluster."""
    answer = {"group_id": "g", "state": "Stable", "limit": 50, "in_flight_shown": False,
              "note": NOT_IN_KAFKA, "members": [{"member_id": "m1", "client_id": "w1",
                                                 "host": "/127.0.0.1"}],
              "partitions": [{"topic": "t", "partition": 0, "start_offset": 12, "lag": 3,
                              "members": ["m1"], "in_flight": None, "error": None}]}
    static_page.evaluate(
        "async (s) => { const m = await import('/static/js/share.js');"
        " document.getElementById('panel').append(m.sharePartitionsView(s)); }", answer)
    assert static_page.locator("#share-note").text_content() == NOT_IN_KAFKA
    cells = static_page.locator("#share-partitions tbody tr td").all_text_contents()
    assert cells[:5] == ["t", "0", "12", "3", "w1"]
    assert static_page.locator("table[data-table=in-flight]").count() == 0
