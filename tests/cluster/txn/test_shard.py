"""The transaction coordinator's state machine, on a fake log and a fake marker channel."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kaflite.cluster.txn import TxnConfig, TxnShard, TxnState
from kaflite.cluster.txn._records import (
    TxnRecord,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from kaflite.protocol import errors
from kaflite.protocol.records import encode_batch, iter_batches

CONCURRENT = errors.ConcurrentTransactionsError.code
FENCED = errors.ProducerFencedError.code
MAPPING = errors.InvalidProducerIdMappingError.code
INVALID_STATE = errors.InvalidTxnStateError.code


class FakeLog:
    """Records what was written; ``fail`` makes the next writes answer an error code."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.fail = 0

    def __call__(self, records: list[tuple[bytes, bytes | None]]) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.fail:
            fut.set_result(self.fail)
        else:
            self.records += records
            fut.set_result(0)
        return fut

    def states(self, tid: str) -> list[TxnState]:
        return [decode_txn_value(v).state for k, v in self.records
                if v is not None and decode_txn_key(k) == tid]


class FakeChannel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, bool, int, frozenset[tuple[str, int]]]] = []
        self.result = True

    async def send_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                           coordinator_epoch: int, partitions: set[tuple[str, int]],
                           still_current: Callable[[], bool]) -> bool:
        self.sent.append((producer_id, producer_epoch, commit, coordinator_epoch,
                          frozenset(partitions)))
        return self.result


def make_shard(epoch: int = 7) -> tuple[TxnShard, FakeLog, FakeChannel]:
    ids = iter(range(1000, 2000))
    log, channel = FakeLog(), FakeChannel()
    shard = TxnShard(3, epoch, log, channel, lambda: next(ids), TxnConfig())  # type: ignore[arg-type]
    shard.finish_loading()
    return shard, log, channel


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def run(body: Callable[[], Any]) -> None:
    asyncio.run(body())


def test_record_round_trip() -> None:
    rec = TxnRecord(42, 3, 60000, TxnState.ONGOING, frozenset({("a", 0), ("a", 2), ("b", 1)}),
                    1700000000000, 1699999999000)
    assert decode_txn_value(encode_txn_value(rec)) == rec
    assert decode_txn_key(encode_txn_key("my-id")) == "my-id"
    # the key is Kafka's: an int16 version 0, then the id as a string
    assert encode_txn_key("ab") == b"\x00\x00\x00\x02ab"


def test_init_allocates_then_bumps_the_epoch() -> None:
    async def body() -> None:
        shard, log, _ = make_shard()
        assert await shard.init_producer_id("t", 60000) == (0, 1000, 0)
        assert await shard.init_producer_id("t", 60000) == (0, 1000, 1)
        assert log.states("t") == [TxnState.EMPTY, TxnState.EMPTY]
        # KIP-360: a producer that names its current id and epoch gets the next epoch
        assert await shard.init_producer_id("t", 60000, 1000, 1) == (0, 1000, 2)
        # a retry of that bump gets the same answer; a stale epoch is fenced
        assert await shard.init_producer_id("t", 60000, 1000, 1) == (0, 1000, 2)
        assert (await shard.init_producer_id("t", 60000, 1000, 0))[0] == FENCED
    run(body)


def test_a_full_transaction_and_its_markers() -> None:
    async def body() -> None:
        shard, log, channel = make_shard(epoch=7)
        _, pid, epoch = await shard.init_producer_id("t", 60000)
        assert await shard.add_partitions("t", pid, epoch, {("orders", 0)}) == 0
        assert await shard.add_partitions("t", pid, epoch, {("orders", 1)}) == 0
        assert shard.txns["t"].partitions == {("orders", 0), ("orders", 1)}
        writes = len(log.records)
        assert await shard.add_partitions("t", pid, epoch, {("orders", 0)}) == 0
        assert len(log.records) == writes  # nothing new: no write
        assert (await shard.end_txn("t", pid, epoch, commit=True)).code == 0
        await settle()
        assert channel.sent == [(pid, epoch, True, 7,
                                 frozenset({("orders", 0), ("orders", 1)}))]
        assert log.states("t")[-3:] == [TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                        TxnState.COMPLETE_COMMIT]
        assert shard.txns["t"].partitions == set()
        # a retried EndTxn is answered from the outcome
        assert (await shard.end_txn("t", pid, epoch, commit=True)).code == 0
        assert (await shard.end_txn("t", pid, epoch, commit=False)).code == INVALID_STATE
    run(body)


