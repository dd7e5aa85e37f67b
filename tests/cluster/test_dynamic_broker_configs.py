"""Dynamic broker configs (issue 38 §5): kafka-configs --entity-type brokers.

The answers pinned here are Apache Kafka 4.4.0's, read from a real broker with the same
requests: the sources and their order, which configs it refuses and with what message,
and that a topic without an override follows the broker's dynamic default.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kaflite.client import NewTopic
from kaflite.client.admin import Admin, ConfigResource, ConfigSynonym
from kaflite.cluster import Cluster
from kaflite.cluster.controller import Controller
from kaflite.cluster.metadata_image import apply_records, records_for_brokers
from kaflite.protocol import errors

TOPIC, BROKER = 2, 4


def _run(cluster: Cluster, steps: object) -> object:
    async def go() -> object:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            return await steps(admin)  # type: ignore[operator]
    return asyncio.run(go())


def _entry(entries: dict[ConfigResource, list], res: ConfigResource, name: str):  # type: ignore[no-untyped-def,type-arg]
    return next(e for e in entries[res] if e.name == name)


def test_default_and_per_broker_values_and_their_sources() -> None:
    with Cluster(brokers=2) as cluster:
        async def steps(admin: Admin) -> None:
            await admin.alter_configs({ConfigResource(BROKER, ""): {"log.retention.ms": "123456"}})
            await admin.alter_configs({ConfigResource(BROKER, "0"): {"log.retention.ms": "654321",
                                                                      "message.max.bytes": "2000000"}})
            b0, b1, dflt = (ConfigResource(BROKER, n) for n in ("0", "1", ""))
            got = await admin.describe_config_entries([b0, b1, dflt], include_synonyms=True)
            e = _entry(got, b0, "log.retention.ms")
            assert (e.value, e.source, e.read_only) == ("654321", "DYNAMIC_BROKER_CONFIG", False)
            # log.retention.hours stands for the same setting (Kafka lists its default too)
            assert e.synonyms == (
                ConfigSynonym("log.retention.ms", "654321", "DYNAMIC_BROKER_CONFIG"),
                ConfigSynonym("log.retention.ms", "123456", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                ConfigSynonym("log.retention.hours", "168", "DEFAULT_CONFIG"))
            e = _entry(got, b0, "message.max.bytes")
            assert e.synonyms == (
                ConfigSynonym("message.max.bytes", "2000000", "DYNAMIC_BROKER_CONFIG"),
                ConfigSynonym("message.max.bytes", "1048588", "DEFAULT_CONFIG"))
            e = _entry(got, b1, "log.retention.ms")
            assert (e.value, e.source) == ("123456", "DYNAMIC_DEFAULT_BROKER_CONFIG")
            assert _entry(got, b1, "message.max.bytes").source == "DEFAULT_CONFIG"
            # the default resource lists what was set there, and only that
            assert [(x.name, x.value, x.source) for x in got[dflt]] == [
                ("log.retention.ms", "123456", "DYNAMIC_DEFAULT_BROKER_CONFIG")]
            # a config read only at start stays read-only
            assert _entry(got, b1, "delete.topic.enable").read_only
            # deleting the broker's own value uncovers the default's
            await admin.alter_configs({b0: {"log.retention.ms": None}})
            got = await admin.describe_config_entries([b0])
            assert _entry(got, b0, "log.retention.ms").value == "123456"
        _run(cluster, steps)


@pytest.mark.parametrize(("name", "configs", "message"), [
    ("0", {"broker.id": "5"}, "Cannot update these configs dynamically: [broker.id]"),
    ("", {"auto.create.topics.enable": "false", "num.partitions": "3"},
     "Cannot update these configs dynamically: [auto.create.topics.enable, num.partitions]"),
    ("1", {"log.retention.ms": "1"}, "Unexpected broker id, expected 0, but received 1"),
    ("x", {"log.retention.ms": "1"}, "Node id must be an integer, but it is: x"),
    ("", {"log.retention.ms": "abc"},
     "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"),
    ("", {"listeners": "PLAINTEXT://:1"}, "Cannot update these configs at default cluster "
                                          "level, broker id must be specified: [listeners]"),
    ("0", {"ssl.keystore.location": "/k"}, "These security configs can be dynamically updated "
     "only per-listener using the listener prefix: [ssl.keystore.location]"),
    # the cleaner, each as a Kafka 4.4 broker answered it (static buffer 128 MiB, 1 thread)
    ("0", {"log.cleaner.threads": "3"}, "Invalid value org.apache.kafka.common.config."
     "ConfigException: Log cleaner threads cannot be increased to more than double the "
     "current value 1 for configuration Invalid dynamic configuration"),
    ("", {"log.cleaner.threads": "3"}, "Invalid value org.apache.kafka.common.config."
     "ConfigException: Log cleaner threads cannot be increased to more than double the "
     "current value 1 for configuration Invalid dynamic configuration"),
    ("0", {"log.cleaner.threads": "0"}, "/ by zero"),
    ("0", {"log.cleaner.threads": "2", "log.cleaner.dedupe.buffer.size": "2097152"},
     "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner "
     "thread."),
    ("", {"log.cleaner.dedupe.buffer.size": "1048576"},
     "requirement failed: log.cleaner.dedupe.buffer.size must be at least 1MB per cleaner "
     "thread."),
])
def test_what_kafka_refuses_is_refused_with_its_message(name: str, configs: dict[str, str],
                                                          message: str) -> None:
    with Cluster(brokers=1) as cluster:
        async def steps(admin: Admin) -> None:
            # the request goes to broker 0 whatever the name says
            resp = await admin._request(0, _incremental(name, configs))
            [answer] = resp.responses
            assert (answer.error_code, answer.error_message) == (
                errors.InvalidRequestError.code, message)
        _run(cluster, lambda admin: _checked(admin, steps))
        assert cluster.controller.broker_configs == {}


async def _checked(admin: Admin, steps: object) -> None:
    await admin.start()
    await steps(admin)  # type: ignore[operator]


def _incremental(name: str, configs: dict[str, str]) -> object:
    from kaflite.protocol.messages import IncrementalAlterConfigsRequest
    from kaflite.protocol.messages import incremental_alter_configs_request as iacq
    return IncrementalAlterConfigsRequest(resources=[iacq.AlterConfigsResource(
        resource_type=BROKER, resource_name=name,
        configs=[iacq.AlterableConfig(name=k, config_operation=0, value=v)
                 for k, v in configs.items()])])


def test_cordoned_log_dirs_needs_metadata_version_4_3_iv0() -> None:
    """As Kafka 4.4's controller: below 4.3-IV0 (30) a change of cordoned.log.dirs is
    INVALID_CONFIG; from it on the config is stored (kaflite cordons nothing)."""
    with Cluster(brokers=1) as cluster:
        async def steps(admin: Admin) -> list[tuple[int, str | None]]:
            await admin.start()
            resp = await admin._request(0, _incremental("0", {"cordoned.log.dirs": "/d"}))
            return [(a.error_code, a.error_message) for a in resp.responses]
        assert _run(cluster, steps) == [(0, "")]
        assert cluster.controller.broker_configs["0"] == {"cordoned.log.dirs": "/d"}
        cluster.controller.set_feature("metadata.version", 29)
        assert _run(cluster, steps) == [(0, "")]      # the same value: no change
        cluster.controller.set_broker_configs("0", {})
        assert _run(cluster, steps) == [(
            errors.InvalidConfigError.code, "The cordoned.log.dirs configuration value cannot "
            "be set because it requires metadata.version >= 4.3-IV0")]
        assert cluster.controller.broker_configs.get("0", {}) == {}


def test_unknown_names_are_kept_as_kafka_keeps_them_and_lists_append() -> None:
    with Cluster(brokers=1) as cluster:
        async def steps(admin: Admin) -> None:
            dflt = ConfigResource(BROKER, "")
            await admin.alter_configs({dflt: {"my.custom.thing": "x"}})
            got = await admin.describe_config_entries([dflt])
            e = _entry(got, dflt, "my.custom.thing")
            assert (e.value, e.sensitive, e.read_only) == (None, True, True)
        _run(cluster, steps)
        # APPEND starts from the value in force: Kafka answers "delete,compact"
        from kaflite.protocol.messages import IncrementalAlterConfigsRequest
        from kaflite.protocol.messages import incremental_alter_configs_request as iacq
        append = IncrementalAlterConfigsRequest(resources=[iacq.AlterConfigsResource(
            resource_type=BROKER, resource_name="", configs=[iacq.AlterableConfig(
                name="log.cleanup.policy", config_operation=2, value="compact")])])

        async def appended(admin: Admin) -> None:
            await admin.start()
            resp = await admin._request(0, append)
            assert resp.responses[0].error_code == 0
        _run(cluster, appended)
        assert cluster.controller.broker_configs[""]["log.cleanup.policy"] == "delete,compact"


def test_a_topic_without_an_override_follows_the_dynamic_default(tmp_path: Path) -> None:
    with Cluster(brokers=1, data_dir=tmp_path) as cluster:
        async def steps(admin: Admin) -> None:
            await admin.create_topics([NewTopic("plain", 1, 1),
                                       NewTopic("own", 1, 1, configs={"retention.ms": "5000"})])
            await admin.alter_configs({ConfigResource(BROKER, ""): {"log.retention.ms": "777000"}})
            got = await admin.describe_config_entries(
                [ConfigResource(TOPIC, "plain"), ConfigResource(TOPIC, "own")],
                include_synonyms=True)
            e = _entry(got, ConfigResource(TOPIC, "plain"), "retention.ms")
            assert (e.value, e.source) == ("777000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
            assert e.synonyms[0] == ConfigSynonym("log.retention.ms", "777000",
                                                  "DYNAMIC_DEFAULT_BROKER_CONFIG")
            assert _entry(got, ConfigResource(TOPIC, "own"), "retention.ms").value == "5000"
        _run(cluster, steps)
        logs = cluster.broker(0).partitions
        assert logs[("plain", 0)].log.config.retention_ms == 777000      # applied, not only shown
        assert logs[("own", 0)].log.config.retention_ms == 5000
    # kept in the metadata log: a restarted cluster still has it
    with Cluster(brokers=1, data_dir=tmp_path) as cluster:
        assert cluster.controller.broker_configs == {"": {"log.retention.ms": "777000"}}
        assert cluster.broker(0).partitions[("plain", 0)].log.config.retention_ms == 777000


def test_broker_processes_replay_the_records() -> None:
    """A broker process's replica of the metadata gets the same configs from the records."""
    leader, replica = Controller(None), Controller(None)
    sent: list[str] = []
    leader.observe_records(lambda records: sent.extend(records_for_brokers(records)))
    leader.set_broker_configs("", {"log.retention.ms": "1000", "log.segment.bytes": "2048"})
    leader.set_broker_configs("2", {"message.max.bytes": "5000"})
    leader.set_broker_configs("", {"log.segment.bytes": "4096"})
    before = replica.broker_config_changes
    apply_records(replica, sent)
    assert replica.broker_configs == leader.broker_configs == {
        "": {"log.segment.bytes": "4096"}, "2": {"message.max.bytes": "5000"}}
    assert replica.broker_config_changes > before        # its log-config cache moves on
