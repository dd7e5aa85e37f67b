"""kaflite topics / configs / transactions in Kafka's layouts, and their --json and -X."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from kaflite.cli import app
from kaflite.cli.configs import parse_add_config
from kaflite.cli.topics import topic_id_text
from kaflite.client import sync as ksync
from kaflite.client.admin import TOPIC, ConfigResource
from kaflite.cluster import Cluster
from tests.cli._cli import cli, runner


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3) as c:
        yield c


def test_topics_describe_prints_kafka_topics_layout(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    assert cli("topics", "create", "lay", "-b", b, "-p", "3", "-r", "3",
               "-c", "retention.ms=60000").stdout == "Created topic lay.\n"
    with ksync.Admin({"bootstrap.servers": b}) as admin:
        md = admin.describe_topics(["lay"])["lay"]
    lines = cli("topics", "describe", "lay", "-b", b).stdout.splitlines()
    assert lines[0] == (f"Topic: lay\tTopicId: {topic_id_text(md.topic_id)}\tPartitionCount: 3"
                        "\tReplicationFactor: 3\tConfigs: retention.ms=60000")
    parts = sorted(md.partitions, key=lambda p: p.partition)
    assert lines[1:] == [
        f"\tTopic: lay\tPartition: {p.partition}\tLeader: {p.leader}"
        f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
        "\tElr: N/A\tLastKnownElr: N/A" for p in parts]
    # Kafka's Uuid.toString: 22 characters of URL-safe base64
    assert len(topic_id_text(md.topic_id)) == 22
    [doc] = json.loads(cli("topics", "describe", "lay", "-b", b, "--json").stdout)
    assert doc["topic_id"] == topic_id_text(md.topic_id)
    assert (doc["partition_count"], doc["replication_factor"]) == (3, 3)
    assert doc["configs"] == {"retention.ms": "60000"}
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in doc["partitions"]] \
        == [(p.partition, p.leader, p.replicas, p.isr) for p in parts]


def test_topics_create_list_alter_delete(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    made = json.loads(cli("topics", "create", "tl", "-b", b, "-p", "2", "--json").stdout)
    assert (made["topic"], made["created"], made["partitions"]) == ("tl", True, 2)
    again = cli("topics", "create", "tl", "-b", b, "--if-not-exists", "--json").stdout
    assert json.loads(again)["created"] is False
    assert runner.invoke(app, ["topics", "create", "tl", "-b", b]).exit_code != 0
    assert "tl" in cli("topics", "list", "-b", b).stdout.splitlines()
    assert {"topic": "tl"} in json.loads(cli("topics", "list", "-b", b, "--json").stdout)
    assert json.loads(cli("topics", "alter", "tl", "-p", "4", "-b", b, "--json").stdout) \
        == {"topic": "tl", "partitions": 4}
    assert len(cluster.controller.topics["tl"].partitions) == 4
    assert cli("topics", "delete", "tl", "-b", b).stdout == ""
    assert "tl" not in cli("topics", "list", "-b", b).stdout.splitlines()
    gone = json.loads(cli("topics", "delete", "tl", "-b", b, "--if-exists", "--json").stdout)
    assert gone == [{"topic": "tl", "deleted": False}]


def test_admin_commands_take_client_properties(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    cli("topics", "list", "-b", b, "-X", "client.id=x-admin-topics")
    cli("groups", "list", "-b", b, "-X", "client.id=x-admin-groups")
    cli("transactions", "list", "-b", b, "-X", "client.id=x-admin-txn")
    seen = {c.client_id for c in cluster.registry.connections(include_closed=True)}
    assert {"x-admin-topics", "x-admin-groups", "x-admin-txn"} <= seen
    bad = runner.invoke(app, ["topics", "list", "-b", b, "-X", "request.timeout.ms=soon"])
    assert bad.exit_code != 0 and "request.timeout.ms" in str(bad.exception)


def test_configs_alter_is_visible_in_describe(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    cluster.create_topic("cfg", 1, 3)
    empty = cli("configs", "describe", "--entity-type", "topics", "--entity-name", "cfg", "-b", b)
    assert empty.stdout == "Dynamic configs for topic cfg are:\n"
    done = cli("configs", "alter", "--entity-type", "topics", "--entity-name", "cfg", "-b", b,
               "--add-config", "retention.ms=120000,cleanup.policy=[compact,delete]")
    assert done.stdout == "Completed updating config for topic cfg.\n"
    lines = cli("configs", "describe", "--topic", "cfg", "-b", b).stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg are:"
    assert lines[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms="
                               "{DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete")
    assert lines[2].startswith("  retention.ms=120000 sensitive=false synonyms="
                               "{DYNAMIC_TOPIC_CONFIG:retention.ms=120000")
    assert len(lines) == 3
    with ksync.Admin({"bootstrap.servers": b}) as admin:
        res = ConfigResource(TOPIC, "cfg")
        assert admin.describe_configs([res])[res]["retention.ms"] == "120000"
    [doc] = json.loads(cli("configs", "describe", "--topic", "cfg", "-b", b, "--json").stdout)
    assert [(c["name"], c["value"], c["source"]) for c in doc["configs"]] == [
        ("cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG"),
        ("retention.ms", "120000", "DYNAMIC_TOPIC_CONFIG")]
    cli("configs", "alter", "--topic", "cfg", "-b", b, "--delete-config", "retention.ms")
    after = cli("configs", "describe", "--topic", "cfg", "-b", b).stdout
    assert "retention.ms" not in after and "cleanup.policy=compact,delete" in after
    # Deleting a config that is not set is refused, as kafka-configs refuses it.
    refused = runner.invoke(app, ["configs", "alter", "--topic", "cfg", "-b", b,
                                  "--delete-config", "retention.ms"])
    assert refused.exit_code != 0 and "Invalid config(s): retention.ms" in str(refused.exception)
    everything = cli("configs", "describe", "--topic", "cfg", "-b", b, "--all").stdout
    assert everything.startswith("All configs for topic cfg are:\n")
    assert "  min.insync.replicas=" in everything and "DEFAULT_CONFIG:" in everything
    assert cli("configs", "describe", "--topic", "nosuch", "-b", b).stdout == \
        "The topic 'nosuch' doesn't exist and doesn't have dynamic config.\n"


def test_configs_describe_brokers_and_option_shapes(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    out = cli("configs", "describe", "--broker", "1", "--all", "-b", b).stdout
    assert out.startswith("All configs for broker 1 are:\n") and "  num.partitions=" in out
    everyone = json.loads(cli("configs", "describe", "--entity-type", "brokers", "-b", b,
                              "--json").stdout)
    assert [d["entity_name"] for d in everyone] == ["0", "1", "2"]
    for bad in (["--entity-type", "users", "--entity-name", "u"], ["--entity-name", "t"],
                ["--topic", "a", "--broker", "1"], ["--broker", "x"]):
        assert runner.invoke(app, ["configs", "describe", "-b", b, *bad]).exit_code == 2
    assert parse_add_config("a=1, b=[x,y],c=") == {"a": "1", "b": "x,y", "c": ""}


def test_configs_of_the_brokers_default_as_kafka_configs_prints_them(cluster: Cluster) -> None:
    """Lines as Kafka 4.4's kafka-configs prints them (its tool, run against kaflite)."""
    b = cluster.bootstrap_servers
    entity = ("--entity-type", "brokers", "--entity-default", "-b", b)
    assert cli("configs", "alter", *entity, "--add-config", "log.retention.ms=3600000"
               ).stdout == "Completed updating default config for brokers in the cluster.\n"
    assert cli("configs", "describe", *entity).stdout == (
        "Default configs for brokers in the cluster are:\n"
        "  log.retention.ms=3600000 sensitive=false "
        "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000}\n")
    # a broker lists its own dynamic configs only; --all shows the default's in force
    assert cli("configs", "describe", "--broker", "0", "-b", b).stdout == \
        "Dynamic configs for broker 0 are:\n"
    assert "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG" \
        in cli("configs", "describe", "--broker", "0", "--all", "-b", b).stdout
    assert cli("configs", "alter", *entity, "--delete-config", "log.retention.ms").exit_code == 0
    assert cli("configs", "describe", *entity).stdout == \
        "Default configs for brokers in the cluster are:\n"
    assert runner.invoke(app, ["configs", "describe", "--entity-default", "-b", b]).exit_code == 2


