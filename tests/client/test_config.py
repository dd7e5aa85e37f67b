"""Client configuration: dotted names, underscore kwargs, defaults, validation."""

from __future__ import annotations

import pytest

from kaflite.config import ConfigError, resolve


def test_dotted_and_underscore_names_merge() -> None:
    cfg = resolve("producer", {"bootstrap.servers": "a:1", "linger.ms": 7}, batch_size=100)
    assert cfg["linger.ms"] == 7
    assert cfg["batch.size"] == 100
    assert cfg["bootstrap.servers"] == ["a:1"]
    assert cfg["acks"] == -1 and cfg["enable.idempotence"] is True
    assert cfg["request.timeout.ms"] == 30_000


def test_unknown_property_is_named() -> None:
    with pytest.raises(ConfigError, match=r"linger\.mss"):
        resolve("producer", {"bootstrap.servers": "a:1", "linger.mss": 1})


@pytest.mark.parametrize(("name", "value"), [
    ("linger.ms", -1), ("acks", "two"), ("compression.type", "brotli"),
    ("enable.idempotence", "maybe"), ("request.timeout.ms", "soon"),
    ("metadata.recovery.rebootstrap.trigger.ms", -1), ("metadata.recovery.strategy", "retry"),
])
def test_invalid_values_name_the_property(name: str, value: object) -> None:
    with pytest.raises(ConfigError) as info:
        resolve("producer", {"bootstrap.servers": "a:1", name: value})
    assert info.value.property == name
    assert name in str(info.value)


def test_role_checks() -> None:
    with pytest.raises(ConfigError, match=r"group\.id"):
        resolve("producer", {"bootstrap.servers": "a:1", "group.id": "g"})
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        resolve("consumer", {})
    with pytest.raises(ConfigError, match=r"partition\.assignment\.strategy"):
        resolve("consumer", {"bootstrap.servers": "a:1", "partition.assignment.strategy": "x"})


def test_acks_all_and_idempotence_rules() -> None:
    assert resolve("producer", bootstrap_servers="a:1", acks="all")["acks"] == -1
    # Like Java: acks=1 quietly disables default idempotence, but not an explicit one.
    assert resolve("producer", bootstrap_servers="a:1", acks=1)["enable.idempotence"] is False
    with pytest.raises(ConfigError, match="acks"):
        resolve("producer", bootstrap_servers="a:1", acks=1, enable_idempotence=True)


def test_consumer_defaults() -> None:
    cfg = resolve("consumer", {"bootstrap.servers": "a:1,b:2", "group.id": "g"})
    assert cfg["bootstrap.servers"] == ["a:1", "b:2"]
    assert cfg["partition.assignment.strategy"] == ["range", "cooperative-sticky"]
    assert cfg["rebalance.timeout.ms"] == cfg["max.poll.interval.ms"]
    assert cfg["max.poll.records"] == 500


def test_metadata_recovery_defaults_are_javas() -> None:
    for role in ("producer", "consumer", "admin"):
        cfg = resolve(role, {"bootstrap.servers": "a:1"})
        assert cfg["metadata.recovery.strategy"] == "rebootstrap"
        assert cfg["metadata.recovery.rebootstrap.trigger.ms"] == 300_000
    assert resolve("admin", {"bootstrap.servers": "a:1"},
                   metadata_recovery_rebootstrap_trigger_ms=0)[
        "metadata.recovery.rebootstrap.trigger.ms"] == 0
