"""Rate windows, throttle times, entity precedence and quota validation."""

from __future__ import annotations

import pytest

from kaflite.cluster.handlers.client_quotas import entity_error
from kaflite.cluster.quotas.entities import QuotaStore, value_error
from kaflite.cluster.quotas.rate import (
    QuotaWindows,
    Rate,
    TokenBucket,
    bounded_throttle_time_ms,
    throttle_time_ms,
)


def test_rate_is_measured_over_at_least_samples_minus_one_windows() -> None:
    rate = Rate(QuotaWindows(11, 1000))
    rate.record(10_000, 0)
    assert rate.window_ms(500) == 10_500          # 0.5 s elapsed, padded to 10 full windows
    assert rate.measure(500) == pytest.approx(10_000 / 10.5)


def test_old_samples_expire() -> None:
    rate = Rate(QuotaWindows(3, 1000))
    rate.record(3000, 0)
    rate.record(3000, 1000)
    assert rate.total(1500) == 6000
    assert rate.total(3200) == 3000               # the first sample's last value is 3 windows old


def test_a_sample_overlapping_the_window_is_kept_with_its_start() -> None:
    # Kafka 4's SampledStat: expiry goes by a sample's last value, and the window
    # runs from the oldest live sample's start, so value and time stay matched.
    rate = Rate(QuotaWindows(3, 1000))
    rate.record(1000, 0)
    rate.record(1000, 900)                        # same sample, last value at 0.9 s
    rate.record(1000, 1000)
    rate.record(1000, 2000)
    rate.record(1000, 3000)                       # a fourth live sample (window.num + 1)
    assert rate.total(3500) == 5000
    assert rate.window_ms(3500) == 3500
    assert rate.total(3900) == 3000               # 0.9 s + 3 windows: the first one goes


def test_throttle_time_is_kafkas_formula() -> None:
    # observed 1.5 MB/s against 1 MB/s over an 11 s window: (O - T) / T * W
    assert throttle_time_ms(1.5e6, 1e6, 11_000) == 5500
    assert throttle_time_ms(0.9e6, 1e6, 11_000) == 0
    assert bounded_throttle_time_ms(1.5e6, 1e6, 11_000, 1000) == 1000


def test_token_bucket_goes_negative_and_refills() -> None:
    bucket = TokenBucket(2.0, QuotaWindows(1, 1000))     # burst 2
    bucket.spend(5, 0)                                   # 2 - 5 = -3
    assert bucket.throttle_time_ms(0) == 1500
    assert bucket.throttle_time_ms(1500) == 0


PRECEDENCE = [
    ((("client-id", "app"), ("user", "alice")), ("alice", "app")),
    ((("client-id", None), ("user", "alice")), ("alice", "app")),
    ((("user", "alice"),), ("alice", "")),
    ((("client-id", "app"), ("user", None)), ("alice", "app")),
    ((("client-id", None), ("user", None)), ("alice", "app")),
    ((("user", None),), ("alice", "")),
    ((("client-id", "app"),), ("", "app")),
    ((("client-id", None),), ("", "app")),
]


def test_entity_precedence_is_kafkas_order() -> None:
    store = QuotaStore()
    for i, (entity, _) in enumerate(PRECEDENCE):
        store.alter(entity, {"producer_byte_rate": float(i + 1)}, set())
    for i, (entity, tags) in enumerate(PRECEDENCE):
        resolved = store.resolve("producer_byte_rate", "alice", "app")
        assert resolved is not None
        assert (resolved.limit, resolved.entity, resolved.tags) == (i + 1, entity, tags)
        store.alter(entity, {}, {"producer_byte_rate"})  # the next one takes over
    assert store.resolve("producer_byte_rate", "alice", "app") is None
    # each key on its own
    store.alter((("user", "alice"),), {"consumer_byte_rate": 5.0}, set())
    assert store.resolve("producer_byte_rate", "alice", "app") is None


@pytest.mark.parametrize(("key", "value"), [
    ("no_such_key", 1.0), ("producer_byte_rate", -1.0), ("producer_byte_rate", 0.0),
    ("producer_byte_rate", 1.5), ("request_percentage", float("nan")),
])
def test_bad_quota_values(key: str, value: float) -> None:
    assert value_error(key, value) is not None


def test_good_quota_values() -> None:
    assert value_error("producer_byte_rate", 1048576.0) is None
    assert value_error("controller_mutation_rate", 0.5) is None


@pytest.mark.parametrize("pairs", [
    [], [("user", "a"), ("user", "b")], [("group", "g")], [("user", "")],
    [("ip", "1.2.3.4")], [("ip", None), ("user", "a")],
])
def test_bad_entities(pairs: list[tuple[str, str | None]]) -> None:
    assert entity_error(pairs) is not None


def test_good_entities() -> None:
    for pairs in ([("user", None)], [("client-id", "x"), ("user", "a")], [("client-id", None)]):
        assert entity_error(pairs) is None


def test_a_fetch_may_take_at_most_window_num_minus_one_windows_of_quota() -> None:
    # Kafka's getMaxValueInQuotaWindow: quota * (window.num - 1) * window size
    from kaflite.cluster.quotas.manager import CONSUME, QuotaManager
    store = QuotaStore()
    manager = QuotaManager(store, QuotaWindows(3, 1000))
    assert manager.max_value_in_window(CONSUME, "User:alice", "app") == float("inf")
    store.alter((("user", "alice"),), {CONSUME: 1000.0}, set())
    assert manager.max_value_in_window(CONSUME, "User:alice", "app") == 2000
    assert manager.max_value_in_window(CONSUME, "User:bob", "app") == float("inf")
