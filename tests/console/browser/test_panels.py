"""The console page in a real Chromium, against a 3-broker cluster with real traffic.

One module-scoped cluster (its console served on loopback), traffic from confluent-kafka and
kaflite clients, one browser. Each panel loads and is photographed into docs/console/; the
produce form writes a record a confluent-kafka consumer reads back; a group's lag on the page
equals the lag computed from the log; state changes without the token are refused and
malformed input gets a clear message; a broker killed from the page shows as down, and its
partitions' new leaders appear on an open cluster page without a reload.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from kaflite.cluster import Cluster
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import Console, serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytest.importorskip("confluent_kafka")

ORDERS, LAGGED = "orders", "lagged"
READERS, LAG_GROUP = "orders-readers", "lag-group"
COMMITTED = [7, 19, 3]          # the lag group's committed offsets, partitions 0..2


@dataclass
class Env:
    cluster: Cluster
    console: Console

    @property
    def url(self) -> str:        # the page as `kaflite up` prints it: with the token
        return f"{self.console.url}/?token={self.console.token}"


def _confluent_traffic(cluster: Cluster, stop: threading.Event) -> threading.Thread:
    """A confluent-kafka consumer in a group, reading orders until stopped."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": READERS,
                         "client.id": "cf-reader", "auto.offset.reset": "earliest",
                         "enable.auto.commit": True, "auto.commit.interval.ms": 500})
    consumer.subscribe([ORDERS])

    def run() -> None:
        try:
            while not stop.is_set():
                consumer.poll(0.2)
        finally:
            consumer.close()

    thread = threading.Thread(target=run, name="cf-reader", daemon=True)
    thread.start()
    return thread


def _produce(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics([NewTopic(ORDERS, 6, 3), NewTopic(LAGGED, 3, 3)],
                                  operation_timeout=30)
    for f in futures.values():
        f.result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                         "client.id": "cf-producer", "linger.ms": 5})
    for i in range(300):
        producer.produce(ORDERS, json.dumps({"order": i, "item": f"widget-{i % 7}"}).encode(),
                         f"customer-{i % 11}".encode(), headers=[("source", b"confluent")])
    for p in range(3):
        for i in range(40 + 10 * p):
            producer.produce(LAGGED, f"lagged-{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    # The lag group: committed offsets, then gone (Empty), so its lag stays put.
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": LAG_GROUP,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(LAGGED, p, o) for p, o in enumerate(COMMITTED)],
                    asynchronous=False)
    consumer.close()
    # A kaflite producer too (its own client id in the registry and the log).
    from kaflite.client.sync import Producer as SyncProducer

    with SyncProducer[bytes, bytes](bootstrap_servers=cluster.bootstrap_servers,
                                    client_id="kaflite-producer") as kp:
        for i in range(50):
            kp.send(ORDERS, f"kaflite-{i}".encode(), key=f"k{i}".encode())


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    config = {"group.initial.rebalance.delay.ms": 0, "replica.lag.time.max.ms": 10000,
              "offsets.topic.num.partitions": 3}
    with Cluster(brokers=3, config=config) as cluster:
        _produce(cluster)
        stop = threading.Event()
        reader = _confluent_traffic(cluster, stop)
        try:
            with serve_console(cluster) as console:
                yield Env(cluster, console)
        finally:
            stop.set()
            reader.join(15)


@pytest.fixture(scope="module")
def page(browser: Browser, env: Env) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())     # "Delete ...?": yes
    page.goto(env.url)
    try:
        yield page
    finally:
        context.close()


def _cell(page: Page, table: str, key: str, col: str) -> str:
    return page.locator(f'.vtable[data-table="{table}"] .vt-row[data-key="{key}"] '
                        f'[data-col="{col}"]').inner_text()


def test_cluster_panel(page: Page, env: Env) -> None:
    open_panel(page, env.url, "cluster")
    rows = page.locator("table.brokers tbody tr")
    assert rows.count() == 3
    assert [rows.nth(i).get_attribute("data-state") for i in range(3)] == ["up"] * 3
    page.fill("section:has(.vtable[data-table=partitions]) input.filter", ORDERS)
    page.wait_for_selector(f'.vt-row[data-key="{ORDERS}-5"]')
    leaders = env.cluster.controller.topics[ORDERS].partitions
    for p in range(6):
        assert _cell(page, "partitions", f"{ORDERS}-{p}", "leader") == str(leaders[p].leader)
        assert _cell(page, "partitions", f"{ORDERS}-{p}", "replicas") != ""
    page.fill("section:has(.vtable[data-table=partitions]) input.filter", "")
    page.click(f'.vt-row[data-key="{ORDERS}-0"]')
    page.wait_for_selector('#topic-configs tr[data-config="retention.ms"]')
    screenshot(page, "cluster")


