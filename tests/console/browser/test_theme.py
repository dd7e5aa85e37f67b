"""Light and dark themes, in Chromium: the page follows the system's colour scheme until the
header's switch picks one; the choice outlives a reload (localStorage) and "system" gives
the page back to the system. In both themes the key texts (body, muted, table headers,
the header's tabs and status, buttons, inputs, the cluster page's states) keep WCAG AA
contrast (4.5:1) over the background they are drawn on, computed from the page's own styles.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kaflite.cluster import Cluster
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import Console, serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

AA = 4.5
# what is checked on each page: (panel, selectors of text drawn on the page)
CHECKED = {
    "cluster": ["section.card h2", "section.card .muted", "table.plain th", "table.plain td",
                ".state-up", "#tabs a", "#tabs a.active", "#backend", "#status"],
    "topics": [".vt-head .vt-cell", ".vt-row .vt-cell", "input.filter", "button",
               "label.field > span", ".vt-count"],
}

# Each element's colour and the first opaque background behind it, as [r, g, b, a] lists.
COLOURS = """sel => [...document.querySelectorAll(sel)].slice(0, 3).map(e => {
  const rgba = s => { const m = s.match(/[\\d.]+/g).map(Number); return m.length === 3 ? [...m, 1] : m; };
  let bg = null;
  for (let n = e; n; n = n.parentElement) {
    const c = rgba(getComputedStyle(n).backgroundColor);
    if (c[3] > 0.5) { bg = c; break; }
  }
  return { fg: rgba(getComputedStyle(e).color), bg: bg || [255, 255, 255, 1] };
})"""


def _luminance(rgb: list[float]) -> float:
    def channel(v: float) -> float:
        c = v / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(v) for v in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: list[float], b: list[float]) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.fixture(scope="module")
def console() -> Iterator[Console]:
    with Cluster(brokers=1) as cluster, serve_console(cluster) as console:
        cluster.create_topic("colours", 1, 1)
        yield console


def _page_colours(page: Page) -> tuple[list[float], list[float]]:
    got = page.evaluate("() => [getComputedStyle(document.body).backgroundColor,"
                        " getComputedStyle(document.body).color]")
    return _rgb(got[0]), _rgb(got[1])


def _rgb(css: str) -> list[float]:
    return [float(v) for v in css[css.index("(") + 1:css.index(")")].split(",")[:3]]


def _low_contrast(page: Page, base: str, scheme: str) -> list[str]:
    """Every checked text under AA, described; every selector must match something."""
    bad = []
    for panel, selectors in CHECKED.items():
        open_panel(page, base, panel)
        for sel in selectors:
            found = page.evaluate(COLOURS, sel)
            assert found, f"{panel}: nothing matches {sel}"
            for item in found:
                ratio = _contrast(item["fg"], item["bg"])
                if ratio < AA:
                    bad.append(f"{scheme} {panel} {sel}: {ratio:.2f} ({item})")
    return bad


def test_theme_follows_the_system_switches_and_is_remembered(console: Console,
                                                               browser: Browser) -> None:
    context = browser.new_context(viewport={"width": 1366, "height": 800}, color_scheme="dark")
    page = context.new_page()
    try:
        open_panel(page, console.url, "cluster")
        assert page.locator("#theme").input_value() == "system"
        assert page.evaluate("document.documentElement.dataset.scheme") == "dark"
        dark_bg, dark_fg = _page_colours(page)
        assert _luminance(dark_bg) < 0.05 < 0.6 < _luminance(dark_fg)   # light on dark
        problems = _low_contrast(page, console.url, "dark")
        screenshot(page, "theme-dark")

        page.select_option("#theme", "light")
        assert page.evaluate("document.documentElement.dataset.scheme") == "light"
        light_bg, light_fg = _page_colours(page)
        assert _luminance(light_bg) > 0.8 > 0.05 > _luminance(light_fg)   # dark on light
        # the choice outlives a reload, though the system still prefers dark
        page.reload()
        open_panel(page, console.url, "cluster")
        assert page.locator("#theme").input_value() == "light"
        assert _page_colours(page) == (light_bg, light_fg)
        problems += _low_contrast(page, console.url, "light")
        screenshot(page, "theme-light")

        # a chart's canvas axes follow the theme too (uPlot draws them with themeColor)
        assert page.evaluate("async () => (await import('/static/js/theme.js'))"
                             ".themeColor('--fg')") == f"rgb({', '.join(str(int(v)) for v in light_fg)})"

        page.select_option("#theme", "system")
        assert page.evaluate("localStorage.getItem('kaflite-console-theme')") is None
        assert page.evaluate("document.documentElement.dataset.scheme") == "dark"
        assert _page_colours(page) == (dark_bg, dark_fg)
        assert not problems, "\n".join(problems)
    finally:
        context.close()


def test_a_light_system_gets_the_light_theme(console: Console, browser: Browser) -> None:
    context = browser.new_context(color_scheme="light")
    page = context.new_page()
    try:
        open_panel(page, console.url, "cluster")
        bg, fg = _page_colours(page)
        assert _luminance(bg) > 0.8 and _luminance(fg) < 0.05
        page.select_option("#theme", "dark")
        bg2, fg2 = _page_colours(page)
        assert _luminance(bg2) < 0.05 and _luminance(fg2) > 0.6
    finally:
        context.close()
