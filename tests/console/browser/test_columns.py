"""Columns that fit at a laptop's width: on every panel with a table, at 1280 and 1440
pixels, no header is cut ("protocol t…", "memb…"), a sorted one with its arrow too, nor a cell of the data a small cluster
with traffic shows (a client's roles and their counts), unless its text is longer than
its column's cap (a long software version: the whole text is its title), and the tables
need no sideways scroll. Measured in Chromium: an element cut with an ellipsis is narrower
than its text (``clientWidth < scrollWidth``)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kaflite.cluster import Cluster
from tests.console.browser.conftest import open_panel
from tests.console.browser.serve import Console, serve_console
from tests.console.browser.test_panels import READERS, _confluent_traffic, _produce

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytest.importorskip("confluent_kafka")

# panel -> the tables it shows once its data is in
PANELS = {"cluster": ["partitions"], "topics": ["topics"], "groups": ["groups"],
          f"groups/{READERS}": ["groups"], "connections": ["clients", "connections"],
          "log": ["log"], "chaos": [], "security": []}

# tables sorted by a column before the look: its header then has an arrow
SORTED = {"groups": [("groups", "protocol")], "topics": [("topics", "urp")],
          "connections": [("clients", "conns"), ("connections", "telemetry")]}

CUT = """() => {
    const cut = (e) => e.scrollWidth > e.clientWidth;
    const capped = (cell) => {      // longer than its column may be: cut by design
        const vt = cell.closest('.vtable')?.__vtable;
        const col = vt && vt.columns.find((c) => c.key === cell.dataset.col);
        return !!col && !!vt.fit && cell.scrollWidth >= (col.max ?? 24) * vt.fit.em
            && cell.title === cell.textContent;
    };
    const name = (e) => `${e.closest('[data-table]')?.dataset.table ?? 'table'}: "${e.textContent}"`;
    return {
        headers: [...document.querySelectorAll('.vt-head .vt-cell, table.plain th')]
            .filter(cut).map(name),
        cells: [...document.querySelectorAll('.vt-row .vt-cell, table.plain td')]
            .filter((c) => c.offsetParent && cut(c) && !capped(c)).map(name),
        roles: [...document.querySelectorAll('.vt-row [data-col="roles"]')]
            .filter((c) => c.offsetParent && cut(c)).map(name),
        sideways: [...document.querySelectorAll('.vtable, section.card')]
            .filter((t) => t.scrollWidth > t.clientWidth)
            .map((t) => `${t.dataset.table ?? t.querySelector('h2')?.textContent}: `
                        + `${t.scrollWidth} > ${t.clientWidth} px`),
    };
}"""


@pytest.fixture(scope="module")
def console() -> Iterator[Console]:
    config = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 3}
    with Cluster(brokers=3, config=config) as cluster:
        _produce(cluster)
        stop = threading.Event()
        reader = _confluent_traffic(cluster, stop)
        try:
            with serve_console(cluster) as console:
                yield console
        finally:
            stop.set()
            reader.join(15)


def _rows_drawn(page: Page, tables: list[str]) -> None:
    for table in tables:
        page.wait_for_selector(f'.vtable[data-table="{table}"] .vt-row[data-key]',
                               timeout=20_000)


@pytest.mark.parametrize("width", [1280, 1440])
def test_no_column_is_cut_at_a_laptops_width(browser: Browser, console: Console,
                                             width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{console.url}/")
        for panel, tables in PANELS.items():
            open_panel(page, console.url, panel, timeout_ms=20_000)
            _rows_drawn(page, tables)
            if panel == "connections":       # its fan-out: a table-less picture, drawn too
                page.locator('.vtable[data-table="clients"] .vt-row[data-key]').first.click()
                page.wait_for_selector("#fanout svg.fanout")
            for table, col in SORTED.get(panel, []):
                header = f'.vtable[data-table="{table}"] .vt-head [data-col="{col}"]'
                if panel == "topics":
                    page.press(header, "Enter")      # from the keyboard: headers take focus
                else:
                    page.click(header)
                page.wait_for_selector(f'{header}[aria-sort="ascending"]')
            page.wait_for_function("() => new Promise(r => requestAnimationFrame(() => r(true)))")
            found = page.evaluate(CUT)
            assert found == {"headers": [], "cells": [], "roles": [], "sideways": []}, \
                (panel, found)
    finally:
        context.close()