def test_configs_of_a_group(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    assert cli("configs", "describe", "--group", "cg", "-b", b).stdout == \
        "Dynamic configs for group cg are:\n"    # a group needs not exist to carry configs
    done = cli("configs", "alter", "--entity-type", "groups", "--entity-name", "cg", "-b", b,
               "--add-config", "consumer.session.timeout.ms=50000,share.isolation.level="
               "read_committed")
    assert done.stdout == "Completed updating config for group cg.\n"
    lines = cli("configs", "describe", "--group", "cg", "-b", b).stdout.splitlines()
    assert lines == [
        "Dynamic configs for group cg are:",
        "  consumer.session.timeout.ms=50000 sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:consumer.session.timeout.ms=50000}",
        "  share.isolation.level=read_committed sensitive=false synonyms="
        "{DYNAMIC_GROUP_CONFIG:share.isolation.level=read_committed}"]
    refused = runner.invoke(app, ["configs", "alter", "--group", "cg", "-b", b,
                                  "--add-config", "consumer.session.timeout.ms=1000"])
    assert refused.exit_code != 0 and "group.consumer.min.session.timeout.ms" in \
        str(refused.exception)
    cli("configs", "alter", "--group", "cg", "-b", b, "--delete-config",
        "consumer.session.timeout.ms")
    everything = cli("configs", "describe", "--group", "cg", "--all", "-b", b).stdout
    assert "  consumer.session.timeout.ms=45000 sensitive=false synonyms={DEFAULT_CONFIG:" \
        in everything and "share.isolation.level=read_committed" in everything


def test_transactions_in_kafka_transactions_columns(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    cluster.create_topic("txn-cols", 1, 3)
    with ksync.Producer({"bootstrap.servers": b, "transactional.id": "cols-tid"}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send("txn-cols", b"open", partition=0)
        p.flush()
        listed = cli("transactions", "list", "-b", b, "--state", "Ongoing").stdout.splitlines()
        assert listed[0].split() == ["TransactionalId", "Coordinator", "ProducerId",
                                     "TransactionState"]
        [row] = [line.split() for line in listed[1:] if line.startswith("cols-tid ")]
        [doc] = json.loads(cli("transactions", "describe", "cols-tid", "-b", b,
                               "--json").stdout)
        assert row == ["cols-tid", str(doc["coordinator_id"]), str(doc["producer_id"]),
                       "Ongoing"]
        table = cli("transactions", "describe", "cols-tid", "-b", b).stdout.splitlines()
        assert table[0].split() == [
            "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
            "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
            "TransactionDurationMs", "TopicPartitions"]
        values = table[1].split()
        assert values[:6] == [str(doc["coordinator_id"]), "cols-tid", str(doc["producer_id"]),
                              str(doc["producer_epoch"]), "Ongoing", str(doc["timeout_ms"])]
        assert values[6] == str(doc["start_ms"]) and values[8] == "txn-cols-0"
        assert doc["partitions"] == ["txn-cols-0"] and doc["coordinator_id"] in (0, 1, 2)
        p.abort_transaction()
    listed = cli("transactions", "list", "-b", b, "--state", "Ongoing", "--json").stdout
    assert "cols-tid" not in {t["transactional_id"] for t in json.loads(listed)}


def test_features_describe_downgrade_and_upgrade(cluster: Cluster) -> None:
    """kafka-features' describe lines, a refused upgrade, a dry run, a downgrade of
    transaction.version to 0 and back; the Admin client sees each level."""
    b = cluster.bootstrap_servers
    lines = cli("features", "describe", "-b", b).stdout.splitlines()
    rows = {line.split()[1]: line.split() for line in lines}
    assert rows["transaction.version"][2:8] == ["SupportedMinVersion:", "0",
                                                "SupportedMaxVersion:", "2",
                                                "FinalizedVersionLevel:", "2"]
    refused = runner.invoke(app, ["features", "upgrade", "-b", b,
                                  "--feature", "transaction.version=3"])
    assert refused.exit_code == 1 and "supports levels 0 to 2" in refused.stderr
    dry = cli("features", "downgrade", "-b", b, "--feature", "transaction.version=0",
              "--dry-run").stdout
    assert "transaction.version can be downgraded to 0." in dry
    with ksync.Admin({"bootstrap.servers": b}) as admin:
        assert admin.describe_features().finalized["transaction.version"] == 2
        cli("features", "downgrade", "-b", b, "--feature", "transaction.version=0")
        after = admin.describe_features()
        assert "transaction.version" not in after.finalized
        assert after.supported["transaction.version"] == (0, 2)
        assert admin.update_features({"transaction.version": 2}) == {"transaction.version": None}
        assert admin.describe_features().finalized["transaction.version"] == 2
