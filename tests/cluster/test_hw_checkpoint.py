"""The high-watermark checkpoint: Kafka's one ``replication-offset-checkpoint`` per
data directory, written in a worker thread (``kaflite.cluster.hw_checkpoint``).

* the file is Kafka's format, and a file Kafka wrote is read;
* a restarted broker starts its replicas from it; data directories that still
  hold the older per-partition files load them, and they are replaced;
* a torn ``.tmp`` (a crash mid-write) is ignored;
* the event loop serves while the checkpoint's fsync waits, and a topic deleted
  meanwhile is dropped from the next file and does not come back.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.hw_checkpoint import HighWatermarkCheckpoint
from kaflite.cluster.log import LogManager
from kaflite.cluster.log._files import (
    format_offset_checkpoints,
    read_offset_checkpoints,
    write_offset_checkpoint,
)
from tests.cluster.log.helpers import batch
from tests.conftest import wait_for

NAME = "replication-offset-checkpoint"
# What a Kafka 4 broker writes (CheckpointFile: version, count, one line a partition).
KAFKA_FILE = "0\n3\n__consumer_offsets 17 42\nmy-topic 0 1234\nmy.topic_2 11 0\n"
LONG = {"replica.high.watermark.checkpoint.interval.ms": 600_000}   # only explicit writes


def test_reads_kafkas_file_and_writes_the_same_format(tmp_path: Path) -> None:
    path = tmp_path / NAME
    path.write_text(KAFKA_FILE)
    entries = read_offset_checkpoints(path)
    assert entries == {("__consumer_offsets", 17): 42, ("my-topic", 0): 1234,
                       ("my.topic_2", 11): 0}
    assert format_offset_checkpoints(entries) == KAFKA_FILE
    assert read_offset_checkpoints(tmp_path / "absent") is None
    (tmp_path / "empty").write_text("")
    assert read_offset_checkpoints(tmp_path / "empty") == {}
    (tmp_path / "short").write_text("0\n2\nt 0 5\n")
    with pytest.raises(ValueError, match="expected 2 entries"):
        read_offset_checkpoints(tmp_path / "short")
    (tmp_path / "v1").write_text("1\n0\n")
    with pytest.raises(ValueError):
        read_offset_checkpoints(tmp_path / "v1")


def test_a_torn_tmp_is_ignored_and_replaced(tmp_path: Path) -> None:
    """A crash mid-write leaves ``<file>.tmp`` beside the old file: the old one is read."""
    logs = LogManager(tmp_path)
    plog = logs.get_or_create("t", 0)
    plog.append_as_leader(batch([b"a", b"b", b"c"]), 0)
    (tmp_path / NAME).write_text("0\n1\nt 0 2\n")
    (tmp_path / f"{NAME}.tmp").write_text("0\n1\nt 0 ")     # torn
    hw = HighWatermarkCheckpoint(tmp_path)
    hw.load(logs)
    assert hw.initial(("t", 0), plog.log_end_offset) == 2
    assert hw.initial(("u", 0), 100) == 0
    async def snapshot() -> dict[tuple[str, int], int]:
        return {("t", 0): 3}

    assert asyncio.run(_write_and_close(hw, snapshot)) == {("t", 0): 3}
    assert read_offset_checkpoints(tmp_path / NAME) == {("t", 0): 3}
    assert not (tmp_path / f"{NAME}.tmp").exists()
    logs.close()


async def _write_and_close(
    hw: HighWatermarkCheckpoint,
    snapshot: Callable[[], Awaitable[dict[tuple[str, int], int]]]
) -> dict[tuple[str, int], int] | None:
    try:
        return await hw.write(snapshot)
    finally:
        await hw.close()


def _produce(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(count):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def _checkpoint(cluster: Cluster, node: int = 0) -> bool:
    return cluster.call(cluster.broker(node).checkpoint_high_watermarks())


def test_restart_starts_from_the_data_directory_file(tmp_path: Path) -> None:
    with Cluster(brokers=1, data_dir=tmp_path, config=LONG) as cluster:
        cluster.create_topic("hw", partitions=1)
        _produce(cluster.bootstrap_servers, "hw", 10)
        assert _checkpoint(cluster)
        data_dir = tmp_path / "broker-0"
        assert read_offset_checkpoints(data_dir / NAME) == {("hw", 0): 10}
        assert not (data_dir / "hw-0" / NAME).exists()       # no per-partition file
        assert not _checkpoint(cluster)                      # nothing moved: no write
        cluster.faults.kill_broker(0)
        # A value below the log end, as if written before the last records replicated.
        (data_dir / NAME).write_text("0\n1\nhw 0 7\n")
        cluster.faults.restart_broker(0)
        assert cluster.broker(0).partitions[("hw", 0)].checkpointed_hw == 7


def test_legacy_per_partition_files_are_read_then_replaced(tmp_path: Path) -> None:
    with Cluster(brokers=1, data_dir=tmp_path, config=LONG) as cluster:
        cluster.create_topic("old", partitions=1)
        cluster.create_topic("new", partitions=1)
        _produce(cluster.bootstrap_servers, "old", 10)
        _produce(cluster.bootstrap_servers, "new", 4)
        cluster.faults.kill_broker(0)
        # What an older kaflite left: one file per partition directory, and the
        # data directory's file lacking the line for it.
        data_dir = tmp_path / "broker-0"
        legacy = data_dir / "old-0" / NAME
        write_offset_checkpoint(legacy, "old", 0, 6)
        (data_dir / NAME).write_text("0\n1\nnew 0 3\n")
        cluster.faults.restart_broker(0)
        broker = cluster.broker(0)
        assert broker.partitions[("old", 0)].checkpointed_hw == 6
        assert broker.partitions[("new", 0)].checkpointed_hw == 3
        assert _checkpoint(cluster)
        assert read_offset_checkpoints(data_dir / NAME) == {("old", 0): 10, ("new", 0): 4}
        assert not legacy.exists()


class BlockedFsync:
    """``os.fsync`` that holds the checkpoint file's fsync until released."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self.real = real
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self, fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if target.endswith(f"{NAME}.tmp") and not self.release.is_set():
            self.entered.set()
            assert self.release.wait(60), "the test never released the fsync"
        self.real(fd)


