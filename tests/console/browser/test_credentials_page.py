"""The page on a kaflite cluster with SASL users and an authorizer: a user of the cluster,
typed as user:password in the token box, may change state (sent as HTTP Basic and checked
against the cluster's credential store); a user who is not a super user may not."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from kaflite.cluster import Cluster
from tests.console.browser.serve import Console, serve_console
from tests.console.test_security import CONFIG

if TYPE_CHECKING:
    from playwright.sync_api import Browser


@pytest.fixture(scope="module")
def secured() -> Iterator[tuple[Cluster, Console]]:
    with Cluster(brokers=1, listeners="SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
                 config=CONFIG) as cluster, serve_console(cluster) as console:
        yield cluster, console


def _create(browser: Browser, console: Console, credentials: str, topic: str) -> str:
    """Create ``topic`` from the page with ``credentials`` in the token box: the form's
    error text ('' when it was created)."""
    context = browser.new_context()          # no token from the address
    page = context.new_page()
    try:
        page.goto(f"{console.url}/#topics")
        page.wait_for_selector('#panel[data-ready="1"]')
        page.fill("#token", credentials)
        page.dispatch_event("#token", "change")
        page.fill("#create-topic input[name=name]", topic)
        page.click("#create-topic button[type=submit]")
        page.wait_for_function(      # created: the page goes to the topic
            "t => location.hash === `#topics/${t}` || "
            "document.querySelector('#create-topic-error')?.textContent.length > 0",
            arg=topic, timeout=20_000)
        return "" if page.evaluate("location.hash") == f"#topics/{topic}" else (
            page.inner_text("#create-topic-error"))
    finally:
        context.close()


def test_a_cluster_user_changes_state_from_the_page(
        browser: Browser, secured: tuple[Cluster, Console]) -> None:
    cluster, console = secured
    assert _create(browser, console, "admin:admin-secret", "from-admin") == ""
    assert "from-admin" in cluster.controller.topics
    refused = _create(browser, console, "alice:alice-secret", "from-alice")
    assert "401" in refused and "from-alice" not in cluster.controller.topics
    refused = _create(browser, console, "admin:wrong", "from-wrong")
    assert "401" in refused and "from-wrong" not in cluster.controller.topics
