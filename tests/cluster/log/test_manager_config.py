"""LogManager (data directory, meta.properties, delete) and LogConfig (names, defaults, checks)."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from kaflite.cluster.log import LogConfig, LogManager
from tests.cluster.log.helpers import T0, batch, read_records

# -- LogConfig -----------------------------------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    cfg = LogConfig()
    props = cfg.to_props()
    assert props["segment.bytes"] == "1073741824"
    assert props["segment.ms"] == "604800000"
    assert props["retention.ms"] == "604800000"
    assert props["retention.bytes"] == "-1"
    assert props["cleanup.policy"] == "delete"
    assert props["max.message.bytes"] == "1048588"
    assert props["message.timestamp.type"] == "CreateTime"
    assert props["min.insync.replicas"] == "1"
    assert props["flush.messages"] == str((1 << 63) - 1)
    assert props["index.interval.bytes"] == "4096"
    assert props["delete.retention.ms"] == "86400000"
    assert props["min.compaction.lag.ms"] == "0"
    assert cfg.delete and not cfg.compact


def test_from_props_parses_strings_and_round_trips() -> None:
    cfg = LogConfig.from_props({
        "segment.bytes": "2048", "retention.ms": "-1", "cleanup.policy": "compact, Delete",
        "message.timestamp.type": "LogAppendTime", "min.insync.replicas": 2,
        "flush.messages": "10", "compression.type": "zstd", "retention.bytes": None,
    })
    assert cfg.segment_bytes == 2048 and cfg.retention_ms == -1
    assert cfg.compact and cfg.delete and cfg.log_append_time
    assert cfg.min_insync_replicas == 2 and cfg.flush_messages == 10
    assert LogConfig.from_props(cfg.to_props()) == cfg
    # internal.segment.bytes (Kafka 4's testing override) wins over segment.bytes.
    assert LogConfig.from_props({"segment.bytes": "4096", "internal.segment.bytes": "100"}
                                ).segment_bytes == 100
    base = LogConfig(retention_ms=5)
    assert LogConfig.from_props({"segment.ms": "7"}, base=base).retention_ms == 5


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.bytes", "lots"),
        ("segment.ms", "0"),
        ("retention.ms", "-2"),
        ("cleanup.policy", "compact,shred"),
        ("max.message.bytes", "-1"),
        ("message.timestamp.type", "WallClock"),
        ("min.insync.replicas", "0"),
        ("flush.messages", "0"),
        ("index.interval.bytes", "-5"),
        ("delete.retention.ms", "-1"),
        ("min.compaction.lag.ms", "-1"),
    ],
)
def test_invalid_values_name_the_property(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        LogConfig.from_props({name: value})


def test_unknown_names_are_ignored_unless_strict() -> None:
    assert LogConfig.from_props({"preallocate": "true"}) == LogConfig()
    with pytest.raises(ValueError, match="bogus"):
        LogConfig.from_props({"bogus": "1"}, ignore_unknown=False)
    with pytest.raises(ValueError, match=r"min\.compaction\.lag\.ms"):
        LogConfig.from_props({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


# -- LogManager ----------------------------------------------------------------------------------


def test_meta_properties_and_node_identity(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, node_id=3, cluster_id="abcDEF123")
    text = (tmp_path / "meta.properties").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    props = dict(line.split("=", 1) for line in lines)
    assert props["node.id"] == "3" and props["cluster.id"] == "abcDEF123"
    assert props["version"] == "1" and len(props["directory.id"]) == 22
    manager.close()
    LogManager(tmp_path, node_id=3, cluster_id="abcDEF123").close()
    with pytest.raises(ValueError, match=r"node\.id"):
        LogManager(tmp_path, node_id=4, cluster_id="abcDEF123")
    with pytest.raises(ValueError, match=r"cluster\.id"):
        LogManager(tmp_path, node_id=3, cluster_id="other")


def test_create_load_and_delete_partitions(tmp_path: Path) -> None:
    manager = LogManager(tmp_path, node_id=1, cluster_id="c")
    tid = uuid.uuid4()
    small = LogConfig(segment_bytes=300)
    logs = [manager.get_or_create("my-topic", p, tid, small) for p in range(3)]
    assert manager.get_or_create("my-topic", 1) is logs[1]
    for p, log in enumerate(logs):
        for i in range(5 * (p + 1)):
            log.append_as_leader(batch([b"%d-%d" % (p, i)]), 0, now_ms=T0)
    assert manager.partitions() == [("my-topic", 0), ("my-topic", 1), ("my-topic", 2)]
    assert sorted(os.listdir(tmp_path)) == ["meta.properties", "my-topic-0", "my-topic-1",
                                            "my-topic-2"]
    manager.close()

    manager = LogManager(tmp_path, node_id=1, cluster_id="c")
    loaded = manager.load_all({"my-topic": small})
    assert len(loaded) == 3
    again = manager.get("my-topic", 2)
    assert again is not None and again.topic_id == tid and again.config == small
    assert [r[2] for r in read_records(again)][-1] == b"2-14"
    assert manager.get_or_create("my-topic", 2, tid) is again

    assert manager.delete_partition("my-topic", 0)
    assert manager.get("my-topic", 0) is None
    assert "my-topic-0" not in os.listdir(tmp_path)
    assert not manager.delete_partition("my-topic", 0)
    # A half-finished delete from a crash is cleaned at the next start.
    (tmp_path / "my-topic-1.0123abcd-delete").mkdir()
    manager.close()
    manager = LogManager(tmp_path)
    manager.load_all()
    assert manager.partitions() == [("my-topic", 1), ("my-topic", 2)]
    assert not [n for n in os.listdir(tmp_path) if n.endswith("-delete")]
    manager.close()


def test_a_recreated_topic_replaces_the_stray_log(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    old = manager.get_or_create("t", 0, uuid.uuid4())
    old.append_as_leader(batch([b"old"]), 0, now_ms=T0)
    manager.close()
    manager = LogManager(tmp_path)
    new = manager.get_or_create("t", 0, uuid.uuid4())  # same name, new topic id
    assert new.log_end_offset == 0
    manager.close()


def test_housekeeping_and_config_updates(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    log = manager.get_or_create("t", 0, None, LogConfig())
    for _ in range(3):
        log.append_as_leader(batch([b"v"], ts=T0), 0, now_ms=T0)
        log.roll(now_ms=T0)
    assert manager.housekeeping(T0 + 1000) == 0
    manager.update_config("t", LogConfig(retention_ms=500))
    assert log.config.retention_ms == 500
    assert manager.housekeeping(T0 + 1000) == 3
    assert log.log_start_offset == 3
    manager.close()


def test_logs_prepared_on_a_thread_are_taken_by_their_topic_only(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    tid, other = uuid.uuid4(), uuid.uuid4()
    made: list[int] = []
    worker = threading.Thread(
        target=lambda: made.append(manager.prepare("t", [0, 1], tid, LogConfig())))
    worker.start()
    worker.join()
    assert made == [2] and (tmp_path / "t-0").is_dir() and (tmp_path / "t-1").is_dir()
    assert manager.partitions() == []          # prepared, not yet the broker's
    first = manager.get_or_create("t", 0, tid)
    first.append_as_leader(batch([b"kept"]), 0, now_ms=T0)
    assert manager.get_or_create("t", 0, tid) is first and first.topic_id == tid
    # A topic of another id (created meanwhile by another path) does not take it: the
    # directory is a stray for it and starts empty.
    assert manager.get_or_create("t", 1, other).topic_id == other
    # An existing directory is never prepared over.
    assert manager.prepare("t", [0], tid, LogConfig()) == 0
    assert read_records(manager.get_or_create("t", 0, tid)) == [(0, None, b"kept")]
    manager.close()


def test_a_topic_not_created_leaves_no_prepared_log(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    tid = uuid.uuid4()
    assert manager.prepare("gone", [0, 1, 2], tid, LogConfig()) == 3
    manager.drop_prepared("gone", uuid.uuid4())      # another id: nothing of ours
    assert (tmp_path / "gone-0").is_dir()
    manager.drop_prepared("gone", tid)
    assert not any(p.name.startswith("gone-") for p in tmp_path.iterdir())
    assert manager.get_or_create("gone", 0, tid).log_end_offset == 0   # made afresh
    manager.close()