def _held_checkpoint(cluster: Cluster, blocked: BlockedFsync) -> Future[bool]:
    """Broker 0's checkpoint started on the cluster's loop, once it waits in its fsync."""
    loop = cluster._loop
    assert loop is not None
    pending = asyncio.run_coroutine_threadsafe(
        cluster.broker(0).checkpoint_high_watermarks(), loop)
    assert blocked.entered.wait(30), "the checkpoint never reached its fsync"
    return pending


@pytest.fixture
def blocked_fsync(monkeypatch: pytest.MonkeyPatch) -> Iterator[BlockedFsync]:
    blocker = BlockedFsync(os.fsync)
    monkeypatch.setattr(os, "fsync", blocker)
    try:
        yield blocker
    finally:
        blocker.release.set()


def test_the_loop_serves_while_the_checkpoint_fsync_waits(
        tmp_path: Path, blocked_fsync: BlockedFsync) -> None:
    with Cluster(brokers=1, data_dir=tmp_path, config=LONG) as cluster:
        cluster.create_topic("busy", partitions=1)
        _produce(cluster.bootstrap_servers, "busy", 3)
        pending = _held_checkpoint(cluster, blocked_fsync)
        # The fsync is held in the worker thread: Produce round trips still complete.
        _produce(cluster.bootstrap_servers, "busy", 5)
        assert not pending.done()
        blocked_fsync.release.set()
        assert pending.result(30) is True
        assert read_offset_checkpoints(tmp_path / "broker-0" / NAME) == {("busy", 0): 3}
        assert _checkpoint(cluster)
        assert read_offset_checkpoints(tmp_path / "broker-0" / NAME) == {("busy", 0): 8}


