"""What the controller process and broker processes exchange, without processes: the
metadata image and its deltas, and the registry's rows."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import TypeVar, cast

from kaflite.cluster import metadata_image
from kaflite.cluster.controller import BrokerInfo, Controller
from kaflite.cluster.observe import ConnectionRecord
from kaflite.cluster.observe_wire import record_from_json, record_to_json
from kaflite.cluster.quotas.entities import entity_from_pairs
from kaflite.cluster.quotas.manager import Usage
from kaflite.security.acl import AclBinding
from kaflite.security.scram import scram_credential

T = TypeVar("T")


def through_json(value: T) -> T:
    """``value`` as the other process reads it."""
    return cast(T, json.loads(json.dumps(value)))


def test_a_replica_fed_the_image_and_then_deltas_equals_the_controller() -> None:
    c = Controller(None)
    for n in range(3):
        c.register_broker(BrokerInfo(n, "127.0.0.1", 9092 + n, endpoints={
            "PLAINTEXT": ("127.0.0.1", 9092 + n)}), _Quiet())
    c.create_topic("gone", [[0]])
    c.set_group_configs("g/old", {"consumer.session.timeout.ms": "50000"})
    replica = Controller(None)
    metadata_image.apply(replica, through_json(metadata_image.image(c)))
    last = metadata_image.image(c)
    assert metadata_image.image(replica) == last

    c.create_topic("t", [[0, 1, 2], [1, 2, 0]], {"retention.ms": "1000"}, uuid.uuid4())
    c.alter_scram([("alice", scram_credential("SCRAM-SHA-256", "pw"))], [])
    c.create_acls([AclBinding.from_json(["TOPIC", "t", "LITERAL", "User:alice", "*",
                                          "READ", "ALLOW"])])
    c.alter_client_quotas([(entity_from_pairs([("user", "alice")]),
                            {"producer_byte_rate": 1024.0}, set())])
    c.set_group_configs("g/new", {"share.isolation.level": "read_committed"})
    c.set_group_configs("g/old", {})     # its last config deleted: the record goes
    c.broker_stopped(1)           # leaders move, ISRs shrink, broker 1 fenced
    c.delete_topic("gone")
    new = metadata_image.image(c)
    delta = metadata_image.diff(last, new)
    assert delta["topic/gone"] is None and delta["broker/1"] is not None
    assert delta["group/g/old"] is None
    assert "broker/0" not in delta         # unchanged records are not sent
    assert delta["cluster"]["metadata_offset"] == c.metadata_offset   # the offset moved
    metadata_image.apply(replica, through_json(delta))
    assert metadata_image.image(replica) == new
    assert replica.topics["t"].partitions[0].leader == 0
    assert replica.topics_by_id[c.topics["t"].topic_id].name == "t"
    assert replica.client_quotas.get(entity_from_pairs([("user", "alice")]),
                                     "producer_byte_rate") == 1024.0
    assert len(replica.acls) == 1 and "alice" in replica.scram
    assert replica.group_configs == {"g/new": {"share.isolation.level": "read_committed"}}


def test_every_field_of_a_registry_row_crosses_the_wire() -> None:
    r = ConnectionRecord(7, 2, "10.0.0.1:5000", client_id="c", replica_id=1,
                         partitions={("t", 3)}, groups={"g"}, closed_at=12.5)
    r.stats(0).recent.append(3.25)
    r.stats(0).errors[6] = 2
    r.quotas["producer_byte_rate"] = Usage(10.0, 5.0, "user=alice", 40)
    r.throttled(40)
    r.history.failed(11.0, 0, 6, ["partition t-3"])
    r.history.looked_up(11.5, 3)
    r.history.answered(12.0, 0, ["partition t-3"], [])
    r.history.closed_by = "broker down"
    sent = through_json(record_to_json(r))
    assert {f.name for f in dataclasses.fields(ConnectionRecord)} <= set(sent)
    assert dataclasses.asdict(record_from_json(sent)) == dataclasses.asdict(r)
    assert record_from_json(sent).history.successes[0].targets == ("partition t-3",)


class _Quiet:
    def on_partition_change(self, topic: object, state: object) -> None:
        pass

    def on_topic_deleted(self, topic: object) -> None:
        pass