def test_topics_panel_browses_messages(page: Page, env: Env) -> None:
    open_panel(page, env.url, "topics")
    page.wait_for_selector(f'.vtable[data-table="topics"] .vt-row[data-key="{ORDERS}"]')
    open_panel(page, env.url, f"topics/{ORDERS}")
    page.wait_for_selector(f'section[data-topic="{ORDERS}"]')
    form = page.locator("#browse")
    form.locator("select[name=from]").select_option("earliest")
    form.locator("select[name=partition]").select_option("")
    form.locator("input[name=search]").fill("widget-3")
    form.locator("select[name=render]").select_option("json")
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#messages table.records tbody tr")
    values = page.locator("#messages table.records tbody tr td:nth-child(5)").all_inner_texts()
    # Every order i with i % 7 == 3 is found, pretty-printed as JSON.
    assert len(values) == len([i for i in range(300) if i % 7 == 3])
    assert all('"item": "widget-3"' in v for v in values)
    screenshot(page, "topics")


def test_produce_form_record_read_by_confluent(page: Page, env: Env) -> None:
    from confluent_kafka import Consumer, TopicPartition

    open_panel(page, env.url, "produce")
    page.fill("#produce input[name=topic]", ORDERS)
    page.fill("#produce input[name=key]", "customer-42")
    page.fill("#produce textarea[name=value]", '{"order": "from the page"}')
    page.fill("#produce textarea[name=headers]", "origin=console")
    page.click("#produce button[type=submit]")
    page.wait_for_selector("#produced-offset")
    partition = int(page.inner_text("#produced-partition"))
    offset = int(page.inner_text("#produced-offset"))
    steps = page.locator("ol.trace li").evaluate_all("els => els.map(e => e.dataset.step)")
    for step in ("partition", "metadata", "produce", "response"):
        assert step in steps, steps
    screenshot(page, "produce")
    consumer = Consumer({"bootstrap.servers": env.cluster.bootstrap_servers,
                         "group.id": "produce-check", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(ORDERS, partition, offset)])
        msg = None
        deadline = time.monotonic() + 20
        while msg is None and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
        assert msg is not None and msg.error() is None
        assert (msg.partition(), msg.offset()) == (partition, offset)
        assert msg.key() == b"customer-42"
        assert msg.value() == b'{"order": "from the page"}'
        assert msg.headers() == [("origin", b"console")]
    finally:
        consumer.close()


def test_group_lag_on_the_page_equals_the_log(page: Page, env: Env) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": env.cluster.bootstrap_servers,
                         "group.id": LAG_GROUP, "enable.auto.commit": False})
    try:
        committed = consumer.committed([TopicPartition(LAGGED, p) for p in range(3)], 10)
        expected = {}
        for tp in committed:
            _low, high = consumer.get_watermark_offsets(TopicPartition(LAGGED, tp.partition), 10)
            expected[tp.partition] = high - tp.offset
    finally:
        consumer.close()
    open_panel(page, env.url, "groups")
    page.wait_for_selector(f'.vtable[data-table="groups"] .vt-row[data-key="{READERS}"]')
    page.wait_for_selector(f'.vtable[data-table="groups"] .vt-row[data-key="{LAG_GROUP}"]')
    open_panel(page, env.url, f"groups/{LAG_GROUP}")
    page.wait_for_selector('table[data-table="offsets"] tbody tr')
    assert page.get_attribute(f'section[data-group="{LAG_GROUP}"] .muted', "data-lag") == str(
        sum(expected.values()))
    rows = page.locator('table[data-table="offsets"] tbody tr').evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert {int(r[1]): int(r[4]) for r in rows if r[0] == LAGGED} == expected
    screenshot(page, "groups")


