"""``LogManager``: every partition log in one broker's data directory (Kafka's ``LogManager``).

The data directory holds ``meta.properties`` (``node.id``, ``cluster.id``,
``directory.id``, ``version=1``, as a KRaft broker writes it) and one
``<topic>-<partition>`` directory per replica. At startup ``load_all`` recovers
each of them. Deleting a partition first renames its directory to
``<topic>-<partition>.<uuid>-delete`` (atomic, so a crash mid-delete cannot
leave a half-deleted log that looks alive), then removes it; leftovers of that
kind are removed at the next start, as Kafka does.

Creating a topic of thousands of partitions opens thousands of new logs. A
CreateTopics handler has them opened first on a worker thread (``prepare``, which
touches only the file system and new objects) and the controller's callback then
takes each prepared log (``get_or_create``) instead of opening it on the event
loop; what a failed creation left prepared is removed (``drop_prepared``).

A directory whose ``partition.metadata`` names another topic id is a stray:
the remains of a deleted topic that had the same name. Asked for the new topic,
the manager moves the stray aside for deletion and starts a fresh log, which
is what Kafka's stray-log handling amounts to.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from kaflite.cluster.log._config import LogConfig
from kaflite.cluster.log._deferred_sync import cancel_under
from kaflite.cluster.log._files import (
    parse_partition_dir,
    parse_topic_id,
    read_meta_properties,
    read_partition_metadata,
    write_meta_properties,
    write_partition_metadata,
)
from kaflite.cluster.log._partition import PartitionLog
from kaflite.protocol import errors

__all__ = ["LogManager"]

log = logging.getLogger("kaflite.cluster.log")

_DELETE_SUFFIX = "-delete"

ConfigSource = Mapping[str, LogConfig] | Callable[[str], LogConfig] | None


class LogManager:
    """The partition logs of one broker."""

    def __init__(
        self,
        data_dir: str | Path,
        *,
        node_id: int | None = None,
        cluster_id: str | None = None,
        default_config: LogConfig | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.default_config = default_config or LogConfig()
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._prepared: dict[tuple[str, int], PartitionLog] = {}   # opened by ``prepare``
        self._prepared_lock = threading.Lock()
        self.meta = self._check_meta(node_id, cluster_id)

    def _check_meta(self, node_id: int | None, cluster_id: str | None) -> dict[str, str]:
        meta = read_meta_properties(self.data_dir)
        if meta is None:
            meta = {"version": "1"}
            if node_id is not None:
                meta["node.id"] = str(node_id)
            if cluster_id is not None:
                meta["cluster.id"] = cluster_id
            # directory.id (KIP-858) is a random Kafka Uuid in its base64 form.
            raw = uuid.uuid4().bytes
            meta["directory.id"] = base64.urlsafe_b64encode(raw).decode().rstrip("=")
            write_meta_properties(self.data_dir, meta)
            return meta
        # Kafka refuses to start on another node's or another cluster's data.
        if node_id is not None and meta.get("node.id", str(node_id)) != str(node_id):
            raise ValueError(
                f"{self.data_dir}: meta.properties has node.id={meta['node.id']}, not {node_id}"
            )
        if cluster_id is not None and meta.get("cluster.id", cluster_id) != cluster_id:
            raise ValueError(
                f"{self.data_dir}: meta.properties has cluster.id={meta['cluster.id']}, "
                f"not {cluster_id}"
            )
        return meta

    # -- lookup -----------------------------------------------------------------------
    def _dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partitions(self) -> list[tuple[str, int]]:
        return sorted(self._logs)

    def logs(self) -> dict[tuple[str, int], PartitionLog]:
        return dict(self._logs)

    def _config_for(self, topic: str, source: ConfigSource) -> LogConfig:
        if source is None:
            return self.default_config
        if callable(source):
            return source(topic)
        return source.get(topic, self.default_config)

    # -- lifecycle ----------------------------------------------------------------------
    def load_all(self, configs: ConfigSource = None) -> list[PartitionLog]:
        """Recover every partition directory (startup); returns the logs loaded now."""
        loaded = []
        for name in sorted(os.listdir(self.data_dir)):
            path = self.data_dir / name
            if not path.is_dir():
                continue
            if name.endswith(_DELETE_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            tp = parse_partition_dir(name)
            if tp is None or tp in self._logs:
                continue
            try:
                plog = PartitionLog.open(path, self._config_for(tp[0], configs))
                plog.release_fds()
            except (OSError, ValueError, errors.KafkaError):
                # Kafka takes a log directory offline on such errors; kaflite keeps
                # the broker up and leaves this one partition unloaded.
                log.exception("cannot load %s; leaving it offline", path)
                continue
            self._logs[tp] = plog
            loaded.append(plog)
        return loaded

    def prepare(self, topic: str, partitions: list[int], topic_id: uuid.UUID,
                config: LogConfig) -> int:
        """Create the logs of a new topic's partitions here, for ``get_or_create`` to take.

        Safe on a worker thread: it touches only new directories and new objects. A
        partition whose directory exists already is left to ``get_or_create``.
        Returns how many were prepared."""
        made = 0
        for index in partitions:
            directory = self._dir(topic, index)
            if directory.exists():
                continue
            plog = PartitionLog.open(directory, config, topic_id)
            plog.release_fds()
            with self._prepared_lock:
                old = self._prepared.pop((topic, index), None)
                self._prepared[(topic, index)] = plog
            if old is not None:
                old.close(flush=False)
            made += 1
        return made

    def drop_prepared(self, topic: str, topic_id: uuid.UUID) -> None:
        """Remove the logs ``prepare`` made for a topic that was not created after all."""
        with self._prepared_lock:
            doomed = [(k, p) for k, p in self._prepared.items()
                      if k[0] == topic and p.topic_id == topic_id]
            for key, _ in doomed:
                del self._prepared[key]
        for key, plog in doomed:
            plog.close(flush=False)
            if key not in self._logs:
                self._remove_dir(plog.directory)

    def _take_prepared(self, key: tuple[str, int], wanted: uuid.UUID | None
                       ) -> PartitionLog | None:
        if not self._prepared:
            return None
        with self._prepared_lock:
            plog = self._prepared.get(key)
            if plog is None or plog.topic_id != wanted:
                return None
            del self._prepared[key]
        return plog

    def get_or_create(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | str | None = None,
        config: LogConfig | None = None,
    ) -> PartitionLog:
        """The log of a partition, opened (or created) on first use."""
        wanted = None if topic_id is None else parse_topic_id(topic_id)
        plog = self._logs.get((topic, partition))
        if plog is None:
            plog = self._take_prepared((topic, partition), wanted)
            if plog is not None:
                if config is not None:
                    plog.config = config
                self._logs[(topic, partition)] = plog
                return plog
        if plog is not None and wanted is not None and plog.topic_id not in (None, wanted):
            self.delete_partition(topic, partition)
            plog = None
        if plog is not None:
            if config is not None:
                plog.config = config
            if wanted is not None and plog.topic_id is None:
                write_partition_metadata(plog.directory, wanted)
                plog.topic_id = wanted
            return plog
        directory = self._dir(topic, partition)
        if wanted is not None and directory.is_dir():
            try:
                known = read_partition_metadata(directory)
            except ValueError:
                known = None
            if known is not None and known != wanted:
                log.warning("%s holds topic id %s, not %s: deleting it as a stray",
                            directory, known, wanted)
                self._remove_dir(directory)
        plog = PartitionLog.open(directory, config or self.default_config, wanted)
        self._logs[(topic, partition)] = plog
        return plog

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close and delete a partition's log; True if there was one."""
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.close(flush=False)
        directory = self._dir(topic, partition)
        if not directory.exists():
            return plog is not None
        self._remove_dir(directory)
        return True

    def _remove_dir(self, directory: Path) -> None:
        cancel_under(directory)     # no queued checkpoint may land in a new log there
        doomed = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{_DELETE_SUFFIX}")
        os.replace(directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)

    def update_config(self, topic: str, config: LogConfig) -> None:
        """Apply a topic's new config to all of its partitions here (AlterConfigs)."""
        for (name, _), plog in self._logs.items():
            if name == topic:
                plog.config = config

    # -- periodic work --------------------------------------------------------------------
    def housekeeping(self, now_ms: int | None = None) -> int:
        """Retention, compaction and producer expiry for every log; returns segments deleted."""
        deleted = 0
        for plog in list(self._logs.values()):
            try:
                deleted += plog.housekeeping(now_ms)
            except OSError:
                log.exception("housekeeping failed for %s", plog.directory)
        return deleted

    def flush_all(self) -> None:
        for plog in self._logs.values():
            plog.flush()

    def close(self, *, flush: bool = True) -> None:
        """Close every log; ``flush=False`` models a crash (nothing more reaches disk)."""
        for plog in self._logs.values():
            plog.close(flush=flush)
        self._logs.clear()
        with self._prepared_lock:
            prepared, self._prepared = self._prepared, {}
        for plog in prepared.values():
            plog.close(flush=False)