def test_checks_in_kafka_order() -> None:
    async def body() -> None:
        shard, _, channel = make_shard()
        assert await shard.add_partitions("nobody", 1, 0, {("x", 0)}) == MAPPING
        _, pid, epoch = await shard.init_producer_id("t", 60000)
        assert await shard.add_partitions("t", pid + 1, epoch, {("x", 0)}) == MAPPING
        assert await shard.add_partitions("t", pid, epoch + 1, {("x", 0)}) == FENCED
        assert (await shard.end_txn("t", pid, epoch, commit=True)).code == INVALID_STATE  # Empty
        channel.result = False  # markers cannot be written: the txn stays PrepareCommit
        await shard.add_partitions("t", pid, epoch, {("x", 0)})
        assert (await shard.end_txn("t", pid, epoch, commit=True)).code == 0
        await settle()
        assert shard.txns["t"].state is TxnState.PREPARE_COMMIT
        assert await shard.add_partitions("t", pid, epoch, {("x", 1)}) == CONCURRENT
        assert (await shard.end_txn("t", pid, epoch, commit=True)).code == CONCURRENT
        assert (await shard.end_txn("t", pid, epoch, commit=False)).code == INVALID_STATE
        assert (await shard.init_producer_id("t", 60000))[0] == CONCURRENT
    run(body)


def test_init_on_an_open_transaction_fences_and_aborts_it() -> None:
    async def body() -> None:
        shard, log, channel = make_shard()
        _, pid, epoch = await shard.init_producer_id("t", 60000)
        await shard.add_partitions("t", pid, epoch, {("x", 0)})
        assert (await shard.init_producer_id("t", 60000))[0] == CONCURRENT
        await settle()
        assert channel.sent == [(pid, epoch + 1, False, 7, frozenset({("x", 0)}))]
        assert shard.txns["t"].state is TxnState.COMPLETE_ABORT
        assert await shard.init_producer_id("t", 60000) == (0, pid, epoch + 2)
        # the old producer is fenced
        assert (await shard.end_txn("t", pid, epoch, commit=True)).code == FENCED
        assert TxnState.PREPARE_ABORT in log.states("t")
    run(body)


def test_timed_out_transactions_are_aborted() -> None:
    async def body() -> None:
        shard, _, channel = make_shard()
        _, pid, epoch = await shard.init_producer_id("t", 1000)
        await shard.add_partitions("t", pid, epoch, {("x", 0)})
        start = shard.txns["t"].start_ms
        assert await shard.abort_timed_out(start + 1000) == 0  # not yet past the timeout
        assert await shard.abort_timed_out(start + 1001) == 1
        await settle()
        assert shard.txns["t"].state is TxnState.COMPLETE_ABORT
        assert channel.sent[-1][:3] == (pid, epoch + 1, False)
    run(body)


def test_a_failed_write_changes_nothing() -> None:
    async def body() -> None:
        shard, log, _ = make_shard()
        _, pid, epoch = await shard.init_producer_id("t", 60000)
        log.fail = errors.NotEnoughReplicasError.code
        assert await shard.add_partitions("t", pid, epoch, {("x", 0)}) == log.fail
        meta = shard.txns["t"]
        assert meta.state is TxnState.EMPTY and not meta.partitions and not meta.busy
    run(body)


