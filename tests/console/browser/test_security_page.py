"""The Security page (SCRAM users, ACLs, client quotas) and the group reset's "back by a
duration" and "shift by N", in Chromium against a kaflite cluster with SASL and an
authorizer. Each change made on the page is checked by its effect on a real client:
a user added on the page logs in with SCRAM, an ACL added there lets it see a topic,
and removing them takes both away again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import httpx
import pytest

from kaflite.cluster import Cluster
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import Console, serve_console
from tests.console.test_security import CONFIG, USERS

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytest.importorskip("confluent_kafka")

TOPIC, GROUP = "payments", "audit"
DEV, DEV_PASSWORD = "dev", "dev-secret-1"
OLD, NEW = 6, 4                       # records per partition: 2 h old, then from now
HOUR_MS = 3_600_000


def _sasl(user: str, password: str, mechanism: str = "PLAIN") -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def _admin_config(cluster: Cluster) -> dict[str, str]:
    return {"bootstrap.servers": cluster.bootstrap_servers, **_sasl("admin", USERS["admin"])}


def _seed(cluster: Cluster) -> None:
    """The topic, with OLD records per partition two hours old and NEW from now, and a
    group (gone, so Empty) whose committed offsets are at the end."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(_admin_config(cluster))
    for f in admin.create_topics([NewTopic(TOPIC, 2, 1)], operation_timeout=30).values():
        f.result(30)
    producer = Producer({**_admin_config(cluster), "linger.ms": 5})
    now = int(time.time() * 1000)
    for p in range(2):
        for i in range(OLD + NEW):
            at = now - 2 * HOUR_MS + i if i < OLD else now + i
            producer.produce(TOPIC, f"{p}-{i}".encode(), partition=p, timestamp=at)
    assert producer.flush(30) == 0
    consumer = Consumer({**_admin_config(cluster), "group.id": GROUP,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(TOPIC, p, OLD + NEW) for p in range(2)],
                    asynchronous=False)
    consumer.close()


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[Cluster, Console]]:
    with Cluster(brokers=1, listeners="SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                 config=CONFIG) as cluster:
        _seed(cluster)
        with serve_console(cluster) as console:
            yield cluster, console


@pytest.fixture(scope="module")
def page(browser: Browser, secured: tuple[Cluster, Console]) -> Iterator[Page]:
    _, console = secured
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.on("dialog", lambda dialog: dialog.accept())     # "Remove ...?": yes
    page.goto(f"{console.url}/?token={console.token}")
    try:
        yield page
    finally:
        context.close()


def _topics_seen_by_dev(cluster: Cluster) -> set[str] | None:
    """The topics the user dev sees, logged in with SCRAM-SHA-512; None when it cannot
    log in."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers,
                         **_sasl(DEV, DEV_PASSWORD, "SCRAM-SHA-512")})
    try:
        return set(admin.list_topics(timeout=6).topics)
    except KafkaException:
        return None


def _wait(predicate: object, what: str, timeout_s: float = 20) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_a_user_and_an_acl_added_and_removed_from_the_page(
        page: Page, secured: tuple[Cluster, Console]) -> None:
    cluster, _ = secured
    assert _topics_seen_by_dev(cluster) is None            # no such user yet
    open_panel(page, f"{secured[1].url}/", "security")
    page.fill("#add-user input[name=user]", DEV)
    page.fill("#add-user input[name=password]", DEV_PASSWORD)
    page.select_option("#add-user select[name=mechanism]", "SCRAM-SHA-512")
    page.click("#add-user button[type=submit]")
    row = page.locator(f'table[data-table="users"] tr[data-user="{DEV}"]')
    row.wait_for()
    assert "SCRAM-SHA-512 (4096)" in row.inner_text()
    assert page.input_value("#add-user input[name=password]") == ""
    assert _topics_seen_by_dev(cluster) == set()           # logs in; may see nothing

    page.fill("#add-acl input[name=principal]", f"User:{DEV}")
    page.select_option("#add-acl select[name=operation]", "READ")
    page.select_option("#add-acl select[name=resource_type]", "TOPIC")
    page.fill("#add-acl input[name=name]", TOPIC)
    page.click("#add-acl button[type=submit]")
    acl = page.locator(f'table[data-table="acls"] tr[data-principal="User:{DEV}"]')
    acl.wait_for()
    assert acl.locator("td").all_inner_texts()[:7] == [
        f"User:{DEV}", "ALLOW", "READ", "TOPIC", TOPIC, "LITERAL", "*"]
    _wait(lambda: _topics_seen_by_dev(cluster) == {TOPIC}, "dev sees the topic")
    screenshot(page, "security")

    acl.locator("button").click()
    acl.wait_for(state="detached")
    _wait(lambda: _topics_seen_by_dev(cluster) == set(), "the topic is hidden again")
    row.locator("button").click()
    row.wait_for(state="detached")
    _wait(lambda: _topics_seen_by_dev(cluster) is None, "dev can no longer log in")


def test_a_quota_set_and_removed_from_the_page(
        page: Page, secured: tuple[Cluster, Console]) -> None:
    _, console = secured
    open_panel(page, f"{console.url}/", "security")
    page.select_option("#set-quota select[name=entity_type]", "user")
    page.fill("#set-quota input[name=entity_name]", DEV)
    page.select_option("#set-quota select[name=key]", "producer_byte_rate")
    page.fill("#set-quota input[name=value]", "1048576")
    page.click("#set-quota button[type=submit]")
    cell = page.locator('table[data-table="quotas"] tr', has_text=f"user '{DEV}'")
    cell.wait_for()
    assert "producer_byte_rate=1048576" in cell.inner_text()
    quotas = httpx.get(f"{console.url}/api/quotas", timeout=10).json()["quotas"]
    assert {"entity": {"user": DEV}, "values": {"producer_byte_rate": 1048576.0}} in quotas
    page.fill("#set-quota input[name=value]", "")
    page.click("#set-quota button[type=submit]")
    cell.wait_for(state="detached")
    assert httpx.get(f"{console.url}/api/quotas", timeout=10).json()["quotas"] == []


def _committed(page: Page) -> dict[int, int]:
    rows = page.locator('table[data-table="offsets"] tbody tr').evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    return {int(r[1]): int(r[2]) for r in rows if r[0] == TOPIC}


def _wait_all_committed(page: Page, offset: int) -> None:
    page.wait_for_function("o => [...document.querySelectorAll("
                           "'table[data-table=\"offsets\"] tbody tr')].every("
                           "r => r.cells[2].textContent === String(o))", arg=offset)


def test_reset_back_by_a_duration_then_shift(
        page: Page, secured: tuple[Cluster, Console]) -> None:
    """Back by 1h: the first record newer than an hour ago (the first of the NEW ones);
    then shift by -2: two records further back."""
    _, console = secured
    open_panel(page, f"{console.url}/", f"groups/{GROUP}")
    page.wait_for_function("() => document.querySelectorAll("
                           "'table[data-table=\"offsets\"] tbody tr').length === 2")
    assert _committed(page) == {0: OLD + NEW, 1: OLD + NEW}
    page.select_option("#reset-offsets select[name=to]", "duration")
    page.fill("#reset-offsets input[name=duration]", "1h")
    page.click("#reset-offsets button[type=submit]")
    _wait_all_committed(page, OLD)
    assert _committed(page) == {0: OLD, 1: OLD}
    page.select_option("#reset-offsets select[name=to]", "shift")
    page.fill("#reset-offsets input[name=shift]", "-2")
    page.click("#reset-offsets button[type=submit]")
    _wait_all_committed(page, OLD - 2)
    # a bad duration is refused, and nothing moves
    page.select_option("#reset-offsets select[name=to]", "duration")
    page.fill("#reset-offsets input[name=duration]", "soon")
    page.click("#reset-offsets button[type=submit]")
    page.wait_for_selector(f'section[data-group="{GROUP}"] .error-text:has-text("400")')
    assert _committed(page) == {0: OLD - 2, 1: OLD - 2}
