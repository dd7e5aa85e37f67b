"""``kaflite groups`` on KIP-848 consumer groups (confluent-kafka, group.protocol=consumer):
the group type in the listing, epochs, current and target assignments, and which
members are still reconciling."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.groups._consumer_group import ConsumerGroup
from kaflite.protocol import errors
from tests.cli._cli import cli, table
from tests.conftest import wait_for

ck = pytest.importorskip("confluent_kafka")
TOPIC = "cg-topic"
CONFIG = {"group.consumer.heartbeat.interval.ms": 200,
          "group.consumer.min.heartbeat.interval.ms": 100, "offsets.topic.num.partitions": 1}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1, config=CONFIG) as c:
        c.create_topic(TOPIC, 4, 1)
        yield c


def consumer(cluster: Cluster, group: str, name: str) -> Any:
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                     "group.protocol": "consumer", "client.id": name,
                     "auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    return c


def coordinator_group(cluster: Cluster, group: str) -> ConsumerGroup | None:
    broker = next(iter(cluster.brokers.values()))
    assert broker.groups is not None
    try:
        return broker.groups.shard_for(group).consumer_groups.get(group)
    except errors.KafkaError:
        return None


def members_json(cluster: Cluster, group: str) -> dict[str, dict[str, Any]]:
    out = cli("groups", "describe", group, "--members", "--verbose", "--json",
              "-b", cluster.bootstrap_servers).stdout
    return {m["client_id"]: m for m in json.loads(out)}


def test_list_describe_and_reconciling_members(cluster: Cluster) -> None:
    b, group = cluster.bootstrap_servers, "cg-cli"
    c1 = consumer(cluster, group, "one")
    c2 = None
    try:
        wait_for(lambda: (c1.poll(0.05), len(c1.assignment()) == 4)[1], "c1 assigned", 30)
        listed = table(cli("groups", "list", "--type", "consumer", "-b", b).stdout)
        assert listed[0] == ["GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"]
        assert [group, "consumer", "consumer", "Stable"] in listed[1:]
        assert all(row[1] == "consumer" for row in listed[1:])
        # c1 stops polling: it cannot revoke what the second member should get, so both
        # are reconciling until it polls again.
        c2 = consumer(cluster, group, "two")
        def revoking() -> bool:
            c2.poll(0.05)
            g = coordinator_group(cluster, group)
            return g is not None and str(g.state) == "Reconciling" and any(
                m.client_id == "one" and m.pending_revocation for m in g.members.values())
        wait_for(revoking, "the group reconciling, c1 asked to revoke", 30)
        members = members_json(cluster, group)
        assert members["one"]["reconciling"] and members["two"]["reconciling"]
        one, two = members["one"], members["two"]
        # c1 keeps its epoch until it has revoked (its pending revocations are not shown,
        # as in Kafka); c2 is at the target epoch, waiting for the partitions to be freed.
        assert one["current_epoch"] < one["target_epoch"] == two["current_epoch"]
        assert len(one["target"]) == 2 and len(two["target"]) == 2
        assert set(one["assignment"]) == set(one["target"]) and two["assignment"] == []

        def stable() -> bool:
            c1.poll(0.02)
            c2.poll(0.02)
            g = coordinator_group(cluster, group)
            return g is not None and str(g.state) == "Stable"
        wait_for(stable, "the group stable", 30)
        g = coordinator_group(cluster, group)
        assert g is not None
        members = members_json(cluster, group)
        for name, c in (("one", c1), ("two", c2)):
            m = members[name]
            mine = sorted(tp.partition for tp in c.assignment())
            assert not m["reconciling"]
            assert m["current_epoch"] == m["target_epoch"] == g.assignment_epoch
            assert m["current_assignment"] == f"{TOPIC}({','.join(map(str, mine))})"
            assert m["assignment"] == m["target"] == [f"{TOPIC}-{p}" for p in mine]
        # The table: Kafka's --members --verbose columns, RECONCILING last.
        rows = table(cli("groups", "describe", group, "--members", "--verbose",
                         "-b", b).stdout)
        assert rows[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                           "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                           "TARGET-ASSIGNMENT", "RECONCILING"]
        assert sorted(r[3] for r in rows[1:]) == ["one", "two"]
        assert all(r[4] == "2" and r[5] == r[7] and r[6] == r[8] and r[9] == "false"
                   for r in rows[1:])
        state = table(cli("groups", "describe", group, "--state", "--verbose",
                          "-b", b).stdout)
        assert state[0] == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                            "GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        assert state[1][-5:] == ["uniform", "Stable", str(g.group_epoch),
                                 str(g.assignment_epoch), "2"]
        # The offsets view: one row per partition with its owner's client id.
        offsets = table(cli("groups", "describe", group, "-b", b).stdout)
        assert sorted((r[2], r[-1]) for r in offsets[1:]) == sorted(
            [(str(tp.partition), "one") for tp in c1.assignment()]
            + [(str(tp.partition), "two") for tp in c2.assignment()])
    finally:
        c1.close()
        if c2 is not None:
            c2.close()