def test_replay_rebuilds_state_and_finishes_prepared_transactions() -> None:
    async def body() -> None:
        shard, log, _ = make_shard()
        _, pid, epoch = await shard.init_producer_id("done", 60000)
        await shard.add_partitions("done", pid, epoch, {("x", 0)})
        _, pid2, epoch2 = await shard.init_producer_id("prepared", 60000)
        await shard.add_partitions("prepared", pid2, epoch2, {("y", 1)})
        shard._channel.result = False  # type: ignore[attr-defined]
        await shard.end_txn("prepared", pid2, epoch2, commit=True)
        await settle()
        batch = encode_batch([v for _, v in log.records], keys=[k for k, _ in log.records])
        ids = iter(range(5000, 6000))
        channel = FakeChannel()
        fresh = TxnShard(3, 8, FakeLog(), channel, lambda: next(ids), TxnConfig())  # type: ignore[arg-type]
        for b in iter_batches(batch):
            fresh.replay_batch(b)
        assert fresh.txns["done"].state is TxnState.ONGOING
        assert fresh.txns["done"].partitions == {("x", 0)}
        assert fresh.txns["prepared"].state is TxnState.PREPARE_COMMIT
        fresh.finish_loading()
        await settle()
        assert channel.sent == [(pid2, epoch2, True, 8, frozenset({("y", 1)}))]
        assert fresh.txns["prepared"].state is TxnState.COMPLETE_COMMIT
    run(body)


def test_idle_transactional_ids_expire() -> None:
    async def body() -> None:
        shard, log, _ = make_shard()
        await shard.init_producer_id("idle", 60000)
        _, pid, epoch = await shard.init_producer_id("busy", 60000)
        await shard.add_partitions("busy", pid, epoch, {("x", 0)})  # Ongoing: never expires
        later = shard.txns["idle"].last_update_ms + TxnConfig().id_expiration_ms
        assert await shard.expire_ids(later - 1) == 0
        assert await shard.expire_ids(later + 10**9) == 1
        assert set(shard.txns) == {"busy"}
        assert log.records[-1] == (encode_txn_key("idle"), None)  # a tombstone
        # a new coordinator replaying the log forgets the id too
        batch = encode_batch([v for _, v in log.records], keys=[k for k, _ in log.records])
        fresh = TxnShard(3, 8, FakeLog(), FakeChannel(), lambda: 1, TxnConfig())  # type: ignore[arg-type]
        for b in iter_batches(batch):
            fresh.replay_batch(b)
        assert set(fresh.txns) == {"busy"}
    run(body)


def test_a_bump_request_during_its_fencing_abort_waits_then_gets_the_new_epoch() -> None:
    """KIP-360 InitProducerId naming the producer's epoch while its transaction is open:
    the coordinator aborts under epoch+1 (CONCURRENT_TRANSACTIONS meanwhile), and the
    retry then gets epoch+1 itself instead of being fenced or bumped again."""
    async def body() -> None:
        shard, _, channel = make_shard()
        _, pid, epoch = await shard.init_producer_id("t", 60000)
        await shard.add_partitions("t", pid, epoch, {("x", 0)})
        channel.result = False  # the markers cannot be written yet
        assert (await shard.init_producer_id("t", 60000, pid, epoch))[0] == CONCURRENT
        await settle()
        assert shard.txns["t"].state is TxnState.PREPARE_ABORT
        assert (await shard.init_producer_id("t", 60000, pid, epoch))[0] == CONCURRENT
        channel.result = True
        shard.finish_loading()  # (re)starts completing Prepare* transactions
        await settle()
        assert shard.txns["t"].state is TxnState.COMPLETE_ABORT
        assert await shard.init_producer_id("t", 60000, pid, epoch) == (0, pid, epoch + 1)
        assert (await shard.init_producer_id("t", 60000, pid, epoch - 1))[0] == FENCED
    run(body)


# -- transactions v2 (KIP-890 part 2) ----------------------------------------------------


