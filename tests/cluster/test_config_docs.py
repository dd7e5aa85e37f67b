"""DescribeConfigs' documentation (v3+, ``include_documentation``): kaflite's own text
(``kaflite.cluster.config_docs``) for broker, topic, group and client metrics configs.

Every broker config kaflite reads must say in its own sentence what it does on kaflite:
the scan below finds the names the broker's code mentions (string constants naming a
config, in ``src/kaflite/cluster`` and in the broker's OAUTHBEARER validator), so a new
``config.int("...")`` or ``props.get("...")`` fails here until it is documented. Asked
without documentation, Kafka answers null (``ConfigHelper.createBrokerConfigEntry`` and
its topic, group and client metrics siblings: ``includeDocumentation ? doc : null``), and
so does kaflite.
"""

from __future__ import annotations

import ast
import asyncio
import re
import uuid
from pathlib import Path

import kaflite
from kaflite.client.admin import Admin, ConfigResource, NewTopic
from kaflite.cluster import Cluster
from kaflite.cluster import config_docs as docs
from kaflite.cluster._kafka_broker_configs import BROKER_QUOTA_CONFIGS, CONFIGS
from kaflite.cluster.client_metrics import CLIENT_METRICS_CONFIG_TYPES
from kaflite.cluster.configs import BROKER_DEFAULTS, TOPIC_CONFIGS
from kaflite.cluster.group_configs import GROUP_CONFIG_NAMES
from kaflite.net.connection import BrokerConnection
from kaflite.protocol.messages import DescribeConfigsRequest
from kaflite.protocol.messages import describe_configs_request as dcq
from kaflite.protocol.messages import describe_configs_response as dcr

SRC = Path(kaflite.__file__).parent
TOPIC, BROKER, CLIENT_METRICS, GROUP = 2, 4, 16, 32
#: modules that list Kafka's configs as data, not because the broker reads them
DATA_MODULES = {"_kafka_broker_configs.py", "config_docs.py", "config_docs_topic.py"}
#: kaflite's own broker configs: kaflite.<area>.<more>, as a config is named, and
#: read by a call or defined beside a default (logger names are passed to getLogger)
OWN = re.compile(r"kaflite\.[a-z]+\.[a-z.]+")
READERS = {"get", "int", "bool", "_setting", "setting", "listener_config"}