def test_reset_and_delete_a_group_from_the_page(page: Page, env: Env) -> None:
    """After the lag check: the empty group's offsets reset to latest (lag 0), then deleted."""
    from confluent_kafka.admin import AdminClient

    open_panel(page, env.url, f"groups/{LAG_GROUP}")
    page.select_option("#reset-offsets select[name=to]", "latest")
    page.click("#reset-offsets button[type=submit]")
    page.wait_for_selector(f'section[data-group="{LAG_GROUP}"] .muted[data-lag="0"]')
    page.click("#delete-group")
    page.wait_for_function("() => location.hash === '#groups'")
    admin = AdminClient({"bootstrap.servers": env.cluster.bootstrap_servers})
    listed = admin.list_consumer_groups().result(10)
    assert LAG_GROUP not in {g.group_id for g in listed.valid}
    assert READERS in {g.group_id for g in listed.valid}


def test_topic_admin_from_the_page(page: Page, env: Env) -> None:
    """Create a topic with a config, add partitions, change a config, delete it."""
    topics = env.cluster.controller.topics
    open_panel(page, env.url, "topics")
    page.fill("#create-topic input[name=name]", "page-made")
    page.fill("#create-topic input[name=partitions]", "2")
    page.fill("#create-topic input[name=replication_factor]", "3")
    page.fill("#create-topic textarea[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button[type=submit]")
    page.wait_for_selector('section[data-topic="page-made"]')
    assert len(topics["page-made"].partitions) == 2
    assert topics["page-made"].configs.get("retention.ms") == "3600000"
    page.fill("#add-partitions input[name=count]", "4")
    page.click("#add-partitions button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll("
                           "'#browse select[name=partition] option').length === 5")
    assert len(topics["page-made"].partitions) == 4
    page.fill("#edit-config input[name=name]", "cleanup.policy")
    page.fill("#edit-config input[name=value]", "compact")
    page.click("#edit-config button[type=submit]")
    page.wait_for_function("""() => {
        const row = document.querySelector('tr[data-config="cleanup.policy"]');
        return row && row.cells[1].textContent === "compact";
    }""")
    assert topics["page-made"].configs.get("cleanup.policy") == "compact"
    page.click("#delete-topic")
    page.wait_for_function("() => location.hash === '#topics'")
    deadline = time.monotonic() + 10
    while "page-made" in topics and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "page-made" not in topics


def test_faults_from_the_chaos_page(page: Page, env: Env) -> None:
    """Inject an error rule, see it listed, remove it; move a leader."""
    faults = env.cluster.faults
    open_panel(page, env.url, "chaos")
    form = page.locator("#inject-error")
    form.locator("input[name=api]").fill("Produce")
    form.locator("input[name=error]").fill("NOT_ENOUGH_REPLICAS")
    form.locator("input[name=count]").fill("2")
    form.locator("input[name=topic]").fill(ORDERS)
    form.locator("button[type=submit]").click()
    page.wait_for_selector("#faults tr[data-rule]")
    [rule] = faults.rules()
    assert page.get_attribute("#faults tr[data-rule]", "data-rule") == str(rule.id)
    page.click(f'#faults tr[data-rule="{rule.id}"] button')
    page.wait_for_selector("#faults tr[data-rule]", state="detached")
    assert faults.rules() == []
    partition = env.cluster.controller.topics[ORDERS].partitions[1]
    before, to = partition.leader, next(b for b in partition.isr if b != partition.leader)
    move = page.locator("#move-leader")
    move.locator("input[name=topic]").fill(ORDERS)
    move.locator("input[name=partition]").fill("1")
    move.locator("input[name=to]").fill(str(to))
    move.locator("button[type=submit]").click()
    page.wait_for_selector(f'#recovery > li[data-topic="{ORDERS}"] li[data-change="leader"]'
                           f':has-text("partition 1: leader {before} → {to}")')
    assert env.cluster.controller.topics[ORDERS].partitions[1].leader == to
    bad = page.locator("#inject-delay")
    bad.locator("input[name=api]").fill("Fetch")
    bad.locator("input[name=ms]").fill("soon")
    bad.locator("button[type=submit]").click()
    page.wait_for_function("() => /40[09]/.test(document.querySelector("
                           "'#chaos-brokers + .error-text').textContent)")
    assert faults.rules() == []


def _coordinator_shown(page: Page, group: str, broker: int) -> None:
    cell = (f'.vtable[data-table="groups"] .vt-row[data-key="{group}"] '
            '[data-col="coordinator"]')
    page.wait_for_function(
        "([sel, want]) => document.querySelector(sel)?.textContent.trim() === want",
        arg=[cell, str(broker)], timeout=20_000)


