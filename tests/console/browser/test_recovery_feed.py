"""The chaos page's recovery feed, fed the events the console's monitor makes for a broker
killed and brought back (``monitor.cluster_changes`` between snapshots of a 3-broker
cluster with the internal topics' 50 + 50 partitions), in the page's own module.

One broker line per change of state (the process stopping and the controller fencing it
are one "down" line), one line per topic between two broker lines, internal topics closed,
and the filters: topic text, kind of change, the internal-topic switch.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from kaflite.console.monitor import Row, Snapshot, cluster_changes

if TYPE_CHECKING:
    from playwright.sync_api import Page

VICTIM = 2
TOPICS = {"__consumer_offsets": 50, "__transaction_state": 50, "orders": 6, "clicks": 3}

Parts = dict[tuple[str, int], tuple[int, int, tuple[int, ...]]]
Brokers = dict[int, tuple[bool, bool, bool]]


def _kill_and_return() -> tuple[list[Row], list[Row]]:
    """The events of a kill (until the controller fenced the broker and moved its
    leaders) and of the return (registered, caught up)."""
    up: Brokers = {b: (True, False, True) for b in range(3)}
    parts: Parts = {(t, p): (p % 3, 0, (0, 1, 2)) for t, n in TOPICS.items() for p in range(n)}
    stopped = {**up, VICTIM: (True, False, False)}
    fenced = {**up, VICTIM: (False, False, False)}
    moved: Parts = {}
    for (t, p), (leader, epoch, isr) in parts.items():
        rest = tuple(b for b in isr if b != VICTIM)
        moved[(t, p)] = (rest[0], epoch + 1, rest) if leader == VICTIM else (leader, epoch, rest)
    restarted = {**up, VICTIM: (False, False, True)}
    rejoined: Parts = {k: (leader, epoch, (0, 1, 2)) for k, (leader, epoch, _) in moved.items()}
    steps: list[tuple[Brokers, Parts]] = [(up, parts), (stopped, parts), (fenced, moved)]
    kill: list[Row] = []
    for before, after in itertools.pairwise(steps):
        kill += cluster_changes(_snap(*before), _snap(*after))
    back_steps: list[tuple[Brokers, Parts]] = [(fenced, moved), (restarted, moved),
                                               (up, moved), (up, rejoined)]
    back: list[Row] = []
    for before, after in itertools.pairwise(back_steps):
        back += cluster_changes(_snap(*before), _snap(*after))
    return kill, back


def _snap(brokers: Brokers, parts: Parts) -> Snapshot:
    return brokers, parts


FEED = """async (events) => {
    const { recoveryFeed } = await import('/static/js/recovery.js');
    const feed = recoveryFeed();
    document.getElementById('panel').append(feed.root);
    window.__feed = feed;
    for (const ev of events) feed.add(ev);
}"""
ADD = "events => { for (const ev of events) window.__feed.add(ev); }"


def _lines(page: Page, selector: str = "") -> list[str]:
    return page.locator(f"#recovery > li{selector}").evaluate_all(
        "ls => ls.filter(l => !l.hidden).map(l => (l.querySelector('summary') || l).textContent)")


def _drawn(page: Page, n: int) -> None:
    """Until the feed has drawn ``n`` lines (it draws once a frame)."""
    page.wait_for_function("n => document.querySelectorAll('#recovery > li').length === n", arg=n)


def test_a_broker_kill_is_one_broker_line_and_one_line_per_topic(static_page: Page) -> None:
    page = static_page
    kill, _ = _kill_and_return()
    internal_changes = [e for e in kill if str(e.get("topic", "")).startswith("__")]
    assert len(internal_changes) >= 100      # what buried the user's topics before
    assert sum(e["change"] == "broker" for e in kill) == 2      # stopped, then fenced
    page.evaluate(FEED, kill)
    _drawn(page, 1 + len(TOPICS))
    brokers = _lines(page, ".broker")
    assert len(brokers) == 1, brokers
    assert f"broker {VICTIM}: down (its process stopped), then fenced by the controller" \
        in brokers[0]
    for topic, n in TOPICS.items():
        line = page.locator(f'#recovery > li[data-topic="{topic}"]')
        assert line.count() == 1, topic
        led = sum(1 for p in range(n) if p % 3 == VICTIM)
        assert line.get_attribute("data-changes") == str(led + n), topic  # leaders + ISRs
        leaders = f"{led} leader change{'s' if led != 1 else ''}"
        assert f"{leaders}, {n} ISR changes on {n} partitions" in line.inner_text()
    # internal topics folded shut; a short user topic open, its every change listed
    assert page.locator('#recovery > li[data-internal="1"] details[open]').count() == 0
    clicks = page.locator('#recovery > li[data-topic="clicks"]')
    assert clicks.locator("details[open]").count() == 1
    assert clicks.locator("ul.changes li").count() == 1 + 3
    assert "leaders now 2→0" in clicks.inner_text()
    # an internal topic's changes are there when asked for
    offsets = page.locator('#recovery > li[data-topic="__consumer_offsets"]')
    offsets.locator("summary").click()
    page.wait_for_function("() => document.querySelectorAll("
                           "'#recovery li[data-topic=\"__consumer_offsets\"] ul.changes li')"
                           ".length === 16 + 50")


def test_the_filters(static_page: Page) -> None:
    page = static_page
    kill, _ = _kill_and_return()
    # one topic whose ISR changed and no leader: the kind filter tells the two apart
    isr_only = [{"t": kill[-1]["t"], "change": "isr", "topic": "quiet", "partition": 0,
                 "isr": [0, 1]}]
    page.evaluate(FEED, kill + isr_only)
    _drawn(page, 2 + len(TOPICS))
    page.uncheck("#recovery-internal")
    topics = [t for t in TOPICS if not t.startswith("__")] + ["quiet"]
    assert {line.split(" ")[1].rstrip(":") for line in _lines(page, ".user")} == set(topics)
    assert _lines(page, ".internal") == []
    assert page.inner_text("#recovery-count") == f"{1 + len(topics)} of {2 + len(TOPICS)} lines"
    page.fill("#recovery-filter", "ord")
    assert len(_lines(page, ".user")) == 1 and len(_lines(page, ".broker")) == 1
    page.fill("#recovery-filter", "")
    page.check("#recovery-internal")
    page.select_option("#recovery-kind", "leader")
    shown = {line.split(" ")[1].rstrip(":") for line in _lines(page, "[data-topic]")}
    assert shown == set(TOPICS)       # "quiet" had no leader change
    page.select_option("#recovery-kind", "broker")
    assert _lines(page, "[data-topic]") == [] and len(_lines(page)) == 1


def test_a_return_starts_new_lines(static_page: Page) -> None:
    page = static_page
    kill, back = _kill_and_return()
    page.evaluate(FEED, kill)
    _drawn(page, 1 + len(TOPICS))
    page.evaluate(ADD, back)
    _drawn(page, 2 * (1 + len(TOPICS)))
    brokers = _lines(page, ".broker")       # newest first
    assert len(brokers) == 2, brokers
    assert f"broker {VICTIM}: up" in brokers[0] and "down" in brokers[1]
    for topic in TOPICS:     # the ISRs growing back: one more line each, after "up"
        assert page.locator(f'#recovery > li[data-topic="{topic}"]').count() == 2
    order = page.locator("#recovery > li").evaluate_all("ls => ls.map(l => l.dataset.change)")
    assert order[len(TOPICS)] == "broker" and order[-1] == "broker"
