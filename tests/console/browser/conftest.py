"""The console's browser tests: Debian's chromium, driven by Playwright.

Without ``/usr/bin/chromium`` (``tools/ensure_chromium.sh`` installs it when it may) or the
``playwright`` package, every test here is skipped with the reason, never passed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page, Route

STATIC_ORIGIN = "http://console.invalid"    # never resolved: every request is routed
CHROMIUM = os.environ.get("KAFLITE_CHROMIUM", "/usr/bin/chromium")
# The screenshots shown in the README are refreshed with KAFLITE_UPDATE_SCREENSHOTS=1; an
# ordinary run still takes every one, into a scratch directory, so a clean clone stays clean.
_DOCS_SHOTS = Path(__file__).resolve().parents[3] / "docs" / "console"
SHOTS = (_DOCS_SHOTS if os.environ.get("KAFLITE_UPDATE_SCREENSHOTS") == "1"
         else Path(tempfile.gettempdir()) / f"kaflite-console-shots-{os.getpid()}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is not installed (tools/ensure_chromium.sh: apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the playwright package is not installed")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def open_panel(page: Page, base: str, panel: str, timeout_ms: float = 15_000) -> None:
    """Go to a panel and wait until it has drawn its first data."""
    page.goto(f"{base}#{panel}")
    page.wait_for_selector(f'#panel[data-panel="{panel.split("/")[0]}"][data-ready="1"]',
                           timeout=timeout_ms)


def screenshot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


@pytest.fixture
def static_page(browser: Browser) -> Iterator[Page]:
    """A page whose origin serves the console's static files from the source tree, with
    no console behind it: for the page's modules on their own (``import('/static/js/…')``)."""
    from kaflite.console.app import STATIC

    context = browser.new_context(viewport={"width": 1366, "height": 800})

    def serve(route: Route) -> None:
        path = urlsplit(route.request.url).path
        if not path.startswith("/static/"):
            route.fulfill(status=200, content_type="text/html",
                          body='<!doctype html><html lang="en"><head><meta charset="utf-8">'
                               '<link rel="stylesheet" href="/static/console.css"></head>'
                               '<body><main id="panel"></main><div id="notices"></div>'
                               '<span id="status"></span></body></html>')
            return
        file = STATIC / path.removeprefix("/static/")
        if not file.is_file():
            route.fulfill(status=404, body="")
            return
        kind = {".js": "text/javascript", ".css": "text/css"}.get(file.suffix, "text/plain")
        route.fulfill(status=200, content_type=kind, body=file.read_bytes())

    context.route(f"{STATIC_ORIGIN}/**", serve)
    page = context.new_page()
    try:
        page.goto(f"{STATIC_ORIGIN}/")
        yield page
    finally:
        context.close()