def test_move_a_coordinator_from_the_chaos_page(page: Page, env: Env) -> None:
    """The groups panel shows a group's coordinator; moved from the chaos page, the group's
    row shows the new one (the cluster's own lookup) without a reload."""
    faults = env.cluster.faults
    topic, index, before = faults.coordinator_of(READERS)
    open_panel(page, env.url, "groups")
    _coordinator_shown(page, READERS, before)
    isr = env.cluster.controller.topics[topic].partitions[index].isr
    to = next(b for b in isr if b != before)
    open_panel(page, env.url, "chaos")
    move = page.locator("#move-coordinator")
    move.locator("input[name=key]").fill(READERS)
    move.locator("input[name=to]").fill(str(to))
    move.locator("button[type=submit]").click()
    line = page.locator(f'#recovery > li[data-topic="{topic}"]')    # internal: folded
    line.wait_for()
    line.locator("summary").click()
    line.locator(f'li[data-change="leader"]:has-text("partition {index}: leader {before} → {to}")'
                 ).wait_for()
    assert faults.coordinator_of(READERS)[2] == to
    page.goto(f"{env.url}#groups")
    _coordinator_shown(page, READERS, to)


def test_read_committed_hides_an_aborted_transaction(page: Page, env: Env) -> None:
    """The message browser's isolation: an aborted transaction's records show with
    read_uncommitted and not with read_committed; committed ones show with both."""
    from confluent_kafka import Producer

    topic = "txn-browse"
    env.cluster.create_topic(topic, 1, 3)
    producer = Producer({"bootstrap.servers": env.cluster.bootstrap_servers,
                         "transactional.id": "console-browse-txn"})
    producer.init_transactions(20)
    for outcome in ("commit", "abort", "commit"):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, f"{outcome}-{i}".encode(), partition=0)
        producer.flush(20)
        if outcome == "commit":
            producer.commit_transaction(20)
        else:
            producer.abort_transaction(20)
    open_panel(page, env.url, f"topics/{topic}")
    page.wait_for_selector(f'section[data-topic="{topic}"]')
    form = page.locator("#browse")
    form.locator("select[name=from]").select_option("earliest")

    def browse(isolation: str) -> list[str]:
        form.locator("select[name=isolation]").select_option(isolation)
        form.locator("button[type=submit]").click()
        page.wait_for_selector(f'#messages .muted:has-text("({isolation};")')
        return page.locator("#messages table.records tbody tr td:nth-child(5)"
                            ).all_inner_texts()

    committed = ["commit-0", "commit-1", "commit-2"]
    aborted = ["abort-0", "abort-1", "abort-2"]
    assert browse("read_uncommitted") == [*committed, *aborted, *committed]
    assert browse("read_committed") == [*committed, *committed]
    assert browse("read_uncommitted")[3:6] == aborted


def test_connections_panel(page: Page, env: Env) -> None:
    open_panel(page, env.url, "connections")
    page.fill("section:has(.vtable[data-table=clients]) input.filter", "cf-reader")
    row = page.locator('.vtable[data-table="clients"] .vt-row', has_text="cf-reader").first
    row.wait_for()
    row.click()
    page.wait_for_selector("#fanout svg.fanout")
    svg = page.locator("#fanout svg.fanout")
    shown = int(svg.get_attribute("data-connections") or -1)
    registry = env.cluster.connections(client_id="cf-reader")
    assert shown == len(registry) > 0
    assert page.locator("#fanout svg line").count() == shown
    screenshot(page, "connections")
    # the console's own clients show only when asked for
    page.fill("section:has(.vtable[data-table=clients]) input.filter", "kaflite-console")
    mine = page.locator('.vtable[data-table="clients"] .vt-row', has_text="kaflite-console")
    assert mine.count() == 0
    page.check("#show-console")
    mine.first.wait_for()
    page.uncheck("#show-console")
    page.wait_for_function(     # pooled rows are hidden, not removed
        "() => ![...document.querySelectorAll('.vtable[data-table=clients] .vt-row')]"
        ".some(r => r.offsetParent && r.textContent.includes('kaflite-console'))")


