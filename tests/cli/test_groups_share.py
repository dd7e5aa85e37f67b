"""``kaflite groups`` on share groups (KIP-932): listed with their type, described as
kafka-share-groups.sh does (start offset, lag; with --verbose the end offset, records
in flight and delivery counts), members and state, offsets reset, and deleted."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from kaflite.cli import app
from kaflite.cluster import Cluster

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):
    pytest.skip("confluent-kafka has no ShareConsumer", allow_module_level=True)
runner = CliRunner()
TOPIC, GROUP = "sg-topic", "sg-cli"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=1, config={"offsets.topic.num.partitions": 1,
                                    "share.coordinator.state.topic.num.partitions": 1}) as c:
        c.create_topic(TOPIC, 2, 1)
        broker = c.broker(0)
        assert broker.share is not None
        broker.share.group_configs[GROUP] = {"share.auto.offset.reset": "earliest"}
        producer = ck.Producer({"bootstrap.servers": c.bootstrap_servers,
                                "batch.num.messages": 5})
        for i in range(20):
            producer.produce(TOPIC, f"v{i}".encode(), partition=i % 2)
        assert producer.flush(30) == 0
        yield c


def cli(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def test_share_group_listed_described_and_deleted(cluster: Cluster) -> None:
    from confluent_kafka import AcknowledgeType

    bs = ["--bootstrap", cluster.bootstrap_servers]
    c = ck.ShareConsumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP,
                          "client.id": "sg-member", "share.acknowledgement.mode": "explicit"})
    c.subscribe([TOPIC])
    seen: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while len(seen) < 20 and time.monotonic() < deadline:
            msgs = [m for m in c.poll(0.5) if m.error() is None]
            for m in msgs:
                # partition 0: accept; partition 1: release the first delivery
                kind = AcknowledgeType.ACCEPT if m.partition() == 0 or m.delivery_count() > 1 \
                    else AcknowledgeType.RELEASE
                c.acknowledge(m, kind)
                if kind == AcknowledgeType.ACCEPT:
                    seen.append(m)
            if msgs:
                c.commit_sync()
        assert len(seen) == 20
        listed = json.loads(cli("groups", "list", "--type", "share", "--json", *bs).output)
        assert listed == [{"group": GROUP, "type": "share", "protocol_type": "share",
                           "state": "Stable"}]
        members = json.loads(cli("groups", "describe", GROUP, "--members", "--verbose",
                                 "--json", *bs).output)
        assert [(m["client_id"], m["partitions"], m["assignment"]) for m in members] == \
            [("sg-member", 2, f"{TOPIC}:0,1")]
        state = json.loads(cli("groups", "describe", GROUP, "--state", "--json", *bs).output)
        assert state[0]["state"] == "Stable" and state[0]["members"] == 1
        text = cli("groups", "describe", GROUP, "--verbose", *bs).output.splitlines()
        assert text[0].split() == ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH",
                                   "START-OFFSET", "LAG", "END-OFFSET", "IN-FLIGHT",
                                   "DELIVERY-COUNTS"]
        rows = json.loads(cli("groups", "describe", GROUP, "--verbose", "--json", *bs).output)
        assert [(r["partition"], r["start_offset"], r["lag"], r["in_flight"]) for r in rows] \
            == [(0, 10, 0, 0), (1, 10, 0, 0)]
        # Three more records, held (acquired, not acknowledged): in flight, delivered once.
        producer = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(3):
            producer.produce(TOPIC, f"w{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        held: list[Any] = []
        deadline = time.monotonic() + 30
        while len(held) < 3 and time.monotonic() < deadline:
            held += [m for m in c.poll(0.5) if m.error() is None]
        assert len(held) == 3
        rows = json.loads(cli("groups", "describe", GROUP, "--verbose", "--json", *bs).output)
        assert (rows[0]["start_offset"], rows[0]["end_offset"], rows[0]["in_flight"],
                rows[0]["delivery_counts"], rows[0]["lag"]) == (10, 13, 3, "1x3", 3)
        for m in held:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync()
    finally:
        c.close()
    # Empty now: its start offsets can be reset (AlterShareGroupOffsets).
    plan = json.loads(cli("groups", "reset-offsets", GROUP, "--topic", TOPIC, "--to-offset",
                          "4", "--execute", "--json", *bs).output)
    assert [(r["partition"], r["new_offset"]) for r in plan] == [(0, 4), (1, 4)]
    rows = json.loads(cli("groups", "describe", GROUP, "--json", *bs).stdout)
    assert [(r["partition"], r["start_offset"]) for r in rows] == [(0, 4), (1, 4)]
    deleted = cli("groups", "delete", GROUP, *bs)
    assert "deleted" in deleted.output.lower() or deleted.exit_code == 0
    assert json.loads(cli("groups", "list", "--type", "share", "--json", *bs).output) == []
