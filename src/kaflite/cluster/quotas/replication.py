"""Replication throttling (KIP-73), as Kafka 4.4's ``ReplicationQuotaManager`` has it.

Two quotas per broker, each a rate in bytes per second, set as dynamic broker configs
for one broker or for all (``<default>``), unlimited (Long.MAX_VALUE) unless set:

* ``leader.replication.throttled.rate``: what this broker, as a leader, sends to
  followers of its throttled partitions;
* ``follower.replication.throttled.rate``: what this broker's replica fetchers fetch
  for its throttled partitions.

Which partitions are throttled is a topic config, one per side: a list of
``partition:brokerId`` or ``*`` (every replica). ``leader.replication.throttled.replicas``
names the leaders (the replicas data is copied from), ``follower.replication.throttled.
replicas`` the followers (the replicas it is copied to); a broker throttles, on each side,
the partitions the list names it for (Kafka's ``TopicConfigHandler.parseThrottledPartitions``).
``kafka-reassign-partitions --throttle`` sets the leader list to a moving partition's
current replicas and the follower list to its new ones.

What each side does, read from Kafka 4.4's bytecode:

* Leader (``ReplicaManager.shouldLeaderThrottle``): a follower's Fetch of a throttled
  partition gets no records when the follower is *not in the ISR* and the quota is
  exceeded. After each replica Fetch the leader records the bytes it returned of every
  throttled partition, in the ISR or not (``KafkaApis.sizeOfThrottledPartitions``);
  kaflite records their record bytes.
* Follower (``RemoteLeaderEndPoint.shouldFollowerThrottle``): a throttled partition that
  is not in sync is left out of the next Fetch while the quota is exceeded. In sync means
  the follower's position reached the high watermark the leader last reported (the
  fetcher's lag is 0, ``PartitionFetchState.isReplicaInSync``); a partition just added to
  a fetcher has no lag yet and is not in sync. The follower records the bytes it appended
  of every throttled partition (``ReplicaFetcherThread.processPartitionData``).

The rate is Kafka's ``SimpleRate`` over ``replication.quota.window.num`` windows of
``replication.quota.window.size.seconds`` (``kaflite.cluster.quotas.rate``); the quota is
exceeded when that rate is above the bound. A changed rate or list applies at the next
check: both are read from the metadata each time.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Final

from kaflite.cluster.quotas.rate import QuotaWindows, SimpleRate

__all__ = ["ALTER_LOG_DIRS_RATE", "FOLLOWER_RATE", "FOLLOWER_REPLICAS", "LEADER_RATE",
           "LEADER_REPLICAS", "UNLIMITED", "ReplicationQuota", "ReplicationQuotas",
           "throttled_partitions", "valid_throttled_replicas"]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
UNLIMITED: Final = (1 << 63) - 1          # QuotaConfig.QUOTA_BYTES_PER_SECOND_DEFAULT
ALL: Final = "*"

_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def valid_throttled_replicas(value: str) -> bool:
    """Kafka's ``ThrottledReplicaListValidator``: ``*``, or ``partition:brokerId`` items."""
    items = [item.strip() for item in value.split(",")]
    return all(_REPLICA.fullmatch(item) for item in items) or "".join(items) == ALL


def throttled_partitions(value: str, node_id: int) -> frozenset[int] | None:
    """The partitions list ``value`` throttles on broker ``node_id`` (None: all of them)."""
    value = value.strip()
    if value == ALL:
        return None
    out = set()
    for item in value.split(","):
        partition, _, broker = item.strip().partition(":")
        if broker and int(broker) == node_id:
            out.add(int(partition))
    return frozenset(out)


class ReplicationQuota:
    """One side's quota on one broker (Kafka's ``ReplicationQuotaManager``)."""

    def __init__(self, rate_config: str, replicas_config: str, node_id: int,
                 dynamic: Callable[[str], tuple[str, str] | None],
                 topic_configs: Callable[[str], Mapping[str, str] | None],
                 windows: QuotaWindows, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate_config, self.replicas_config = rate_config, replicas_config
        self.node_id = node_id
        self.dynamic = dynamic                 # the broker's dynamic config lookup
        self.topic_configs = topic_configs     # a topic's configs (None: no such topic)
        self.rate = SimpleRate(windows)
        self.clock = clock
        self._parsed: dict[str, frozenset[int] | None] = {}
        self.throttled = 0        # partitions held back, for GET /metrics

    def now_ms(self) -> float:
        return self.clock() * 1000

    def bound(self) -> float:
        """The rate set for this broker (its own, else the cluster-wide default)."""
        found = self.dynamic(self.rate_config)
        if found is None:
            return UNLIMITED
        try:
            return float(found[0])
        except ValueError:
            return UNLIMITED

    def is_throttled(self, topic: str, partition: int) -> bool:
        configs = self.topic_configs(topic)
        value = configs.get(self.replicas_config) if configs is not None else None
        if not value:
            return False
        if value not in self._parsed:
            if len(self._parsed) > 1024:
                self._parsed.clear()
            self._parsed[value] = throttled_partitions(value, self.node_id)
        partitions = self._parsed[value]
        return partitions is None or partition in partitions

    def exceeded(self) -> bool:
        """Is the measured rate above the bound (``isQuotaExceeded``)? Never unset."""
        bound = self.bound()
        if bound >= UNLIMITED:
            return False
        return self.rate.measure(self.now_ms()) > bound

    def holds(self, topic: str, partition: int) -> bool:
        """Hold back this out-of-sync replica's partition now? (counted)"""
        if self.is_throttled(topic, partition) and self.exceeded():
            self.throttled += 1
            return True
        return False

    def record(self, size: int) -> None:
        if size > 0:
            self.rate.record(size, self.now_ms())

    def measure(self) -> float:
        """Bytes per second, as the quota measures them now."""
        return self.rate.measure(self.now_ms())


class ReplicationQuotas:
    """A broker's leader and follower replication quotas."""

    def __init__(self, node_id: int, dynamic: Callable[[str], tuple[str, str] | None],
                 topic_configs: Callable[[str], Mapping[str, str] | None],
                 windows: QuotaWindows, clock: Callable[[], float] = time.monotonic) -> None:
        self.leader = ReplicationQuota(LEADER_RATE, LEADER_REPLICAS, node_id, dynamic,
                                       topic_configs, windows, clock)
        self.follower = ReplicationQuota(FOLLOWER_RATE, FOLLOWER_REPLICAS, node_id, dynamic,
                                         topic_configs, windows, clock)