def test_client_log_panel(page: Page, env: Env) -> None:
    open_panel(page, env.url, "log")
    page.wait_for_selector('.vtable[data-table="log"] .vt-row')
    screenshot(page, "log")
    kinds = page.locator("#log-kind option").evaluate_all("os => os.map(o => o.value)")
    assert "connect" in kinds, kinds
    total = page.locator('.vtable[data-table="log"] .vt-row').count()
    page.select_option("#log-kind", "connect")
    page.wait_for_function("""() => {
        const kinds = [...document.querySelectorAll(
            '.vtable[data-table="log"] .vt-row[data-key] [data-col="kind"]')];
        return kinds.length > 0 && kinds.every(k => k.textContent === "connect");
    }""")
    shown = page.locator('.vtable[data-table="log"] .vt-row[data-key] [data-col="kind"]')
    assert 0 < shown.count() <= total
    page.fill("#log-client", "cf-reader")
    page.wait_for_function("""() => {
        const rows = [...document.querySelectorAll('.vtable[data-table="log"] .vt-row[data-key]')];
        return rows.length > 0 && rows.every(r =>
            r.querySelector('[data-col="client"]').textContent === "cf-reader" &&
            r.querySelector('[data-col="kind"]').textContent === "connect");
    }""")


def test_charts_panel(page: Page, env: Env) -> None:
    open_panel(page, env.url, "charts")
    page.wait_for_selector(".chart .uplot", state="attached")
    assert page.locator("[data-chart] .uplot").count() == 7
    # The confluent-kafka reader keeps fetching: consumers' Fetch has a line in the
    # request-rate chart (followers' apart), every broker one in the per-broker charts.
    page.wait_for_selector('[data-chart="requests/s by API"] .u-legend '
                           '.u-label:text-is("FetchConsumer")', timeout=15_000)
    labels = page.locator('[data-chart="bytes/s out per broker"] .u-legend .u-label')
    assert labels.all_inner_texts()[1:] == ["0", "1", "2"]     # after the x axis' "Time"
    screenshot(page, "charts")


def test_state_changes_need_the_token(browser: Browser, env: Env) -> None:
    context = browser.new_context()     # its own sessionStorage: no token
    page = context.new_page()
    try:
        page.goto(f"{env.console.url}/#topics")
        page.wait_for_selector('#panel[data-ready="1"]')
        page.fill("#create-topic input[name=name]", "no-token-topic")
        page.click("#create-topic button[type=submit]")
        error = page.locator("#create-topic-error")
        error.wait_for()
        page.wait_for_function("e => e.textContent.length > 0", arg=error.element_handle())
        assert "401" in error.inner_text()
        assert "no-token-topic" not in env.cluster.controller.topics
    finally:
        context.close()


def test_malformed_input_gets_clear_errors(page: Page, env: Env) -> None:
    open_panel(page, env.url, "topics")
    error = page.locator("#create-topic-error")
    page.fill("#create-topic input[name=name]", "bad name!")
    page.click("#create-topic button[type=submit]")
    page.wait_for_function("e => e.textContent.includes('illegal')", arg=error.element_handle())
    assert "400" in error.inner_text()
    assert "bad name!" not in env.cluster.controller.topics
    page.fill("#create-topic input[name=name]", "fine-name")
    page.fill("#create-topic input[name=partitions]", "0")
    page.click("#create-topic button[type=submit]")
    page.wait_for_function("e => e.textContent.includes('partitions')", arg=error.element_handle())
    assert "fine-name" not in env.cluster.controller.topics
    open_panel(page, env.url, "produce")
    page.fill("#produce input[name=topic]", ORDERS)
    page.fill("#produce input[name=partition]", "many")
    page.click("#produce button[type=submit]")
    produce_error = page.locator("#produce-error")
    page.wait_for_function("e => e.textContent.includes('partition')",
                           arg=produce_error.element_handle())
    assert "400" in produce_error.inner_text()


def test_partitions_route_is_every_topic_route_in_one(env: Env) -> None:
    """GET /api/partitions (the page's bulk load) answers what GET /api/topics/{name} does
    for every topic, without the configs; internal topics only when asked."""
    import httpx

    with httpx.Client(base_url=env.console.url, timeout=30) as c:
        bulk = c.get("/api/partitions").json()["topics"]
        names = [t["name"] for t in c.get("/api/topics").json()]
        assert [t["name"] for t in bulk] == names and ORDERS in names
        for topic in bulk:
            one = c.get(f"/api/topics/{topic['name']}").json()
            del one["configs"]
            for p, q in zip(topic["partitions"], one["partitions"], strict=True):
                # offsets and sizes may grow between the two calls (the reader commits)
                assert {k: v for k, v in p.items() if k in ("partition", "replicas")} == \
                    {k: v for k, v in q.items() if k in ("partition", "replicas")}
            assert topic.keys() == one.keys()
        with_internal = c.get("/api/partitions", params={"internal": 1}).json()["topics"]
        assert "__consumer_offsets" in {t["name"] for t in with_internal}
        assert "__consumer_offsets" not in names


