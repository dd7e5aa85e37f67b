"""Resolving subscribed regular expressions (``_regex``): the asking principal's view,
kept until the topics change or the refresh interval passes, and what a resolution made
without a heartbeat sees."""

from __future__ import annotations

from kaflite.cluster.groups._regex import REGEX_REFRESH_INTERVAL_MS, RegexResolver
from kaflite.cluster.groups._timer import ManualTimer


def test_resolved_for_the_asking_principal_until_topics_or_time_change() -> None:
    topics = {"orders-eu", "orders-us", "payments"}
    timer = ManualTimer()
    r = RegexResolver(lambda: topics, timer.now_ms)
    denied = {"orders-us"}

    def allowed(topic: str) -> bool:
        return topic not in denied

    with r.asking(allowed):
        assert r.resolve("g", "orders-.*", ()) == {"orders-eu"}
    # Another principal's heartbeat reuses the group's resolution while nothing changed.
    with r.asking(lambda t: True):
        assert r.resolve("g", "orders-.*", ()) == {"orders-eu"}
        # A new topic: resolved again, for the one asking now.
        topics.add("orders-ap")
        assert r.resolve("g", "orders-.*", ()) == {"orders-eu", "orders-us", "orders-ap"}
    # The refresh interval: an ACL change is seen by the next resolution after it.
    denied.add("orders-ap")
    with r.asking(allowed):
        assert r.resolve("g", "orders-.*", ()) == {"orders-eu", "orders-us", "orders-ap"}
        timer.advance(REGEX_REFRESH_INTERVAL_MS)
        assert r.resolve("g", "orders-.*", ()) == {"orders-eu"}
    # Groups do not share resolutions; an invalid pattern stands for nothing.
    with r.asking(lambda t: True):
        assert r.resolve("other", "orders-.*", ()) == {"orders-eu", "orders-us", "orders-ap"}
        assert r.resolve("g", "(", ()) == frozenset()


def test_without_a_heartbeat_the_last_or_the_stored_topics_serve() -> None:
    topics = {"a1", "a2", "b1"}
    r = RegexResolver(lambda: topics, ManualTimer().now_ms)
    # Not resolved since the coordinator loaded: the stored subscription's matches.
    assert r.resolve("g", "a.*", ["a1", "b1"]) == {"a1"}
    with r.asking(lambda t: t != "a2"):
        assert r.resolve("g", "a.*", ()) == {"a1"}
    topics.add("a3")
    assert r.resolve("g", "a.*", ["a1", "a2", "a3"]) == {"a1"}   # the last resolution
    r.forget("g", keep=())
    assert r.resolve("g", "a.*", ["a2"]) == {"a2"}
