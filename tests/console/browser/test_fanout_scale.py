"""The live fan-out (``#fanout``) on synthetic looks, in the page's own modules.

Fifty clients on twelve brokers: the picture stays of bounded height (groups of clients
whose client.id differs by a number fold into one row, their edges aggregated per broker
and role, past 24 rows the rest fold into one), no two client labels overlap and no label
runs into the edges, every connection is still counted on some edge, and the keyboard
opens a group, "more" and a client's detail, and folds back what it opened. Two looks in
a row: requests since the first travel as dots, a new error flashes, a new connection
glows, a closed one stays dashed, a partition whose connection moved to another broker
marks its new edge re-routed, a broker down is drawn down; with reduced motion the same
state shows, without any motion. A third look changes the same elements in place.
"""

from __future__ import annotations

import itertools
from typing import Any

from playwright.sync_api import Page

from tests.console.browser.conftest import screenshot

BROKERS = 12
LIVE = """async ([looks, still]) => {
    const { LiveFan } = await import('/static/js/fanlive.js');
    window.__opened = [];
    const live = new LiveFan({ still, onOpen: (r) => window.__opened.push(r.key) });
    document.getElementById('panel').replaceChildren(live.root);
    for (const look of looks) live.update(look);
    window.__live = live;
}"""


def _broker(i: int, running: bool = True) -> dict[str, Any]:
    return {"id": i, "host": "127.0.0.1", "port": 9092 + i, "alive": running,
            "isolated": False, "running": running}


def _conn(n: int, client: str, broker: int, roles: list[str],
          partitions: tuple[str, ...] | list[str] = (), requests: int = 10,
          errors: int = 0) -> dict[str, Any]:
    return {"broker": broker, "connection_id": n, "client_id": client, "host": "10.0.0.7",
            "roles": roles, "partitions": list(partitions), "groups": [],
            "requests": requests, "errors": errors, "opened_at": 0, "console": False}


def fifty_clients() -> list[dict[str, Any]]:
    """10 producers, 20 consumers of one group, 8 stream threads, 12 clients of their own."""
    names = ([f"orders-producer-{i}" for i in range(10)]
             + [f"billing-consumer-{i}" for i in range(20)]
             + [f"enricher-StreamThread-{i}" for i in range(8)]
             + [f"{w}-service" for w in ("search", "audit", "mail", "pricing", "fraud",
                                         "ledger", "stock", "cart", "ship", "promo",
                                         "report", "export")])
    conns, n = [], 0
    for i, name in enumerate(names):
        n += 1
        conns.append(_conn(n, name, i % BROKERS, ["bootstrap"]))
        for k in range(4):
            n += 1
            b = (i + 3 * k) % BROKERS
            conns.append(_conn(n, name, b, ["partition-leader"], [f"t{i}-{k}"], 100 + n))
        if "consumer" in name or "Stream" in name:
            n += 1
            conns.append(_conn(n, name, (i * 5) % BROKERS, ["group-coordinator"]))
    return conns