def test_isolate_and_heal_a_broker_from_the_page(page: Page, env: Env) -> None:
    open_panel(page, env.url, "chaos")
    row = '#chaos-brokers tr[data-broker="2"]'
    page.click(f'{row} button[data-action="isolate"]')
    page.wait_for_selector(f'{row}[data-state="isolated"]')
    assert env.cluster.controller.brokers[2].fenced_replication
    page.click(f'{row} button[data-action="isolate"]')     # now labelled "heal"
    page.wait_for_selector(f'{row}[data-state="up"]')
    assert not env.cluster.controller.brokers[2].fenced_replication


def _recovery_told_once(chaos: Page, victim: int) -> None:
    """The chaos page's feed after the kill: one line says the broker is down, one line per
    topic tells its leader and ISR changes (the internal topics' too, folded shut), none
    twice. (test_recovery_feed.py: a process stopping, then fenced, is still one line.)"""
    chaos.wait_for_selector(f'#recovery > li.broker[data-broker="{victim}"][data-state="down"]',
                            timeout=20_000)
    for topic in (ORDERS, "__consumer_offsets"):
        chaos.wait_for_selector(f'#recovery > li[data-topic="{topic}"]', timeout=20_000)
    lines = chaos.locator("#recovery > li").evaluate_all(
        "ls => ls.map(l => [l.dataset.change, l.dataset.topic || l.dataset.broker])")
    assert lines.count(["broker", str(victim)]) == 1, lines
    topics = [name for change, name in lines if change == "partitions"]
    assert len(topics) == len(set(topics)), lines
    assert chaos.locator('#recovery > li[data-internal="1"] details[open]').count() == 0
    assert "leader" in chaos.inner_text(f'#recovery > li[data-topic="{ORDERS}"] summary')


def test_kill_a_broker_from_the_page(browser: Browser, page: Page, env: Env) -> None:
    """Last: a broker killed on the chaos page shows as down on an open cluster page, with
    its partitions' new leaders, without a reload; then it is restarted from the page."""
    open_panel(page, env.url, "cluster")
    page.fill("section:has(.vtable[data-table=partitions]) input.filter", ORDERS)
    victim = env.cluster.controller.topics[ORDERS].partitions[0].leader
    led = [p.partition for p in env.cluster.controller.topics[ORDERS].partitions
           if p.leader == victim]
    page.evaluate("window.__sameDocument = true")
    chaos = page.context.new_page()
    try:
        open_panel(chaos, env.url, "chaos")
        chaos.wait_for_selector('#recovery-feed[data-live="1"]')     # its stream is open
        chaos.click(f'#chaos-brokers tr[data-broker="{victim}"] button[data-action="kill"]')
        page.wait_for_selector(f'table.brokers tr[data-broker="{victim}"][data-state="down"]',
                               timeout=20_000)
        for p in led:
            page.wait_for_function(
                """([key, victim]) => {
                    const c = document.querySelector(
                        `.vt-row[data-key="${key}"] [data-col="leader"]`);
                    return c && c.textContent !== String(victim) && c.textContent !== "none";
                }""", arg=[f"{ORDERS}-{p}", victim], timeout=20_000)
            now = env.cluster.controller.topics[ORDERS].partitions[p].leader
            assert _cell(page, "partitions", f"{ORDERS}-{p}", "leader") == str(now)
        assert page.evaluate("window.__sameDocument") is True     # no reload
        screenshot(page, "cluster-broker-down")
        _recovery_told_once(chaos, victim)
        screenshot(chaos, "chaos")
        chaos.click(f'#chaos-brokers tr[data-broker="{victim}"] button[data-action="restart"]')
        page.wait_for_selector(f'table.brokers tr[data-broker="{victim}"][data-state="up"]',
                               timeout=30_000)
    finally:
        chaos.close()
