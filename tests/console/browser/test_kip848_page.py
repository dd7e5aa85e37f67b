"""The groups page on a KIP-848 consumer group (confluent-kafka, group.protocol=consumer):
the group epoch, the target assignment's epoch and the assignor; per member its epoch, its
state, its current and target assignments, and what has still to move. Each checked
against the coordinator's own state (its ``ConsumerGroup``), while one member holds up a
rebalance (it stops polling, so it cannot revoke what the second member should get) and
once both have reconciled, the page following without a reload.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from kaflite.cluster import Cluster
from tests.cli.test_groups_consumer_protocol import CONFIG, TOPIC, consumer, coordinator_group
from tests.conftest import wait_for
from tests.console.browser.conftest import open_panel, screenshot
from tests.console.browser.serve import Console, serve_console

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

    from kaflite.cluster.groups._consumer_group import ConsumerGroup

pytest.importorskip("confluent_kafka")
GROUP = "cg-page"
NONE = "\u2013"          # what the page shows for an empty list


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Cluster, Console]]:
    with Cluster(brokers=1, config=CONFIG) as cluster:
        cluster.create_topic(TOPIC, 4, 1)
        with serve_console(cluster) as console:
            yield cluster, console


def _group(cluster: Cluster) -> ConsumerGroup:
    g = coordinator_group(cluster, GROUP)
    assert g is not None
    return g


def _partitions(cluster: Cluster, assigned: dict[Any, Any]) -> set[str]:
    names = {t.topic_id: t.name for t in cluster.controller.topics.values()}
    return {f"{names[tid]}-{p}" for tid, parts in assigned.items() for p in parts}


def _row(page: Page, client: str) -> dict[str, str]:
    return page.locator(f'#kip848 tr[data-client="{client}"]').evaluate(
        "tr => Object.fromEntries([...tr.cells].map((c, i) => [c.dataset.col || i, c.textContent]))"
        " ")


def _cells(text: str) -> set[str]:
    return set() if text == NONE else set(text.split(", "))


def _epochs_shown(page: Page, g: ConsumerGroup) -> None:
    page.wait_for_selector(f'#kip848-epochs[data-group-epoch="{g.group_epoch}"]'
                           f'[data-assignment-epoch="{g.assignment_epoch}"]', timeout=20_000)


def test_a_rebalance_held_up_then_reconciled(browser: Browser,
                                            env: tuple[Cluster, Console]) -> None:
    cluster, console = env
    c1 = consumer(cluster, GROUP, "one")
    c2 = None
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        wait_for(lambda: (c1.poll(0.05), len(c1.assignment()) == 4)[1], "c1 assigned", 30)
        open_panel(page, console.url, f"groups/{GROUP}")
        page.wait_for_selector('#kip848 tr[data-client="one"][data-state="stable"]')
        g = _group(cluster)
        _epochs_shown(page, g)
        one = _row(page, "one")
        assert one["epoch"] == str(g.assignment_epoch)
        assert _cells(one["current"]) == _cells(one["target"]) == {f"{TOPIC}-{p}"
                                                                   for p in range(4)}
        # c1 stops polling while c2 joins: c1 must revoke two partitions first
        c2 = consumer(cluster, GROUP, "two")

        def revoking() -> bool:
            c2.poll(0.05)
            g = coordinator_group(cluster, GROUP)
            return g is not None and str(g.state) == "Reconciling" and any(
                m.client_id == "one" and m.pending_revocation for m in g.members.values())
        wait_for(revoking, "the group reconciling, c1 asked to revoke", 30)
        page.wait_for_selector('#kip848 tr[data-client="one"][data-state="unrevoked_partitions"]',
                               timeout=20_000)
        page.wait_for_selector('#kip848 tr[data-client="two"][data-state="unreleased_partitions"]',
                               timeout=20_000)
        g = _group(cluster)
        _epochs_shown(page, g)
        assert page.get_attribute("#kip848-epochs", "data-reconciling") == "2"
        by_client = {m.client_id: m for m in g.members.values()}
        assert [str(by_client[c].state) for c in ("one", "two")] == \
            ["UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS"]
        one, two = _row(page, "one"), _row(page, "two")
        assert one["epoch"] == f"{by_client['one'].member_epoch} (target {g.assignment_epoch})"
        assert two["epoch"] == str(g.assignment_epoch)
        assert f"revoking before epoch {g.assignment_epoch}" in one["moving"]
        # two waits for the partitions one still holds, i.e. those one has to revoke
        held = _partitions(cluster, by_client["one"].pending_revocation)
        assert _cells(two["current"]) == set()
        assert {p.removeprefix("+") for p in _cells(two["moving"])} == held
        assert _cells(two["target"]) == held
        screenshot(page, "groups-kip848")

        def stable() -> bool:
            c1.poll(0.02)
            c2.poll(0.02)
            g = coordinator_group(cluster, GROUP)
            return g is not None and str(g.state) == "Stable"
        wait_for(stable, "the group stable", 30)
        for client in ("one", "two"):
            page.wait_for_selector(f'#kip848 tr[data-client="{client}"][data-state="stable"]',
                                   timeout=20_000)
        g = _group(cluster)
        _epochs_shown(page, g)
        by_client = {m.client_id: m for m in g.members.values()}
        shown: list[set[str]] = []
        for client in ("one", "two"):
            row = _row(page, client)
            shown.append(_cells(row["current"]))
            assert _cells(row["current"]) == _cells(row["target"]) == \
                _partitions(cluster, by_client[client].assigned)
            assert row["epoch"] == str(g.assignment_epoch) and row["moving"] == NONE
        assert len(shown[0]) == len(shown[1]) == 2
        assert shown[0] | shown[1] == {f"{TOPIC}-{p}" for p in range(4)}
        assert page.get_attribute("#kip848-epochs", "data-reconciling") == "0"
    finally:
        context.close()
        c1.close()
        if c2 is not None:
            c2.close()
