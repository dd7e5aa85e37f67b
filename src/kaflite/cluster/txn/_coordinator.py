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
from kaflite.cluster.txn._verify import TxnVerifier
from kaflite.protocol import errors

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.partition import Partition
    from kaflite.cluster.txn._metadata import TxnMetadata

__all__ = ["TransactionCoordinator"]

log = logging.getLogger("kaflite.cluster.txn")

TP = tuple[str, int]


class TransactionCoordinator(ShardedCoordinator[TxnShard]):
    TOPIC = TXN_TOPIC

    def __init__(self, broker: Broker) -> None:
        self.config = TxnConfig.from_props(broker.config.props)
        super().__init__(broker, self.config.partitions, self.config.load_buffer_size, log)
        self.channel = MarkerChannel(broker)
        self.verifier = TxnVerifier(broker)     # this broker's partitions asking coordinators
        self._every(self.config.abort_interval_ms, lambda shard, now: shard.abort_timed_out(now),
                    "started aborting %s timed-out transactions")
        self._every(self.config.expiry_interval_ms, lambda shard, now: shard.expire_ids(now),
                    "expired %s transactional ids")

    def close(self) -> None:
        super().close()
        self.channel.close()
        self.verifier.close()

    def _new_shard(self, p: Partition) -> TxnShard:
        writer = PartitionWriter(self.broker, TXN_TOPIC, p.index, p.leader_epoch,
                                 self.config.write_timeout_ms)
        return TxnShard(p.index, p.leader_epoch, writer, self.channel,
                        self.broker.controller.allocate_producer_id, self.config)

    async def add_or_verify(self, tid: str, producer_id: int, producer_epoch: int,
                            wanted: list[TP], verify_only: bool,
                            client_tv: int) -> dict[TP, int]:
        """Each partition's error code: added to (or, ``verify_only``, found in) the
        producer's transaction (AddPartitionsToTxn, from producers and from leaders)."""
        controller = self.broker.controller
        unknown = {tp for tp in wanted if controller.partition(*tp) is None}
        if unknown:
            return {tp: errors.UnknownTopicOrPartitionError.code if tp in unknown
                    else errors.OperationNotAttemptedError.code for tp in wanted}
        if not tid:
            return dict.fromkeys(wanted, errors.InvalidRequestError.code)
        try:
            shard = self.shard_for(tid)
        except errors.KafkaError as exc:
            return dict.fromkeys(wanted, exc.code)
        if verify_only:
            return shard.verify_partitions(tid, producer_id, producer_epoch, set(wanted))
        code = await shard.add_partitions(tid, producer_id, producer_epoch, set(wanted),
                                          client_tv)
        return dict.fromkeys(wanted, code)

    def all_transactions(self) -> list[TxnMetadata]:
        """Every transactional id this broker coordinates (for ListTransactions)."""
        if self.loading:
            raise errors.CoordinatorLoadInProgressError("transaction state is loading")
        return [m for s in self.active_shards() for m in s.txns.values()]
