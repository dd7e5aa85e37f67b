"""Typed client events: kinds, phases and fields; the old API; publishing to a topic."""

from __future__ import annotations

import re
from pathlib import Path

import kaflite
from kaflite.client import TopicPartition
from kaflite.client.events import CLIENT_EVENTS_TOPIC, Event, EventKind, EventLog, Phase
from kaflite.client.sync import Consumer, Producer
from kaflite.cluster import Cluster
from kaflite.protocol import errors
from tests.conftest import wait_for


def test_an_event_is_typed_and_round_trips() -> None:
    log = EventLog("typed")
    seen: list[Event] = []
    log.subscribe(seen.append)
    event = log.emit("coordinator", "coordinator 1 unknown for group g", cause="NOT_COORDINATOR",
                     broker=1, group="g", error_code=errors.NotCoordinatorError.code)
    assert event.kind is EventKind.COORDINATOR and event.phase is Phase.ERROR
    assert event.reason == "NOT_COORDINATOR" and event.client_id == "typed"
    key, value = event.encode()
    assert key == b"typed"
    back = Event.decode(value)
    assert back == event and back.kind is EventKind.COORDINATOR and back.phase is Phase.ERROR
    # the old API: kind as a string, the message, the cause, str(), kind filter, callbacks
    assert event.kind == "coordinator" and event.message.startswith("coordinator 1")
    assert str(event).endswith("[coordinator] coordinator 1 unknown for group g "
                               "(NOT_COORDINATOR)")
    moved = log.emit("coordinator", "coordinator moved 1→2", broker=2, group="g")
    assert moved.phase is Phase.OUTCOME and moved.error_code is None
    acting = log.emit("rebalance", "joining group g", phase=Phase.ACTION, group="g")
    assert log.list("coordinator") == [event, moved] and seen == [event, moved, acting]
    assert log.list(phase="action") == [acting]
    assert log.emit("something-new", "x").kind is EventKind.OTHER


def test_client_events_carry_typed_fields_and_are_published() -> None:
    with Cluster(brokers=1) as cluster:
        cluster.create_topic("ev", 1, 1)
        boot = cluster.bootstrap_servers
        with Producer({"bootstrap.servers": boot, "client.id": "publishing",
                       "events.publish": True, "events.publish.interval.ms": 50}) as p:
            p.send("ev", b"x")
            p.flush(10)
            [boot_event] = p.events("bootstrap")
            assert boot_event.phase is Phase.ACTION
            refreshed = p.events("metadata")
            assert [e.reason for e in refreshed] == ["bootstrap", "new topic ev"]
            publisher = p._async.event_publisher
            assert publisher is not None
            wait_for(lambda: publisher.written >= len(p.events()), "the events published")
            mine = [e.to_dict() for e in p.events()]
        with Consumer({"bootstrap.servers": boot, "client.id": "events-reader",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False}) as c:
            c.assign([TopicPartition(CLIENT_EVENTS_TOPIC, 0)])
            got: list[Event] = []

            def read() -> bool:
                for records in c.getmany(timeout_ms=200).values():
                    got.extend(Event.decode(bytes(r.value)) for r in records
                               if r.value is not None)
                return len(got) >= len(mine)

            wait_for(read, "the published events read back", timeout=20)
        assert [e.to_dict() for e in got[:len(mine)]] == mine
        assert {e.client_id for e in got} == {"publishing"}
        assert any(e.kind is EventKind.BOOTSTRAP and e.phase is Phase.ACTION for e in got)
        assert any(e.kind is EventKind.METADATA and e.reason == "bootstrap" for e in got)


def test_publishing_is_off_by_default() -> None:
    with Cluster(brokers=1) as cluster, Producer(
            {"bootstrap.servers": cluster.bootstrap_servers}) as p:
        p.send("plain", b"x")
        assert p._async.event_publisher is None
        assert CLIENT_EVENTS_TOPIC not in cluster.controller.topics


def test_every_kind_the_client_emits_is_an_event_kind() -> None:
    """A kind the enum does not know would read back as OTHER: each is in the enum."""
    root = Path(kaflite.__file__).parent
    kinds = {m.group(1) for path in root.rglob("*.py")
             for m in re.finditer(r'emit\(\s*"([a-z_-]+)"', path.read_text())}
    assert {"rebalance", "metadata", "telemetry"} <= kinds
    assert kinds <= {k.value for k in EventKind}


def test_the_publisher_buffer_is_bounded_and_counts_drops() -> None:
    from kaflite.client.publisher import TopicPublisher

    publisher = TopicPublisher({"bootstrap.servers": "127.0.0.1:1"}, "t", capacity=2)
    log = EventLog("bounded")
    log.subscribe(publisher.add)
    for i in range(5):
        log.emit("metadata", f"refresh {i}")
    assert publisher.stats() == {"buffered": 2, "capacity": 2, "added": 2, "dropped": 3,
                                 "written": 0, "failed": 0}
    assert len(log.list()) == 5      # the client's own log is not affected