def test_a_topic_deleted_during_a_write_is_dropped_and_stays_deleted(
        tmp_path: Path, blocked_fsync: BlockedFsync) -> None:
    from confluent_kafka.admin import AdminClient

    with Cluster(brokers=1, data_dir=tmp_path, config=LONG) as cluster:
        cluster.create_topic("gone", partitions=1)
        cluster.create_topic("kept", partitions=1)
        _produce(cluster.bootstrap_servers, "gone", 5)
        _produce(cluster.bootstrap_servers, "kept", 2)
        pending = _held_checkpoint(cluster, blocked_fsync)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.delete_topics(["gone"])["gone"].result(30)
        data_dir = tmp_path / "broker-0"
        assert not (data_dir / "gone-0").exists()
        blocked_fsync.release.set()
        assert pending.result(30) is True          # the write in flight did not fail
        # Its snapshot was taken before the deletion; the next write drops the line.
        assert read_offset_checkpoints(data_dir / NAME) == {("gone", 0): 5, ("kept", 0): 2}
        assert _checkpoint(cluster)
        assert read_offset_checkpoints(data_dir / NAME) == {("kept", 0): 2}
        # Even with the stale line back in the file, a restart does not revive it.
        cluster.faults.kill_broker(0)
        (data_dir / NAME).write_text("0\n2\ngone 0 5\nkept 0 2\n")
        cluster.faults.restart_broker(0)
        broker = cluster.broker(0)
        assert ("gone", 0) not in broker.partitions
        assert broker.partitions[("kept", 0)].checkpointed_hw == 2
        assert _checkpoint(cluster)
        assert read_offset_checkpoints(data_dir / NAME) == {("kept", 0): 2}


def test_sigkill_of_a_broker_process_leaves_a_whole_file(tmp_path: Path) -> None:
    """A broker process killed (SIGKILL) while it writes its checkpoint every 10 ms
    and takes Produce requests leaves the old file or the new one: after each kill
    the file parses, its offsets are within the log, and the broker restarts on it.
    (Whether a kill lands inside a write is chance; runs of this test have left a
    ``.tmp`` beside the file.)"""
    from confluent_kafka import Producer

    config = {"replica.high.watermark.checkpoint.interval.ms": 10,
              "broker.heartbeat.interval.ms": 250, "broker.session.timeout.ms": 3000}
    with Cluster(brokers=1, processes=True, data_dir=tmp_path, config=config) as cluster:
        cluster.create_topic("crash", partitions=2)
        path = tmp_path / "broker-0" / NAME
        in_log = 0                         # records in the log before each round
        for _ in range(3):
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                 "acks": "all", "linger.ms": 0})
            for i in range(300):
                producer.produce("crash", b"v%d" % i, partition=i % 2)
            assert producer.flush(30) == 0
            acked = in_log + 300
            wait_for(path.exists, "the first checkpoint")    # then never absent again
            for i in range(300):           # in flight when the process dies
                producer.produce("crash", b"w%d" % i, partition=i % 2)
                producer.poll(0)
            cluster.faults.kill_broker(0)
            entries = read_offset_checkpoints(path)        # ValueError if torn
            assert entries is not None and set(entries) <= {("crash", 0), ("crash", 1)}
            assert all(hw >= 0 for hw in entries.values())
            assert sum(entries.values()) <= acked + 300
            cluster.faults.restart_broker(0)
            producer.flush(30)             # the rest is written again, or fails
            in_log = sum(_high_watermarks(cluster).values())
            assert in_log >= acked


def _high_watermarks(cluster: Cluster) -> dict[str, int]:
    assert cluster.controller_server is not None
    found = cluster.call(cluster.controller_server.call_broker(0, "describe"))
    assert isinstance(found, dict)
    return {name: int(p["high_watermark"]) for name, p in found["hosted"].items()}