def test_fifty_clients_on_twelve_brokers_stay_readable(static_page: Page) -> None:
    conns = fifty_clients()
    look = {"brokers": [_broker(i) for i in range(BROKERS)], "connections": conns}
    static_page.evaluate(LIVE, [[look], False])
    svg = static_page.locator("#fan-box svg.fanout")
    assert svg.get_attribute("data-clients") == "50"
    height = float(svg.get_attribute("height") or 0)
    assert height <= 2 * 8 + 24 * 24, height          # 24 rows at most, not 50 clients
    assert static_page.locator(".fan-broker").count() == BROKERS
    geometry = static_page.evaluate("""() => {
        const rows = [...document.querySelectorAll('#fan-box .fan-row')];
        const box = (n) => { const r = n.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
        const edge = document.querySelector('#fan-box path.edge').getBoundingClientRect().left;
        return { labels: rows.map((g) => box(g.querySelector('text.label'))),
                 rects: rows.map((g) => box(g.querySelector('rect'))), edge,
                 kinds: rows.map((g) => g.dataset.kind) };
    }""")
    labels = sorted(geometry["labels"])
    assert len(labels) <= 24
    for (_, bottom_a, *_a), (top_b, *_b) in itertools.pairwise(labels):
        assert bottom_a <= top_b + 0.5, (labels, "two client labels overlap")
    for (_t, _b, left, right), rect in zip(geometry["labels"], geometry["rects"], strict=True):
        assert rect[2] <= left and right <= rect[3] and right <= geometry["edge"]
    assert {"group", "client"} <= set(geometry["kinds"])
    screenshot(static_page, "fanout-fifty-clients")
    edges = static_page.evaluate("""() => [...document.querySelectorAll('#fan-box path.edge')]
        .map((p) => ({ agg: p.classList.contains('agg'), count: +p.dataset.count,
                       role: p.dataset.role, broker: +p.dataset.broker }))""")
    assert sum(e["count"] for e in edges) == len(conns)       # every connection is drawn
    assert len(edges) < 0.6 * len(conns)                       # many of them as one edge
    assert any(e["agg"] and e["count"] > 1 for e in edges)
    assert {e["broker"] for e in edges} == set(range(BROKERS))
    by_role: dict[str, int] = {}
    for e in edges:
        by_role[e["role"]] = by_role.get(e["role"], 0) + e["count"]
    assert by_role == {"bootstrap": 50, "partition-leader": 200, "group-coordinator": 28}
    folded = _rows(static_page)
    # the keyboard: Enter on the folded consumers opens them (the rest fold into "more");
    # Enter on a client asks for its detail
    group = static_page.locator('.fan-row[data-key="group:billing-consumer"]')
    group.focus()
    static_page.keyboard.press("Enter")
    head = static_page.locator('.fan-row[data-key="group:billing-consumer"]')
    assert head.get_attribute("aria-expanded") == "true"
    assert static_page.evaluate("document.activeElement.dataset.key") == "group:billing-consumer"
    assert float(svg.get_attribute("height") or 0) <= 2 * 8 + 24 * 24
    assert static_page.locator('.fan-row[data-kind="more"]').count() == 1
    static_page.keyboard.press("Tab")
    assert static_page.evaluate("document.activeElement.dataset.key") == \
        "billing-consumer-0@10.0.0.7"
    static_page.keyboard.press("Enter")
    assert static_page.evaluate("window.__opened") == ["billing-consumer-0@10.0.0.7"]
    # "more" opens (a click) and folds back (Space, focus kept), then the opened group
    # folds back (Enter on its heading, focus kept): the rows return to what they were
    opened = _rows(static_page)
    more = static_page.locator('.fan-row[data-key="more"]')
    more.click()
    assert more.count() == 1, "the opened \"more\" row is there to fold them back"
    assert len(_rows(static_page)) > 24 and more.get_attribute("aria-expanded") == "true"
    assert float(svg.get_attribute("height") or 0) > 2 * 8 + 24 * 24
    more.focus()
    static_page.keyboard.press(" ")
    assert _rows(static_page) == opened and more.get_attribute("aria-expanded") == "false"
    assert static_page.evaluate("document.activeElement.dataset.key") == "more"
    head.focus()
    static_page.keyboard.press("Enter")
    assert _rows(static_page) == folded
    assert head.get_attribute("aria-expanded") == "false"
    assert static_page.evaluate("document.activeElement.dataset.key") == "group:billing-consumer"
    group.click()
    assert head.get_attribute("aria-expanded") == "true"
    group.click()
    assert _rows(static_page) == folded


def _rows(page: Page) -> list[str]:
    return page.evaluate("""() => [...document.querySelectorAll('#fan-box .fan-row')]
        .map((g) => `${g.dataset.kind} ${g.dataset.key}`)""")


def _two_looks() -> list[dict[str, Any]]:
    brokers = [_broker(i) for i in range(3)]
    first = [_conn(1, "app", 0, ["partition-leader"], ["t-0"], 50),
             _conn(2, "app", 1, ["partition-leader"], ["t-1"], 50),
             _conn(3, "app", 2, ["partition-leader"], ["t-2"], 50),
             _conn(4, "app", 0, ["group-coordinator"], [], 20),
             _conn(5, "tool", 1, ["admin"], [], 3)]
    second = [_conn(1, "app", 0, ["partition-leader"], ["t-0", "t-2"], 90),   # gained t-2
              _conn(2, "app", 1, ["partition-leader"], ["t-1"], 80, errors=2),  # errors
              _conn(4, "app", 0, ["group-coordinator"], [], 20),               # idle
              _conn(6, "tool", 0, ["admin"], [], 1)]                           # new; 5 closed
    return [{"brokers": brokers, "connections": first},
            {"brokers": [*brokers[:2], _broker(2, running=False)], "connections": second}]


def _marks(page: Page) -> dict[str, Any]:
    return page.evaluate(r"""() => {
        const edge = (sel) => [...document.querySelectorAll(`#fan-box path.edge${sel}`)]
            .map((p) => `${p.dataset.broker}:${p.dataset.conn ?? ''}`).sort();
        const err = document.querySelector('#fan-box path.edge.error');
        return { error: edge('.error'), opened: edge('.opened'), closed: edge('.closed'),
                 rerouted: edge('.rerouted'),
                 flash: err ? getComputedStyle(err).animationName : null,
                 pulses: document.querySelectorAll('#fan-box circle.pulse').length,
                 motions: document.querySelectorAll('#fan-box animateMotion').length,
                 busy: edge('.busy'),
                 down: [...document.querySelectorAll('.fan-broker[data-state="down"]')]
                     .map((g) => g.dataset.broker),
                 lines: [...document.querySelectorAll('#fan-events li')].map((l) => `${l.dataset.kind} ${l.textContent.replace(/^\d\d:\d\d:\d\d /, '')}`) };
    }""")


