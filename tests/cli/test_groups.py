"""kaflite groups describe / reset-offsets / delete in kafka-consumer-groups' columns."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from kaflite.cli import app
from kaflite.client import TopicPartition
from kaflite.client import sync as ksync
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from tests.cli._cli import cli, runner, table

OFFSET_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                 "CONSUMER-ID", "HOST", "CLIENT-ID"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3) as c:
        c.create_topic("lagged", 3, 3)
        with ksync.Producer({"bootstrap.servers": c.bootstrap_servers}) as p:
            for i in range(60):
                p.send("lagged", f"v{i}".encode(), partition=i % 3)   # 20 a partition
            p.flush()
        yield c


def commit(cluster: Cluster, group: str, offsets: dict[int, int]) -> None:
    with ksync.Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        admin.alter_group_offsets(group, {TopicPartition("lagged", p): o
                                          for p, o in offsets.items()})


def committed(cluster: Cluster, group: str) -> dict[int, int]:
    with ksync.Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
        return {tp.partition: om.offset for tp, om in admin.list_group_offsets(group).items()}


def test_describe_shows_lag_of_what_was_left_unconsumed(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    commit(cluster, "lag-group", {0: 20, 1: 15, 2: 3})
    result = cli("groups", "describe", "lag-group", "-b", b)
    rows = table(result.stdout)
    assert rows[0] == OFFSET_HEADER
    assert rows[1:] == [["lag-group", "lagged", "0", "20", "20", "0", "-", "-", "-"],
                        ["lag-group", "lagged", "1", "15", "20", "5", "-", "-", "-"],
                        ["lag-group", "lagged", "2", "3", "20", "17", "-", "-", "-"]]
    assert "Consumer group 'lag-group' has no active members." in result.stderr
    docs = json.loads(cli("groups", "describe", "lag-group", "-b", b, "--json").stdout)
    assert [(d["partition"], d["current_offset"], d["log_end_offset"], d["lag"],
             d["consumer_id"]) for d in docs] == [(0, 20, 20, 0, None), (1, 15, 20, 5, None),
                                                  (2, 3, 20, 17, None)]
    listed = table(cli("groups", "list", "-b", b).stdout)
    assert listed[0] == ["GROUP", "PROTOCOL-TYPE", "STATE"]
    assert ["lag-group", "-", "Empty"] in listed[1:]
    missing = runner.invoke(app, ["groups", "describe", "no-such-group", "-b", b])
    assert isinstance(missing.exception, errors.GroupIdNotFoundError)


def test_describe_a_live_member_and_refuse_to_reset_it(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    config = {"bootstrap.servers": b, "group.id": "live-group", "client.id": "live-client",
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    with ksync.Consumer(config) as consumer:
        consumer.subscribe(["lagged"])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < 60 and time.monotonic() < deadline:
            seen += len(consumer.poll(timeout_ms=500))
        assert seen == 60
        consumer.commit()
        member = consumer.group_metadata().member_id
        rows = table(cli("groups", "describe", "live-group", "-b", b).stdout)
        assert rows[0] == OFFSET_HEADER
        assert [r[:6] for r in rows[1:]] == [["live-group", "lagged", str(p), "20", "20", "0"]
                                             for p in range(3)]
        assert {(r[6], r[8]) for r in rows[1:]} == {(member, "live-client")}
        members = table(cli("groups", "describe", "live-group", "--members", "-b", b).stdout)
        assert members[0] == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
        assert members[1][:2] == ["live-group", member]
        assert members[1][3:] == ["live-client", "3"]
        state = cli("groups", "describe", "live-group", "--state", "-b", b).stdout.splitlines()
        assert state[0].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY",
                                    "STATE", "#MEMBERS"]
        [doc] = json.loads(cli("groups", "describe", "live-group", "--state", "-b", b,
                               "--json").stdout)
        assert (doc["state"], doc["members"]) == ("Stable", 1)
        assert state[1].split()[-2:] == ["Stable", "1"]
        assert f"({doc['coordinator_id']})" in state[1]
        refused = runner.invoke(app, ["groups", "reset-offsets", "live-group", "--topic",
                                      "lagged", "--to-earliest", "--execute", "-b", b])
        assert isinstance(refused.exception, errors.NonEmptyGroupError)
        assert "is inactive, but the current state is Stable" in str(refused.exception)
    assert committed(cluster, "live-group") == {0: 20, 1: 20, 2: 20}


def test_reset_offsets_plans_then_executes(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    commit(cluster, "reset-group", {0: 10, 1: 10, 2: 10})
    plan = cli("groups", "reset-offsets", "reset-group", "--topic", "lagged", "--to-earliest",
               "-b", b)
    assert table(plan.stdout) == [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                                  *[["reset-group", "lagged", str(p), "0"] for p in range(3)]]
    assert "--execute option is missing" in plan.stderr
    assert committed(cluster, "reset-group") == {0: 10, 1: 10, 2: 10}      # a dry run
    cli("groups", "reset-offsets", "reset-group", "--topic", "lagged", "--to-earliest",
        "--execute", "-b", b)
    assert committed(cluster, "reset-group") == {0: 0, 1: 0, 2: 0}
    cli("groups", "reset-offsets", "reset-group", "--topic", "lagged:1", "--to-offset", "99",
        "--execute", "-b", b)                       # past the end: clamped to it
    assert committed(cluster, "reset-group") == {0: 0, 1: 20, 2: 0}
    shifted = json.loads(cli("groups", "reset-offsets", "reset-group", "--all-topics",
                             "--shift-by", "-5", "--execute", "--json", "-b", b).stdout)
    assert [(d["partition"], d["new_offset"]) for d in shifted] == [(0, 0), (1, 15), (2, 0)]
    assert committed(cluster, "reset-group") == {0: 0, 1: 15, 2: 0}
    cli("groups", "reset-offsets", "reset-group", "--topic", "lagged:0,2", "--to-latest",
        "--execute", "-b", b)
    assert committed(cluster, "reset-group") == {0: 20, 1: 15, 2: 20}
    lag = json.loads(cli("groups", "describe", "reset-group", "--json", "-b", b).stdout)
    assert [d["lag"] for d in lag] == [0, 5, 0]
    for bad in (["--topic", "lagged"], ["--to-latest"],
                ["--topic", "lagged", "--to-latest", "--to-earliest"],
                ["--topic", "lagged", "--to-latest", "--dry-run", "--execute"]):
        assert runner.invoke(app, ["groups", "reset-offsets", "reset-group", "-b", b,
                                   *bad]).exit_code == 2


def test_delete_group(cluster: Cluster) -> None:
    b = cluster.bootstrap_servers
    commit(cluster, "doomed-group", {0: 1})
    out = cli("groups", "delete", "doomed-group", "-b", b).stdout
    assert out == "Deletion of requested consumer groups ('doomed-group') was successful.\n"
    assert "doomed-group" not in {d["group"] for d in
                                  json.loads(cli("groups", "list", "-b", b, "--json").stdout)}
