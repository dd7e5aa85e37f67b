"""The broker's transaction coordinator: one shard per ``__transaction_state`` partition it leads.

The coordinator of a transactional id is the leader of its partition of
``__transaction_state`` (``ShardedCoordinator`` does the leadership part, as
for groups); FindCoordinator, in the group coordinator, which creates both
internal topics, answers with that leader.

Two timers: one aborts transactions open longer than their timeout, every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``; the other
forgets transactional ids idle for ``transactional.id.expiration.ms``, every
``transaction.remove.expired.transaction.cleanup.interval.ms``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kaflite.cluster._internal_log import PartitionWriter
from kaflite.cluster._sharded import ShardedCoordinator
from kaflite.cluster.internal_topics import TXN_TOPIC
from kaflite.cluster.txn._config import TxnConfig
from kaflite.cluster.txn._markers import MarkerChannel
from kaflite.cluster.txn._shard import TxnShard
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition
    from kaflite.cluster.txn._metadata import TxnMetadata

__all__ = ["TransactionCoordinator"]

log = logging.getLogger("kaflite.cluster.txn")


class TransactionCoordinator(ShardedCoordinator[TxnShard]):
    TOPIC = TXN_TOPIC

    def __init__(self, broker: Broker) -> None:
        self.config = TxnConfig.from_props(broker.config.props)
        super().__init__(broker, self.config.partitions, self.config.load_buffer_size, log)
        self.channel = MarkerChannel(broker)
        self._every(self.config.abort_interval_ms, lambda shard, now: shard.abort_timed_out(now),
                    "started aborting %s timed-out transactions")
        self._every(self.config.expiry_interval_ms, lambda shard, now: shard.expire_ids(now),
                    "expired %s transactional ids")

    def close(self) -> None:
        super().close()
        self.channel.close()

    def _new_shard(self, p: Partition) -> TxnShard:
        writer = PartitionWriter(self.broker, TXN_TOPIC, p.index, p.leader_epoch,
                                 self.config.write_timeout_ms)
        return TxnShard(p.index, p.leader_epoch, writer, self.channel,
                        self.broker.controller.allocate_producer_id, self.config)

    def all_transactions(self) -> list[TxnMetadata]:
        """Every transactional id this broker coordinates (for ListTransactions)."""
        if self.loading:
            raise errors.CoordinatorLoadInProgressError("transaction state is loading")
        return [m for s in self.active_shards() for m in s.txns.values()]