def test_two_looks_show_requests_errors_and_reroutes(static_page: Page) -> None:
    static_page.evaluate(LIVE, [_two_looks(), False])
    marks = _marks(static_page)
    assert marks["error"] == ["1:2"] and marks["flash"] == "fan-flash"
    assert marks["opened"] == ["0:6"] and marks["closed"] == ["1:5", "2:3"]
    assert marks["rerouted"] == ["0:1"]
    assert marks["busy"] == ["0:1", "1:2"]      # requests since the first look
    assert 0 < marks["pulses"] == marks["motions"]
    assert marks["down"] == ["2"]
    lines = "\n".join(marks["lines"])
    assert "rerouted app@10.0.0.7: re-routed broker 2 → broker 0: t-2" in lines
    assert "error app@10.0.0.7: 2 errors from broker 1" in lines
    assert "broker-down broker 2 down" in lines
    assert "closed tool@10.0.0.7: connection to broker 1 (admin) closed" in lines
    assert "opened tool@10.0.0.7 connected to broker 0 (admin)" in lines


def test_reduced_motion_keeps_the_state_without_motion(static_page: Page) -> None:
    static_page.emulate_media(reduced_motion="reduce")
    static_page.evaluate(LIVE, [_two_looks(), True])
    marks = _marks(static_page)
    assert marks["pulses"] == 0 and marks["motions"] == 0
    assert marks["error"] == ["1:2"] and marks["flash"] == "none"
    assert marks["rerouted"] == ["0:1"] and marks["down"] == ["2"]
    assert marks["busy"] == ["0:1", "1:2"]
    assert static_page.locator("#fan-box svg").get_attribute("data-motion") == "off"
    # without motion, an edge gone is removed at once, without fading
    static_page.evaluate("""() => { const live = window.__live, t = live.now();
        live.now = () => t + 6000; live.render(); }""")
    assert static_page.locator("#fan-box path.edge.closed, #fan-box .gone").count() == 0


TAG = """() => {
    const pick = () => ({
        svg: document.querySelector('#fan-box svg'),
        edge: document.querySelector('#fan-box path.edge[data-broker="0"][data-conn="1"]'),
        idle: document.querySelector('#fan-box path.edge[data-broker="0"][data-conn="4"]'),
        row: document.querySelector('#fan-box .fan-row[data-key="app@10.0.0.7"]'),
        broker: document.querySelector('#fan-box .fan-broker[data-broker="1"]'),
        dots: [...document.querySelectorAll('#fan-box circle.pulse')],
    });
    window.__pick = pick;
    window.__was = pick();
    for (const n of [window.__was.svg, window.__was.edge, window.__was.idle, window.__was.row,
                     window.__was.broker, ...window.__was.dots]) n.__fanTag = 'first';
}"""


def test_an_update_changes_the_picture_in_place(static_page: Page) -> None:
    """A look changes the same elements: an unchanged edge, its row, a broker and the
    dots of a still busy edge are the ones drawn the look before (dots move on, nothing
    flickers); a connection closed is its own edge drawn closed; an edge gone fades out
    and is removed."""
    first, second = _two_looks()
    static_page.evaluate(LIVE, [[first, second], False])
    static_page.evaluate(TAG)
    third = {"brokers": second["brokers"],
             "connections": [{**c, "requests": c["requests"] + (40 if c["connection_id"] == 1
                                                               else 30)}
                             for c in second["connections"] if c["connection_id"] != 4]}
    static_page.evaluate("(look) => window.__live.update(look)", third)
    kept = static_page.evaluate("""() => {
        const now = window.__pick(), was = window.__was;
        const same = (k) => now[k] === was[k] && now[k].__fanTag === 'first' && now[k].isConnected;
        return { svg: same('svg'), edge: same('edge'), idle: same('idle'), row: same('row'),
                 broker: same('broker'), closed: now.idle.classList.contains('closed'),
                 dots: was.dots.length, dotsKept: was.dots.filter((d) => d.isConnected
                     && d.classList.contains('pulse') && now.dots.includes(d)).length };
    }""")
    assert kept == {"svg": True, "edge": True, "idle": True, "row": True, "broker": True,
                    "closed": True, "dots": kept["dots"], "dotsKept": kept["dots"]}, kept
    assert kept["dots"] > 0
    moves = static_page.evaluate("""async () => {
        const dot = window.__was.dots[0], at = () => dot.getBoundingClientRect().x;
        const a = at();
        await new Promise((r) => setTimeout(r, 150));
        return [a, at()];
    }""")
    assert moves[0] != moves[1], moves                      # a kept dot goes on moving
    # five seconds on, the closed connections' edges fade out, then are gone
    static_page.evaluate("""() => { const live = window.__live, t = live.now();
        live.now = () => t + 6000; live.render(); }""")
    assert static_page.locator("#fan-box path.edge.closed").count() == 0
    assert static_page.locator("#fan-box path.edge-gone.gone").count() == 3
    static_page.wait_for_function(
        "() => !document.querySelector('#fan-box .gone')", timeout=5_000)
    assert static_page.evaluate("window.__pick().edge === window.__was.edge")
