"""DescribeConfigs of a broker (issue 38): every config an Apache Kafka 4.4.0 broker
describes, with Kafka's types, defaults, sources and synonyms.

``fixtures/kafka-4.4.0-broker-configs.json`` is what a one-node 4.4.0 broker described
(DescribeConfigs v4 with synonyms, read through ``kaflite.testing.ApacheKafka``): each
config's type, default, read_only and is_sensitive. The layered answers pinned below
(which synonyms, in which order, which value wins) are that broker's too, for the same
static and dynamic settings.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from kaflite.client.admin import Admin, ConfigResource
from kaflite.cluster import Cluster
from kaflite.cluster import broker_describe as bd
from kaflite.cluster._kafka_broker_configs import CONFIGS, INTERNAL
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import DescribeConfigsRequest
from kaflite.protocol.messages import describe_configs_request as dcq
from kaflite.protocol.messages import describe_configs_response as dcr

BROKER = 4
FIXTURE = Path(__file__).parent / "fixtures" / "kafka-4.4.0-broker-configs.json"
#: name -> [type, default, read_only, is_sensitive], as Kafka 4.4.0 described them
KAFKA: dict[str, list[object]] = json.loads(FIXTURE.read_text())["configs"]
TYPE_NAMES = {code: name for name, code in bd.TYPE_CODES.items()}
SOURCES = {2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG",
           4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
Entry = dcr.DescribeConfigsResourceResult


def _describe(cluster: Cluster, name: str = "0", synonyms: bool = True,
              keys: list[str] | None = None) -> dict[str, Entry]:
    async def go() -> dict[str, Entry]:
        conn = await BrokerConnection("127.0.0.1", cluster.brokers[0].port).open()
        try:
            resp = await conn.request(DescribeConfigsRequest(
                resources=[dcq.DescribeConfigsResource(BROKER, name, keys)],
                include_synonyms=synonyms, include_documentation=True), version=4)
        finally:
            conn.close()
        [result] = resp.results
        assert result.error_code == 0, result.error_message
        return {e.name: e for e in result.configs}
    return asyncio.run(go())


def _alter(cluster: Cluster, changes: dict[str, dict[str, str]]) -> None:
    async def go() -> None:
        async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
            for name, configs in changes.items():
                await admin.alter_configs({ConfigResource(BROKER, name): dict(configs)})
    asyncio.run(go())


def _synonyms(entry: Entry) -> list[tuple[str, str | None, str]]:
    return [(s.name, s.value, SOURCES[s.source]) for s in entry.synonyms]


def _shape(entry: Entry) -> tuple[str | None, str, bool, bool, str]:
    return (entry.value, SOURCES[entry.config_source], entry.read_only, entry.is_sensitive,
            TYPE_NAMES[entry.config_type])


def test_the_data_module_is_what_kafka_describes() -> None:
    described = {n: [kind, default, n not in bd.DYNAMIC_TYPES, kind == "PASSWORD"]
                 for n, (kind, default) in CONFIGS.items() if n not in INTERNAL}
    assert described == KAFKA


def test_a_broker_describes_every_config_kafka_describes_and_no_other() -> None:
    with Cluster(brokers=1) as cluster:
        got = _describe(cluster)
        broker = cluster.brokers[0]
        port = broker.bound["PLAINTEXT"]
    assert sorted(set(KAFKA) - set(got)) == [], "described by Kafka 4.4, not by kaflite"
    assert sorted(set(got) - set(KAFKA)) == [], "described by kaflite, not by Kafka 4.4"
    for name, (kind, default, read_only, sensitive) in KAFKA.items():
        e = got[name]
        assert (TYPE_NAMES[e.config_type], e.read_only, e.is_sensitive) == \
            (kind, read_only, sensitive), name
        assert e.documentation, name                  # kaflite's own text (config_docs)
        if SOURCES[e.config_source] == "DEFAULT_CONFIG":
            assert e.value == default, name
        # Kafka's default is the last synonym, whenever it has one
        if default is not None and not sensitive:
            assert _synonyms(e)[-1] == (name, default, "DEFAULT_CONFIG"), name
    static = {n: e.value for n, e in got.items()
              if SOURCES[e.config_source] == "STATIC_BROKER_CONFIG"}
    assert static.items() >= {
        "node.id": "0", "broker.id": "0", "process.roles": "broker",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(broker.data_dir),
        "group.initial.rebalance.delay.ms": "0",      # the embedded cluster's own setting
    }.items()
    assert _synonyms(got["broker.id"]) == [("broker.id", "0", "STATIC_BROKER_CONFIG"),
                                           ("broker.id", "-1", "DEFAULT_CONFIG")]
    assert _synonyms(got["listeners"])[-1] == ("listeners", "PLAINTEXT://:9092",
                                               "DEFAULT_CONFIG")


def test_a_configured_static_value_shows_with_its_default_as_synonym() -> None:
    config = {"num.io.threads": 3, "log.retention.hours": 100, "custom.thing": "x",
              "kaflite.request.log.flush.ms": 250}
    with Cluster(brokers=1, config=config) as cluster:
        got = _describe(cluster)
    assert _shape(got["num.io.threads"]) == ("3", "STATIC_BROKER_CONFIG", False, False, "INT")
    assert _synonyms(got["num.io.threads"]) == [
        ("num.io.threads", "3", "STATIC_BROKER_CONFIG"), ("num.io.threads", "8", "DEFAULT_CONFIG")]
    assert _shape(got["log.retention.hours"]) == (
        "100", "STATIC_BROKER_CONFIG", True, False, "INT")
    assert _synonyms(got["log.retention.hours"]) == [
        ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG")]
    # log.retention.ms has no value of its own: Kafka lists no synonym of it
    assert _shape(got["log.retention.ms"]) == (None, "DEFAULT_CONFIG", False, False, "LONG")
    assert got["log.retention.ms"].synonyms == []
    # a name Kafka does not know: described, its value hidden; kaflite's own: shown
    assert _shape(got["custom.thing"]) == (None, "STATIC_BROKER_CONFIG", True, True, "UNKNOWN")
    assert _synonyms(got["custom.thing"]) == [("custom.thing", None, "STATIC_BROKER_CONFIG")]
    assert _shape(got["kaflite.request.log.flush.ms"]) == (
        "250", "STATIC_BROKER_CONFIG", True, False, "UNKNOWN")


def test_a_dynamic_value_shows_with_the_static_and_default_after_it() -> None:
    with Cluster(brokers=1, config={"num.io.threads": 2, "log.retention.hours": 100}) as cluster:
        _alter(cluster, {"": {"num.io.threads": "3", "log.retention.ms": "123456"},
                         "0": {"num.io.threads": "4", "my.custom": "y",
                               "listener.name.plaintext.ssl.key.password": "pw"}})
        got = _describe(cluster)
        plain = _describe(cluster, synonyms=False)
        default = _describe(cluster, "")
        some = _describe(cluster, keys=["num.io.threads", "no.such.config"])
    assert _shape(got["num.io.threads"]) == ("4", "DYNAMIC_BROKER_CONFIG", False, False, "INT")
    assert _synonyms(got["num.io.threads"]) == [
        ("num.io.threads", "4", "DYNAMIC_BROKER_CONFIG"),
        ("num.io.threads", "3", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("num.io.threads", "2", "STATIC_BROKER_CONFIG"),
        ("num.io.threads", "8", "DEFAULT_CONFIG")]
    assert _shape(got["log.retention.ms"]) == (
        "123456", "DYNAMIC_DEFAULT_BROKER_CONFIG", False, False, "LONG")
    assert _synonyms(got["log.retention.ms"]) == [
        ("log.retention.ms", "123456", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "100", "STATIC_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG")]
    # a dynamic log.retention.ms sets the static hours aside: Kafka's value is the default
    assert _shape(got["log.retention.hours"]) == (
        "168", "STATIC_BROKER_CONFIG", True, False, "INT")
    assert _shape(got["log.retention.minutes"]) == (None, "DEFAULT_CONFIG", True, False, "INT")
    assert _shape(got["my.custom"]) == (None, "DYNAMIC_BROKER_CONFIG", True, True, "UNKNOWN")
    prefixed = got["listener.name.plaintext.ssl.key.password"]
    assert _shape(prefixed) == (None, "DYNAMIC_BROKER_CONFIG", True, True, "PASSWORD")
    assert _synonyms(prefixed) == [
        ("listener.name.plaintext.ssl.key.password", None, "DYNAMIC_BROKER_CONFIG")]
    # without synonyms: the same entries, values and sources
    assert {n: _shape(e) for n, e in plain.items()} == {n: _shape(e) for n, e in got.items()}
    assert all(e.synonyms == [] for e in plain.values())
    # the cluster-wide default lists what was set there, with its own values only
    assert {n: (_shape(e), _synonyms(e)) for n, e in default.items()} == {
        "log.retention.ms": (("123456", "DYNAMIC_DEFAULT_BROKER_CONFIG", False, False, "LONG"),
                             [("log.retention.ms", "123456", "DYNAMIC_DEFAULT_BROKER_CONFIG")]),
        "num.io.threads": (("3", "DYNAMIC_DEFAULT_BROKER_CONFIG", False, False, "INT"),
                           [("num.io.threads", "3", "DYNAMIC_DEFAULT_BROKER_CONFIG")])}
    assert list(some) == ["num.io.threads"]


def test_a_password_is_never_returned() -> None:
    secrets = {"delegation.token.secret.key": "secret-1", "ssl.truststore.password": "secret-2",
               "sasl.oauthbearer.client.credentials.client.secret": "secret-3",
               "sasl.users": "alice:secret-4"}
    with Cluster(brokers=1, config=secrets) as cluster:
        _alter(cluster, {"0": {"listener.name.plaintext.ssl.keystore.password": "secret-5"}})
        got = _describe(cluster)
    for name in [*secrets, "listener.name.plaintext.ssl.keystore.password"]:
        assert got[name].is_sensitive and got[name].value is None, name
        assert [s.value for s in got[name].synonyms] == [None], name
    values = [e.value for e in got.values()] + [s.value for e in got.values()
                                                for s in e.synonyms]
    assert not [v for v in values if v is not None and "secret-" in v]


def test_synonym_names_follow_kafka() -> None:
    assert bd.synonym_names("log.retention.minutes") == (
        "log.retention.ms", "log.retention.minutes", "log.retention.hours")
    assert bd.synonym_names("log.flush.interval.ms") == (
        "log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    assert bd.synonym_names("log.flush.scheduler.interval.ms") == (
        "log.flush.scheduler.interval.ms",)
    assert bd.synonym_names("listener.name.sasl_ssl.plain.sasl.jaas.config") == (
        "listener.name.sasl_ssl.plain.sasl.jaas.config", "sasl.jaas.config")
    assert bd.config_type("listener.name.sasl_ssl.plain.sasl.jaas.config") == "PASSWORD"
    assert bd.config_type("log.retention.hours") == "INT"
    assert bd.config_type("no.such.config") is None
