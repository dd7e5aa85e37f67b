"""Kafka 4.4's InitProducerId v6 and ListTransactions v2, in raw requests (issue 38).

InitProducerId v6 (KIP-939, unstable in Kafka 4.4, so served with
``unstable.api.versions.enable``) asks for two-phase commit, which kaflite does not
have: Enable2Pc gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED and KeepPreparedTxn
UNSUPPORTED_VERSION, as from Kafka 4.4 with ``transaction.two.phase.commit.enable``
off. ListTransactions v2 (KIP-1152) filters by a regular expression over the whole
transactional id.
"""

from __future__ import annotations

import asyncio

import pytest

from kaflite.cluster import Cluster
from kaflite.cluster.configs import BrokerConfig
from kaflite.config import ConfigError
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
)

UNSTABLE = {"unstable.api.versions.enable": "true"}
RETRIABLE = {errors.CoordinatorNotAvailableError.code, errors.NotCoordinatorError.code,
             errors.CoordinatorLoadInProgressError.code, errors.ConcurrentTransactionsError.code}


async def _init(conn: BrokerConnection, tid: str | None, version: int, *,
                enable2_pc: bool = False, keep_prepared_txn: bool = False
                ) -> tuple[int, int, int, int]:
    """(error, producer id, ongoing producer id, ongoing epoch), once the coordinator is up."""
    for _ in range(200):
        if tid is not None:     # (the first FindCoordinator makes __transaction_state)
            await conn.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]))
        resp = await conn.request(InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=30_000, enable2_pc=enable2_pc,
            keep_prepared_txn=keep_prepared_txn), version=version)
        if resp.error_code not in RETRIABLE:
            return (resp.error_code, resp.producer_id, resp.ongoing_txn_producer_id,
                    resp.ongoing_txn_producer_epoch)
        await asyncio.sleep(0.05)
    raise AssertionError("the transaction coordinator never came up")


def test_init_producer_id_v6_refuses_two_phase_commit_as_kafka_does_with_it_off() -> None:
    async def main() -> None:
        async with Cluster(brokers=1, config=UNSTABLE) as cluster:
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                code, pid, ongoing, ongoing_epoch = await _init(conn, "plain", 6)
                assert code == 0 and pid >= 0 and (ongoing, ongoing_epoch) == (-1, -1)
                assert (await _init(conn, "two-phase", 6, enable2_pc=True))[:2] == \
                    (errors.TransactionalIdAuthorizationFailedError.code, -1)
                assert (await _init(conn, "keep", 6, keep_prepared_txn=True))[:2] == \
                    (errors.UnsupportedVersionError.code, -1)
                # the refused ids were never made: only "plain" is listed
                listed = await conn.request(ListTransactionsRequest(), version=1)
                assert [t.transactional_id for t in listed.transaction_states] == ["plain"]
                # an idempotent producer's flags mean nothing
                code, pid, _, _ = await _init(conn, None, 6, enable2_pc=True)
                assert code == 0 and pid >= 0
            finally:
                conn.close()

    asyncio.run(main())


def test_two_phase_commit_cannot_be_turned_on() -> None:
    async def main() -> None:
        async with Cluster(brokers=1, config={"transaction.two.phase.commit.enable": "true"}):
            pass

    with pytest.raises(ConfigError, match="two-phase"):
        asyncio.run(main())


def test_the_transaction_settings_are_known_broker_configs() -> None:
    """(They were reported as unused at ``kaflite up``, though the coordinator reads them.)"""
    props = {"transaction.two.phase.commit.enable": "false", "transaction.max.timeout.ms": "1",
             "unstable.api.versions.enable": "true", "no.such.setting": "1"}
    assert BrokerConfig.from_props(props).unused() == ["no.such.setting"]


def test_list_transactions_v2_filters_by_a_transactional_id_pattern() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            conn = await BrokerConnection("127.0.0.1", cluster.broker(0).port).open()
            try:
                for tid in ("orders-1", "orders-2", "payments-1", "xorders-3"):
                    assert (await _init(conn, tid, 5))[0] == 0

                async def listed(pattern: str | None) -> tuple[int, list[str]]:
                    resp = await conn.request(ListTransactionsRequest(
                        transactional_id_pattern=pattern), version=2)
                    return resp.error_code, sorted(t.transactional_id
                                                   for t in resp.transaction_states)

                every = ["orders-1", "orders-2", "payments-1", "xorders-3"]
                assert await listed(None) == (0, every)
                assert await listed("") == (0, every)
                # the whole id must match: "xorders-3" does not, though it contains it
                assert await listed("orders-.*") == (0, ["orders-1", "orders-2"])
                assert await listed(".*-1") == (0, ["orders-1", "payments-1"])
                assert await listed("orders") == (0, [])
                assert await listed("orders-(") == (
                    errors.InvalidRegularExpressionError.code, [])
                # the pattern combines with the other filters
                resp = await conn.request(ListTransactionsRequest(
                    state_filters=["Ongoing"], transactional_id_pattern="orders-.*"), version=2)
                assert resp.error_code == 0 and resp.transaction_states == []
            finally:
                conn.close()

    asyncio.run(main())
