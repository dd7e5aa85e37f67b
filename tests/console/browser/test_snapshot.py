"""The page's snapshot mode (``?snapshot``): a headless Chromium run from the command line,
as CI makes thumbnails and scripts check a page (``--screenshot`` or ``--dump-dom`` with
``--virtual-time-budget``), finishes on every panel with the panel's data drawn.

A live page never lets it finish: virtual time stands still while a request is open, and
the page's event stream always is. So the snapshot page opens no stream (seen in the
requests Playwright records, beside the live page's) and draws once. Each Chromium run has
a bound: one past it fails the test, and its process group is killed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from kaflite.cluster import Cluster
from tests.console.browser.conftest import CHROMIUM, open_panel
from tests.console.browser.serve import Console, serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser

PANELS = ["cluster", "topics", "produce", "groups", "security", "connections", "fanout", "log",
          "chaos", "charts"]
BOUND_S = 120        # a run that has not ended by then hangs: the bug this file is about


@pytest.fixture(scope="module")
def console() -> Iterator[Console]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed (tools/ensure_chromium.sh)")
    with Cluster(brokers=3, config={"offsets.topic.num.partitions": 3}) as cluster:
        cluster.create_topic("orders", 3, 3)
        with serve_console(cluster) as console:
            yield console


def _headless(url: str, *args: str) -> str:
    """Chromium's own headless run of ``url`` with a virtual-time budget: its stdout."""
    with tempfile.TemporaryDirectory(prefix="kaflite-chromium-") as profile:
        proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
             "--window-size=1280,800", "--virtual-time-budget=10000", *args, url],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=BOUND_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            pytest.fail(f"chromium --headless did not finish within {BOUND_S} s on {url}")
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == 0, (url, proc.returncode)
    return out


@pytest.mark.parametrize("panel", PANELS)
def test_dump_dom_of_a_snapshot_finishes_with_the_panel_drawn(console: Console,
                                                              panel: str) -> None:
    dom = _headless(f"{console.url}/?snapshot#{panel}", "--dump-dom")
    assert re.search(rf'<main id="panel" data-panel="{panel}" data-ready="1"', dom), dom[:2000]
    assert 'data-snapshot="1"' in dom
    if panel == "cluster":        # the data itself, not only the frame
        assert len(re.findall(r'<tr data-broker="\d" data-state="up">', dom)) == 3
        assert '<div class="vt-cell " data-col="topic" title="orders">orders</div>' in dom


def test_a_screenshot_of_a_snapshot_finishes(console: Console, tmp_path: Path) -> None:
    shot = tmp_path / "cluster.png"
    _headless(f"{console.url}/?token={console.token}&snapshot#cluster", f"--screenshot={shot}")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_only_the_live_page_opens_the_event_stream(browser: Browser, console: Console) -> None:
    context = browser.new_context()
    page = context.new_page()
    paths: list[str] = []
    page.on("request", lambda r: paths.append(r.url.removeprefix(console.url).split("?")[0]))
    try:
        for panel in ("cluster", "chaos", "log"):
            paths.clear()
            open_panel(page, f"{console.url}/?snapshot", panel)
            assert "/api/cluster" in paths or "/api/events" in paths, paths
            assert "/api/stream" not in paths, (panel, paths)
            assert page.evaluate("document.getElementById('status').textContent"
                                 ).startswith("snapshot")
        page.goto("about:blank")
        with page.expect_request(lambda r: "/api/stream" in r.url):      # the live page's
            open_panel(page, f"{console.url}/", "cluster")
    finally:
        context.close()
