"""DescribeLogDirs (key 35): the partitions of a broker's data directory, with their sizes;
and AlterReplicaLogDirs (key 34), which would move replicas between a broker's directories.

What ``kafka-log-dirs --describe`` and ``Admin.describeLogDirs`` show. A kaflite
broker has one data directory (Kafka's ``log.dirs`` with one entry), reported by
its absolute path. For each partition replica hosted there, as Kafka's
``ReplicaManager.describeLogDirs``: the bytes of its segments, and its offset lag,
how far its log end is behind the partition's high watermark (0 for a leader and
for a follower that has caught up); no replica is ever "future" (kaflite does not
move replicas between directories). A request naming topics gets those of their
partitions that this broker hosts; a null list asks for all of them. From v4 the
directory's total and usable bytes, from the file system. From v5, whether the
directory is cordoned (KIP-1066's ``cordoned.log.dirs``): kaflite has no cordoning,
so its one directory never is.

AlterReplicaLogDirs answers each partition as Kafka's ``ReplicaManager.alterReplicaLogDirs``
does: a directory that is not one of the broker's is LOG_DIR_NOT_FOUND; a partition
the broker holds no replica of is REPLICA_NOT_AVAILABLE; a replica already in the
directory asked for (the one directory there is) has nothing to move, and succeeds.
Authorization (DESCRIBE on the cluster to describe, ALTER to alter) is in
``kaflite.cluster.acl``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from kaflite.cluster.handlers._base import Handler
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kaflite.protocol.messages import alter_replica_log_dirs_response as arl
from kaflite.protocol.messages import describe_log_dirs_response as dld

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]


async def handle_describe_log_dirs(broker: Broker, conn: ServerConnection,
                                   header: RequestHeader,
                                   req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    wanted = None if req.topics is None else {t.topic: set(t.partitions) for t in req.topics}
    topics: dict[str, list[dld.DescribeLogDirsPartition]] = {}
    for (topic, index), p in sorted(broker.partitions.items()):
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        topics.setdefault(topic, []).append(dld.DescribeLogDirsPartition(
            partition_index=index, partition_size=p.log.size_bytes,
            offset_lag=max(p.high_watermark - p.log_end_offset, 0), is_future_key=False))
    directory = broker.data_dir.resolve()
    usage = shutil.disk_usage(directory)
    result = dld.DescribeLogDirsResult(
        error_code=0, log_dir=str(directory),
        topics=[dld.DescribeLogDirsTopic(name, parts) for name, parts in topics.items()],
        total_bytes=usage.total, usable_bytes=usage.free, is_cordoned=False)
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])


def _same_dir(path: str, directory: Path) -> bool:
    try:
        return Path(path).resolve() == directory
    except (OSError, RuntimeError, ValueError):
        return False


async def handle_alter_replica_log_dirs(broker: Broker, conn: ServerConnection,
                                        header: RequestHeader, req: AlterReplicaLogDirsRequest
                                        ) -> AlterReplicaLogDirsResponse:
    directory = broker.data_dir.resolve()
    results: dict[str, list[arl.AlterReplicaLogDirPartitionResult]] = {}
    for target in req.dirs:
        known = _same_dir(target.path, directory)
        for topic in target.topics:
            for index in topic.partitions:
                if not known:
                    code = errors.LogDirNotFoundError.code
                elif (topic.name, index) not in broker.partitions:
                    code = errors.ReplicaNotAvailableError.code
                else:
                    code = 0
                results.setdefault(topic.name, []).append(
                    arl.AlterReplicaLogDirPartitionResult(index, code))
    return AlterReplicaLogDirsResponse(throttle_time_ms=0, results=[
        arl.AlterReplicaLogDirTopicResult(name, parts) for name, parts in results.items()])


HANDLERS = [Handler(DescribeLogDirsRequest, 1, 5, handle_describe_log_dirs),
            Handler(AlterReplicaLogDirsRequest, 1, 2, handle_alter_replica_log_dirs)]