def _own_config_names(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                func.id if isinstance(func, ast.Name) else ""
            if name in READERS:
                values = list(node.args)
        elif isinstance(node, ast.Dict):
            values = [k for k in node.keys if k is not None]
        elif isinstance(node, ast.Assign) and all(
                isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
            values = [node.value]
        found |= {v.value for v in values if isinstance(v, ast.Constant)
                  and isinstance(v.value, str) and OWN.fullmatch(v.value)}
    return found


def _read_by_the_broker() -> dict[str, set[str]]:
    """Config name -> the broker modules whose code names it."""
    known = set(CONFIGS) | set(BROKER_DEFAULTS)
    trees = [(p.relative_to(SRC).as_posix(), ast.parse(p.read_text()))
             for p in sorted((SRC / "cluster").rglob("*.py"))
             if p.name not in DATA_MODULES and "_generated" not in p.parts]
    validator = ast.parse((SRC / "security" / "oauthbearer.py").read_text())
    trees += [("security/oauthbearer.py", node) for node in validator.body
              if isinstance(node, ast.ClassDef) and node.name == "TokenValidator"]
    found: dict[str, set[str]] = {}
    for where, tree in trees:
        names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                 and isinstance(n.value, str) and n.value in known}
        for name in names | _own_config_names(tree):
            found.setdefault(name, set()).add(where)
    return found


def test_the_scan_finds_what_the_broker_reads() -> None:
    """The scan is not vacuous: it sees reads of every kind the broker has."""
    found = _read_by_the_broker()
    for name in ("num.partitions", "socket.request.max.bytes",     # config.int(...)
                 "group.consumer.assignors", "ssl.client.auth",    # props.get / get(...)
                 "offsets.topic.num.partitions",                   # a table of defaults
                 "sasl.oauthbearer.expected.issuer",               # the OAUTHBEARER side
                 "kaflite.request.log.enable", "kaflite.request.log.flush.ms"):
        assert name in found, name
    assert not any(n.startswith("kaflite.cluster.") for n in found), "a logger name"
    assert len(found) > 150


def test_every_config_the_broker_reads_has_its_own_sentence() -> None:
    missing = {name: sorted(where) for name, where in _read_by_the_broker().items()
               if docs.BROKER.get(name, docs.NOT_ACTED) == docs.NOT_ACTED}
    assert missing == {}, "read by the broker, not documented in config_docs.BROKER"


def test_every_config_has_documentation_in_kaflites_own_words() -> None:
    # no typo: a name Kafka does not know is one kaflite reads (its authorizer's, its own)
    assert set(docs.BROKER) - set(CONFIGS) == {
        n for n in docs.BROKER if n.startswith("kaflite.")} | {
        "sasl.users", "super.users", "allow.everyone.if.no.acl.found", *BROKER_QUOTA_CONFIGS}
    assert all(docs.broker_doc(n) for n in CONFIGS)
    assert docs.broker_doc("no.such.config") is None           # as Kafka: not its config
    assert set(docs.TOPIC) == set(TOPIC_CONFIGS)
    assert set(docs.GROUP) == set(GROUP_CONFIG_NAMES)
    assert set(docs.CLIENT_METRICS) == set(CLIENT_METRICS_CONFIG_TYPES)
    for table in (docs.BROKER, docs.TOPIC, docs.GROUP, docs.CLIENT_METRICS):
        for name, text in table.items():
            assert text[0] not in " ." and text.endswith("."), name
            assert "  " not in text and "{}" not in text, name


def _describe(port: int, resources: list[tuple[int, str]], documentation: bool
              ) -> dict[int, list[dcr.DescribeConfigsResourceResult]]:
    async def go() -> dict[int, list[dcr.DescribeConfigsResourceResult]]:
        conn = await BrokerConnection("127.0.0.1", port).open()
        try:
            resp = await conn.request(DescribeConfigsRequest(
                resources=[dcq.DescribeConfigsResource(kind, name, None)
                           for kind, name in resources],
                include_synonyms=False, include_documentation=documentation), version=4)
        finally:
            conn.close()
        for result in resp.results:
            assert result.error_code == 0, result.error_message
        return {r.resource_type: r.configs for r in resp.results}
    return asyncio.run(go())


def test_describe_configs_documents_each_resource_when_asked_and_only_then() -> None:
    topic, group, subscription = (f"{kind}-{uuid.uuid4().hex[:8]}"
                                  for kind in ("docs", "group", "sub"))

    async def setup(bootstrap: str) -> None:
        async with Admin(bootstrap_servers=bootstrap) as admin:
            await admin.create_topics([NewTopic(topic, 1, 1)])
            await admin.alter_configs({
                ConfigResource(GROUP, group): {"consumer.session.timeout.ms": "50000"},
                ConfigResource(CLIENT_METRICS, subscription): {"interval.ms": "60000"}})

    resources = [(BROKER, "0"), (TOPIC, topic), (GROUP, group),
                 (CLIENT_METRICS, subscription)]
    with Cluster(brokers=1, config={"kaflite.request.log.flush.ms": "250"}) as cluster:
        asyncio.run(setup(cluster.bootstrap_servers))
        port = cluster.brokers[0].port
        with_docs = _describe(port, resources, True)
        without = _describe(port, resources, False)
    for kind in (BROKER, TOPIC, GROUP, CLIENT_METRICS):
        assert with_docs[kind] and without[kind], kind
        assert all(e.documentation is None for e in without[kind]), kind
    broker = {e.name: e.documentation for e in with_docs[BROKER]}
    assert broker["num.partitions"] == docs.BROKER["num.partitions"]
    assert broker["log.cleaner.enable"] == docs.NOT_ACTED       # Kafka's, not acted on
    assert broker["kaflite.request.log.flush.ms"] == \
        docs.BROKER["kaflite.request.log.flush.ms"]
    assert all(broker.values())
    assert {e.name: e.documentation for e in with_docs[TOPIC]} == docs.TOPIC
    assert {e.name: e.documentation for e in with_docs[GROUP]} == \
        {n: docs.GROUP[n] for n in GROUP_CONFIG_NAMES}
    assert {e.name: e.documentation for e in with_docs[CLIENT_METRICS]} == \
        {"interval.ms": docs.CLIENT_METRICS["interval.ms"]}