def test_v2_ends_bump_the_epoch_and_the_next_end_waits_for_the_markers() -> None:
    async def body() -> None:
        shard, log, channel = make_shard()
        channel.result = False           # markers not written yet: stays PrepareCommit
        _, pid, epoch = await shard.init_producer_id("t", 60000)
        assert await shard.add_partitions("t", pid, epoch, {("a", 0)}, client_tv=2) == 0
        assert await shard.end_txn("t", pid, epoch, True, client_tv=2) == (0, pid, epoch + 1)
        await settle()
        assert channel.sent[-1][:3] == (pid, epoch + 1, True)    # markers at the new epoch
        assert shard.txns["t"].state is TxnState.PREPARE_COMMIT
        # the producer's next transaction ends (with the new epoch) before those markers
        # are written: retriable, not a contradiction of the commit
        assert (await shard.end_txn("t", pid, epoch + 1, False, client_tv=2)).code == CONCURRENT
        # a retry of the commit itself, with the old epoch: also wait
        assert (await shard.end_txn("t", pid, epoch, True, client_tv=2)).code == CONCURRENT
        channel.result = True
        shard._spawn(shard._complete(shard.txns["t"]))
        await settle()
        assert shard.txns["t"].state is TxnState.COMPLETE_COMMIT
        assert await shard.end_txn("t", pid, epoch, True, client_tv=2) == (0, pid, epoch + 1)
        # v2: an abort with nothing added still ends the transaction, with a bump
        assert await shard.end_txn("t", pid, epoch + 1, False, client_tv=2) == \
            (0, pid, epoch + 2)
        await settle()
        assert channel.sent[-1][4] == frozenset()
        # the log says v2 (value version 1), so a new coordinator knows it
        reloaded = decode_txn_value(log.records[-1][1] or b"")
        assert reloaded.client_tv == 2 and reloaded.producer_epoch == epoch + 2
    run(body)


def test_v2_epoch_overflow_moves_to_a_new_producer_id() -> None:
    async def body() -> None:
        shard, _, channel = make_shard()
        _, pid, _ = await shard.init_producer_id("t", 60000)
        meta = shard.txns["t"]
        meta.producer_epoch = 32766     # exhausted: only the coordinator may use 32767
        assert await shard.add_partitions("t", pid, 32766, {("a", 0)}, client_tv=2) == 0
        code, new_pid, new_epoch = await shard.end_txn("t", pid, 32766, True, client_tv=2)
        assert (code, new_epoch) == (0, 0) and new_pid != pid
        await settle()
        assert channel.sent[-1][:2] == (pid, 32767)    # markers: the old id, last epoch
        assert (meta.producer_id, meta.producer_epoch, meta.state) == \
            (new_pid, 0, TxnState.COMPLETE_COMMIT)
        # the lost answer's retry finds the new id
        assert await shard.end_txn("t", pid, 32766, True, client_tv=2) == (0, new_pid, 0)
    run(body)


class SlowLog(FakeLog):
    """A log whose writes take 10 ms, so that requests overlap them."""

    def __call__(self, records: list[tuple[bytes, bytes | None]]) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def done() -> None:
            self.records += records
            fut.set_result(0)
        asyncio.get_running_loop().call_later(0.01, done)
        return fut


def test_adds_during_a_write_wait_for_it_and_go_in_one_write() -> None:
    """Three leaders add a v2 transaction's partitions at once: no CONCURRENT_TRANSACTIONS
    (each would be retried after a backoff), and the two that waited share a write."""
    async def body() -> None:
        ids = iter(range(1000, 2000))
        log, channel = SlowLog(), FakeChannel()
        shard = TxnShard(3, 7, log, channel, lambda: next(ids), TxnConfig())  # type: ignore[arg-type]
        shard.finish_loading()
        _, pid, epoch = await shard.init_producer_id("t", 60000)
        before = len(log.records)
        codes = await asyncio.gather(*(shard.add_partitions("t", pid, epoch, {("a", p)}, 2)
                                       for p in range(3)))
        assert codes == [0, 0, 0]
        assert shard.txns["t"].partitions == {("a", 0), ("a", 1), ("a", 2)}
        assert len(log.records) - before == 2
        # the next transaction's add, while the last one's end is still being written
        channel.result = True
        assert (await shard.end_txn("t", pid, epoch, True, client_tv=2)).code == 0
        assert shard.txns["t"].state is TxnState.PREPARE_COMMIT
        assert await shard.add_partitions("t", pid, epoch + 1, {("a", 0)}, 2) == 0
        assert shard.txns["t"].state is TxnState.ONGOING
    run(body)
