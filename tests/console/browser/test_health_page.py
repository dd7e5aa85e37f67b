"""The Health panel in Chromium: a librdkafka producer behind a round-robin VIP (kaflite's
naive proxy) shows as a ``vip-bootstrap`` finding with its counts and its evidence (the
refused Produce requests), and in the clients' table its row names the finding."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kaflite.cluster import Cluster
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import serve_console
from tests.doctor._traffic import logged, storm_behind_vip

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytest.importorskip("confluent_kafka")
ON = {"kaflite.request.log.enable": "true", "kaflite.request.log.flush.ms": "50"}


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config=ON) as c:
        yield c


def test_the_health_panel_shows_a_vip_with_its_evidence(browser: Browser,
                                                        cluster: Cluster) -> None:
    cluster.create_topic("vip", 6, 3)
    stormer = storm_behind_vip(cluster, "vip")
    assert stormer is not None
    logged(cluster, "the stormer's refusals",
           lambda r: r.client_id == stormer and r.api == "Produce" and r.errors)
    subject = f"client {stormer} @ 127.0.0.1"
    with serve_console(cluster) as console:
        context = browser.new_context(viewport={"width": 1366, "height": 900})
        page = context.new_page()
        try:
            open_panel(page, console.url + "/", "health")
            assert page.locator("#panel").get_attribute("data-enabled") == "1"
            finding = page.locator(
                f'article.finding[data-finding="vip-bootstrap"][data-subject="{subject}"]')
            assert finding.count() == 1
            assert "NOT_LEADER_OR_FOLLOWER" in finding.locator("p").inner_text()
            refusals = finding.locator('[data-count="not_leader_or_follower"]').inner_text()
            assert int(refusals.replace(",", "")) >= 20
            evidence = finding.locator("table.evidence tbody tr")
            assert evidence.count() >= 1
            assert "Produce" in evidence.first.inner_text()
            assert "NOT_LEADER_OR_FOLLOWER" in evidence.first.inner_text()
            row = page.locator(f'#health-clients-table tr[data-client="{stormer}"]')
            assert "vip-bootstrap" in (row.get_attribute("data-findings") or "")
            screenshot(page, "health")
        finally:
            context.close()
