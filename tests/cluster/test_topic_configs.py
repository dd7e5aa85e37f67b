"""Topic configs set through a real admin client take effect on the data path."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.cluster import Cluster

_ADMINS: dict[str, object] = {}


def admin(cluster: Cluster):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    # Keep the client alive while its futures are pending.
    key = cluster.bootstrap_servers
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient({"bootstrap.servers": key})
    return _ADMINS[key]


def alter(cluster: Cluster, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for fut in admin(cluster).incremental_alter_configs([res]).values():
        fut.result(10)


def describe(cluster: Cluster, topic: str) -> dict[str, tuple[str, int]]:
    from confluent_kafka.admin import ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = next(iter(admin(cluster).describe_configs([res]).values())).result(10)
    return {k: (e.value, int(e.source)) for k, e in entries.items()}


def produce(cluster: Cluster, topic: str, values: list[bytes], **extra: object) -> list[str]:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 0, **extra})
    for v in values:
        p.produce(topic, v, key=v[:3], on_delivery=lambda e, m: errors.append(e.name())
                  if e is not None else None)
        p.poll(0)
    p.flush(30)
    return errors


def read_all(cluster: Cluster, topic: str, timeout: float = 10):  # type: ignore[no-untyped-def]
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "cfg",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, -2)])
    out = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msgs = c.consume(1000, 0.3)
        out += msgs
        if not msgs and out:
            break
    c.close()
    return out


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    with Cluster(brokers=1, data_dir=tmp_path,
                 config={"log.retention.check.interval.ms": 100}) as c:
        try:
            yield c
        finally:
            # Drop the admin client while its cluster still runs: kept, it would retry
            # the stopped cluster's address (and log each refusal) until the session ends.
            _ADMINS.pop(c.bootstrap_servers, None)


def test_describe_reports_set_values_and_defaults(cluster: Cluster) -> None:
    cluster.create_topic("described", configs={"retention.ms": "12345"})
    configs = describe(cluster, "described")
    assert configs["retention.ms"] == ("12345", 1)  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"] == ("delete", 5)  # DEFAULT_CONFIG
    alter(cluster, "described", {"segment.bytes": "1048576"})
    assert describe(cluster, "described")["segment.bytes"] == ("1048576", 1)


def test_batches_larger_than_a_segment_are_refused(cluster: Cluster) -> None:
    cluster.create_topic("tiny-segments", configs={"segment.bytes": "1000"})
    assert produce(cluster, "tiny-segments", [b"z" * 2000]) == ["RECORD_LIST_TOO_LARGE"]


def test_max_message_bytes_rejects_large_batches(cluster: Cluster) -> None:
    cluster.create_topic("small-msgs", configs={"max.message.bytes": "2000"})
    errors = produce(cluster, "small-msgs", [b"x" * 5000])
    assert errors == ["MSG_SIZE_TOO_LARGE"]
    assert produce(cluster, "small-msgs", [b"y" * 100]) == []


def test_log_append_time_stamps_records(cluster: Cluster) -> None:
    cluster.create_topic("lat", configs={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    produce(cluster, "lat", [b"a" * 10], **{"message.timeout.ms": 10000})
    (msg,) = read_all(cluster, "lat")
    ts_type, ts = msg.timestamp()
    assert ts_type == 2  # TIMESTAMP_LOG_APPEND_TIME
    assert before - 5 <= ts <= int(time.time() * 1000) + 5


def test_retention_runs_at_log_retention_check_interval_ms(tmp_path: Path) -> None:
    """Kafka checks retention every log.retention.check.interval.ms (5 minutes by
    default). kaflite checked every 5 s whatever the setting: records stamped a month
    ago went within seconds of their write, where Kafka keeps them until its check
    (found by the differential conformance test against Kafka 4.4)."""
    from confluent_kafka import Producer

    with Cluster(brokers=1, data_dir=tmp_path) as c:     # the default: 300000 ms
        c.create_topic("old", configs={"segment.bytes": "2000"})
        p = Producer({"bootstrap.servers": c.bootstrap_servers, "linger.ms": 0,
                      "batch.size": 600})
        month_ago = int(time.time() * 1000) - 30 * 86_400_000
        for i in range(40):
            p.produce("old", b"%05d" % i * 50, timestamp=month_ago + i)
        assert p.flush(30) == 0
        plog = c.broker(0).partitions[("old", 0)].log
        assert len(plog.segments) > 3       # closed segments past retention.ms
        deadline = time.monotonic() + 7     # past the 5 s it once took
        while time.monotonic() < deadline:
            assert plog.log_start_offset == 0, "retention ran before its check was due"
            time.sleep(0.2)


def test_segment_bytes_and_retention_delete_old_segments(cluster: Cluster) -> None:
    cluster.create_topic("retained", configs={"segment.bytes": "2000"})
    errors = produce(cluster, "retained", [f"{i:05d}".encode() * 50 for i in range(40)],
                     **{"batch.size": 600})
    assert errors == []
    plog = cluster.broker(0).partitions[("retained", 0)].log
    assert len(plog.segments) > 5
    alter(cluster, "retained", {"retention.bytes": "4000"})
    deadline = time.monotonic() + 20
    while plog.log_start_offset == 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert plog.log_start_offset > 0
    first = read_all(cluster, "retained")[0]
    assert first.offset() == plog.log_start_offset


def test_min_insync_replicas_refuses_acks_all(tmp_path: Path) -> None:
    with Cluster(brokers=2, data_dir=tmp_path) as cluster:
        cluster.create_topic("isr", replication_factor=2, configs={"min.insync.replicas": "2"})
        assert produce(cluster, "isr", [b"ok"], acks="all") == []
        cluster.call(cluster.kill_broker(1))
        errors = produce(cluster, "isr", [b"no"], acks="all", **{"message.timeout.ms": 3000})
        assert errors and errors[0] in ("NOT_ENOUGH_REPLICAS", "_MSG_TIMED_OUT")
        assert produce(cluster, "isr", [b"acks1"], acks="1") == []


def test_compaction_keeps_the_latest_value_per_key(cluster: Cluster) -> None:
    cluster.create_topic("compacted", configs={
        "cleanup.policy": "compact", "segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"})
    values = [f"k{i % 3}-{i:04d}".encode() for i in range(60)]
    assert produce(cluster, "compacted", values, **{"batch.size": 200}) == []
    plog = cluster.broker(0).partitions[("compacted", 0)].log
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        msgs = read_all(cluster, "compacted", timeout=3)
        if len(msgs) < 60:
            break
        time.sleep(0.2)
    latest = {m.key(): m.value() for m in msgs}
    assert len(msgs) < 60, f"nothing compacted in {len(plog.segments)} segments"
    assert latest == {b"k0-": b"k0-0057", b"k1-": b"k1-0058", b"k2-": b"k2-0059"}


def test_a_broker_started_with_hours_gives_its_topics_those_hours(tmp_path: Path) -> None:
    """``log.retention.hours``/``minutes``, ``log.roll.hours`` and
    ``log.roll.jitter.hours`` are synonyms of the topic configs in milliseconds, after
    the ``.ms`` form (Kafka's ServerTopicConfigSynonyms): describe and the logs agree."""
    from kaflite.cluster.configs import unit_synonym

    config = {"log.retention.hours": 2, "log.roll.hours": 1, "log.roll.jitter.hours": 1}
    with Cluster(brokers=1, data_dir=tmp_path, config=config) as c:
        try:
            c.create_topic("hours")
            configs = describe(c, "hours")
            assert configs["retention.ms"] == ("7200000", 4)      # STATIC_BROKER_CONFIG
            assert configs["segment.ms"] == ("3600000", 4)
            assert configs["segment.jitter.ms"] == ("3600000", 4)
            broker = c.broker(0)
            log_config = broker.topic_log_config(broker.controller.topics["hours"])
            assert (log_config.retention_ms, log_config.segment_ms) == (7_200_000, 3_600_000)
        finally:
            _ADMINS.pop(c.bootstrap_servers, None)
    # the milliseconds form first, then minutes, then hours; a negative one is unlimited
    assert unit_synonym("retention.ms", {"log.retention.minutes": "3",
                                         "log.retention.hours": "5"}) == \
        ("log.retention.minutes", "180000")
    assert unit_synonym("retention.ms", {"log.retention.hours": "-1"}) == \
        ("log.retention.hours", "-1")
    assert unit_synonym("segment.bytes", {"log.retention.hours": "5"}) is None
