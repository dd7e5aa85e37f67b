"""The embedded cluster uses Kafka's development settings where they differ from
production (configs.DEVELOPMENT_DEFAULTS), and a config given to it still wins."""

from __future__ import annotations

from kaflite.cluster import Cluster
from kaflite.cluster.configs import BROKER_DEFAULTS, DEVELOPMENT_DEFAULTS


def test_a_group_forms_without_the_production_delay() -> None:
    assert BROKER_DEFAULTS["group.initial.rebalance.delay.ms"] == "3000"   # Kafka's
    assert DEVELOPMENT_DEFAULTS["group.initial.rebalance.delay.ms"] == "0"
    with Cluster(brokers=1) as cluster:
        assert cluster.config.int("group.initial.rebalance.delay.ms") == 0
        groups = cluster.broker(0).groups
        assert groups is not None and groups.config.initial_rebalance_delay_ms == 0


def test_a_given_config_wins_over_the_development_default() -> None:
    with Cluster(brokers=1, config={"group.initial.rebalance.delay.ms": 3000}) as cluster:
        assert cluster.config.int("group.initial.rebalance.delay.ms") == 3000
        groups = cluster.broker(0).groups
        assert groups is not None and groups.config.initial_rebalance_delay_ms == 3000
