"""The chaos page's "Recovery per client" in Chromium, at a laptop's width: a kaflite
producer writes to a partition led by broker 1, the user kills broker 1 with the page's
own button, the producer writes again, and the table shows the producer recovered, with
its timeline (error, metadata, success) one click away; the table's columns fit."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kaflite.client.sync import Producer
from kaflite.cluster import Cluster
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser

VICTIM = 1
CLIENT = "orders-app"
ROW = f'.vtable[data-table="client-recovery"] .vt-row[data-key^="{CLIENT}"]'

FIT = """() => {
    const table = document.querySelector('.vtable[data-table="client-recovery"]');
    const cut = (e) => e.scrollWidth > e.clientWidth;
    return {
        sideways: table.scrollWidth > table.clientWidth,
        headers: [...table.querySelectorAll('.vt-head .vt-cell')].filter(cut)
            .map((e) => e.textContent),
        cells: [...table.querySelectorAll('.vt-row .vt-cell')]
            .filter((e) => e.offsetParent && cut(e)).map((e) => e.textContent),
    };
}"""


def test_a_killed_leader_in_the_per_client_view(browser: Browser) -> None:
    with Cluster(brokers=3) as cluster, serve_console(cluster) as console:
        cluster.create_topic("orders", 1, 3, assignments=[[VICTIM, 0, 2]])
        producer: Producer[bytes, bytes] = Producer({
            "bootstrap.servers": f"127.0.0.1:{cluster.broker(0).port}", "client.id": CLIENT})
        context = browser.new_context(viewport={"width": 1366, "height": 800})
        try:
            producer.send("orders", b"before", partition=0)
            producer.flush()
            page = context.new_page()
            open_panel(page, f"{console.url}/?token={console.token}", "chaos")
            page.wait_for_selector('#client-recovery-source[data-source="registry"]')
            assert "connection registry" in page.inner_text("#client-recovery-source")
            assert page.is_visible("#client-recovery-empty")
            page.click(f'tr[data-broker="{VICTIM}"] button[data-action="kill"]')
            page.wait_for_selector(f'tr[data-broker="{VICTIM}"][data-state="down"]')
            producer.send("orders", b"after", partition=0)
            producer.flush()
            page.wait_for_selector(ROW, timeout=20_000)
            row = page.locator(ROW)
            assert row.locator('[data-col="status"]').inner_text() == "recovered"
            assert row.locator('[data-col="error"]').inner_text() == \
                f"Produce NETWORK_EXCEPTION @ broker {VICTIM}"
            steps = row.locator('[data-col="steps"]').inner_text()
            assert steps.startswith("error → ") and "metadata +" in steps \
                and " → success +" in steps, steps
            assert row.locator('[data-col="recovery"]').inner_text().endswith(" ms")
            row.click()
            page.wait_for_selector(f'#client-recovery-detail[data-client="{CLIENT}"]')
            kinds = page.locator("#client-recovery-detail article.episode li").evaluate_all(
                "ls => ls.map(l => l.dataset.step)")
            assert kinds[0] == "error" and kinds[-1] == "success" and "metadata" in kinds
            assert kinds.index("metadata") < kinds.index("success")
            episode = page.inner_text("#client-recovery-detail article.episode h4")
            assert f"Produce NETWORK_EXCEPTION on broker {VICTIM}" in episode
            assert "recovered in" in episode
            assert "null" not in page.inner_text("#client-recovery-detail")
            fit = page.evaluate(FIT)
            assert fit == {"sideways": False, "headers": [], "cells": []}, fit
            screenshot(page, "chaos-client-recovery")
        finally:
            context.close()
            producer.close()
