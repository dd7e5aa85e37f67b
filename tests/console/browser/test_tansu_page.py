"""The page of ``kaflite console --bootstrap`` against a third-party broker (Tansu).

It shows what the Kafka protocol can tell: the broker, the topic and its partitions'
offsets, the consumer group with its lag; connections and chaos say they need a kaflite
cluster instead of failing.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from tests._tansu import tansu_broker
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.test_console_cli import _traffic

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.peer


def test_the_page_shows_tansus_topics_and_groups(browser: Browser) -> None:
    with tansu_broker() as bootstrap:
        # console-tansu: 2 partitions, 10 records; in a thread of its own, as Playwright's
        # sync API keeps an event loop running in this one
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, _traffic(bootstrap)).result(60)
        proc = subprocess.Popen(
            [sys.executable, "-m", "kaflite.cli", "console", "--bootstrap", bootstrap,
             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            assert proc.stdout is not None
            url = None
            for _ in range(10):
                line = proc.stdout.readline()
                if line.startswith("console: "):
                    url = line.split()[1]
                    break
            assert url is not None, "kaflite console did not print its URL"
            page = context.new_page()
            open_panel(page, url, "cluster")
            assert page.locator("table.brokers tbody tr").count() == 1
            assert page.get_attribute("table.brokers tbody tr", "data-state") == "up"
            page.wait_for_selector('.vt-row[data-key="console-tansu-1"]')
            ends = [page.locator(f'.vt-row[data-key="console-tansu-{p}"] [data-col="end"]')
                    .inner_text() for p in (0, 1)]
            assert sum(int(e) for e in ends) == 10
            screenshot(page, "tansu-cluster")
            open_panel(page, url, "groups/console-group")
            page.wait_for_selector('table[data-table="offsets"] tbody tr')
            assert page.get_attribute('section[data-group="console-group"] .muted',
                                      "data-lag") == "0"
            open_panel(page, url, "connections")
            assert page.locator("#no-connections").count() == 1
            open_panel(page, url, "fanout")          # the live fan-out: the registry's too
            assert page.locator("#no-connections").count() == 1
            open_panel(page, url, "chaos")
            assert page.locator("#no-chaos").count() == 1
        finally:
            context.close()
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
