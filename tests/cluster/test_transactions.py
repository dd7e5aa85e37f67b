"""Transactions end to end with librdkafka (confluent-kafka): the coordinator, the markers,
read_committed consumers, fencing, timeouts, offsets in a transaction and a coordinator move."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster
from kaflite.protocol.messages import DescribeTransactionsRequest, DescribeTransactionsResponse

ck = pytest.importorskip("confluent_kafka")

TIMEOUT = 30


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=3, config={
        "replica.lag.time.max.ms": 10000,
        "group.initial.rebalance.delay.ms": 0,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    }) as c:
        yield c


def producer(cluster: Cluster, tid: str, **extra: Any) -> Any:
    conf = {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": tid,
            "client.id": f"txn-{tid}", "linger.ms": 5, **extra}
    p = ck.Producer(conf)
    p.init_transactions(TIMEOUT)
    return p


def read(cluster: Cluster, topic: str, partitions: int, isolation: str) -> list[tuple[int, bytes]]:
    """Every record up to the end of each partition, as (partition, value), in order."""
    c = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "unused",
                     "isolation.level": isolation, "enable.partition.eof": True,
                     "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got: list[tuple[int, bytes]] = []
    ended: set[int] = set()
    deadline = time.monotonic() + TIMEOUT
    try:
        while len(ended) < partitions:
            assert time.monotonic() < deadline, f"never reached the end of {topic}: {ended}"
            m = c.poll(0.2)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == ck.KafkaError._PARTITION_EOF, m.error()
                ended.add(m.partition())
                continue
            ended.discard(m.partition())
            got.append((m.partition(), m.value()))
    finally:
        c.close()
    return got


def describe(cluster: Cluster, tid: str) -> Any:
    _, _, node = cluster.faults.coordinator_of(tid, "transaction")

    async def ask() -> DescribeTransactionsResponse:
        from kaflite.net.connection import BrokerConnection

        b = cluster.broker(node)
        conn = await BrokerConnection(b.advertised_host, b.advertised_port).open()
        try:
            resp = await conn.request(DescribeTransactionsRequest(transactional_ids=[tid]))
        finally:
            conn.close()
        assert isinstance(resp, DescribeTransactionsResponse)
        return resp

    (state,) = cluster.call(ask()).transaction_states
    assert state.error_code == 0, state
    return state


def wait_state(cluster: Cluster, tid: str, want: str) -> Any:
    deadline = time.monotonic() + TIMEOUT
    while True:
        state = describe(cluster, tid)
        if state.transaction_state == want:
            return state
        assert time.monotonic() < deadline, f"{tid} stayed {state.transaction_state}"
        time.sleep(0.05)


def test_commit_and_abort_seen_by_read_committed(cluster: Cluster) -> None:
    cluster.create_topic("tx-basic", 2, 3)
    p = producer(cluster, "tid-basic")
    p.begin_transaction()
    for i in range(10):
        p.produce("tx-basic", f"c{i}".encode(), partition=i % 2)
    p.commit_transaction(TIMEOUT)
    # EndTxn is answered once PrepareCommit is written; the markers follow
    first = wait_state(cluster, "tid-basic", "CompleteCommit")
    assert first.producer_epoch == 0 and first.producer_id >= 0
    p.begin_transaction()
    for i in range(10):
        p.produce("tx-basic", f"a{i}".encode(), partition=i % 2)
    p.flush(TIMEOUT)
    p.abort_transaction(TIMEOUT)
    wait_state(cluster, "tid-basic", "CompleteAbort")
    p.begin_transaction()
    p.produce("tx-basic", b"last", partition=0)
    p.commit_transaction(TIMEOUT)

    committed = read(cluster, "tx-basic", 2, "read_committed")
    everything = read(cluster, "tx-basic", 2, "read_uncommitted")
    assert sorted(v for _, v in committed) == sorted(
        [f"c{i}".encode() for i in range(10)] + [b"last"])
    assert sorted(v for _, v in everything) == sorted(
        [f"c{i}".encode() for i in range(10)] + [f"a{i}".encode() for i in range(10)]
        + [b"last"])
    # the registry knows which connection talks to the transaction coordinator
    roles = {r for c in cluster.connections(client_id="txn-tid-basic") for r in c.roles}
    assert "txn-coordinator" in roles, roles
    txn_conns = [c for c in cluster.connections(client_id="txn-tid-basic")
                 if "tid-basic" in c.transactional_ids]
    assert txn_conns and all("EndTxn" in c.apis for c in txn_conns)
    # ...and which connections carried the coordinator's markers to the leaders
    _, _, coordinator = cluster.faults.coordinator_of("tid-basic", "transaction")
    senders = cluster.connections(client_id=f"broker-{coordinator}-txn-marker-sender",
                                  include_replicas=True)
    assert senders and all("txn-marker-sender" in c.roles for c in senders)
    leaders = {cluster.controller.topics["tx-basic"].partitions[i].leader for i in range(2)}
    assert leaders <= {c.broker for c in senders if c.apis["WriteTxnMarkers"].count}
    p.flush(TIMEOUT)


def test_open_transaction_holds_back_read_committed(cluster: Cluster) -> None:
    cluster.create_topic("tx-open", 1, 3)
    p = producer(cluster, "tid-open")
    p.begin_transaction()
    p.produce("tx-open", b"pending", partition=0)
    p.flush(TIMEOUT)
    assert describe(cluster, "tid-open").transaction_state == "Ongoing"
    assert read(cluster, "tx-open", 1, "read_uncommitted") == [(0, b"pending")]
    assert read(cluster, "tx-open", 1, "read_committed") == []
    p.commit_transaction(TIMEOUT)
    assert read(cluster, "tx-open", 1, "read_committed") == [(0, b"pending")]


def test_a_new_producer_fences_the_old_one(cluster: Cluster) -> None:
    cluster.create_topic("tx-fence", 1, 3)
    old = producer(cluster, "tid-fence")
    old.begin_transaction()
    old.produce("tx-fence", b"zombie", partition=0)
    old.flush(TIMEOUT)
    epoch = describe(cluster, "tid-fence").producer_epoch
    new = producer(cluster, "tid-fence")  # aborts the open transaction, bumps the epoch
    state = describe(cluster, "tid-fence")
    assert state.transaction_state == "CompleteAbort" or state.transaction_state == "Empty"
    assert state.producer_epoch >= epoch + 2  # one bump to abort, one for the new producer
    with pytest.raises(ck.KafkaException) as info:
        old.commit_transaction(TIMEOUT)
    assert info.value.args[0].fatal() or info.value.args[0].txn_requires_abort()
    new.begin_transaction()
    new.produce("tx-fence", b"fresh", partition=0)
    new.commit_transaction(TIMEOUT)
    assert read(cluster, "tx-fence", 1, "read_committed") == [(0, b"fresh")]


def test_a_transaction_past_its_timeout_is_aborted(cluster: Cluster) -> None:
    cluster.create_topic("tx-timeout", 1, 3)
    p = producer(cluster, "tid-timeout", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    p.produce("tx-timeout", b"too-slow", partition=0)
    p.flush(TIMEOUT)
    state = wait_state(cluster, "tid-timeout", "CompleteAbort")
    assert state.producer_epoch == 1  # the coordinator bumped it to fence the producer
    assert read(cluster, "tx-timeout", 1, "read_committed") == []
    with pytest.raises(ck.KafkaException):
        p.commit_transaction(TIMEOUT)


def test_offsets_commit_with_the_transaction(cluster: Cluster) -> None:
    cluster.create_topic("tx-in", 1, 3)
    cluster.create_topic("tx-out", 1, 3)
    seed = ck.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    for i in range(6):
        seed.produce("tx-in", f"in{i}".encode(), partition=0)
    seed.flush(TIMEOUT)
    group = "tx-ctp"
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                            "enable.auto.commit": False, "auto.offset.reset": "earliest",
                            "isolation.level": "read_committed"})
    consumer.subscribe(["tx-in"])
    p = producer(cluster, "tid-ctp")
    got: list[Any] = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 6:
        assert time.monotonic() < deadline, "the input never arrived"
        m = consumer.poll(0.2)
        if m is not None and not m.error():
            got.append(m)

    def committed() -> int:
        (tp,) = consumer.committed([ck.TopicPartition("tx-in", 0)], TIMEOUT)
        return int(tp.offset)

    # abort: output hidden, offsets untouched
    p.begin_transaction()
    for m in got[:3]:
        p.produce("tx-out", m.value().upper(), partition=0)
    p.send_offsets_to_transaction([ck.TopicPartition("tx-in", 0, got[2].offset() + 1)],
                                  consumer.consumer_group_metadata(), TIMEOUT)
    p.abort_transaction(TIMEOUT)
    assert committed() < 0
    # commit: output visible and the offsets committed with it
    p.begin_transaction()
    for m in got:
        p.produce("tx-out", m.value().upper(), partition=0)
    p.send_offsets_to_transaction([ck.TopicPartition("tx-in", 0, got[-1].offset() + 1)],
                                  consumer.consumer_group_metadata(), TIMEOUT)
    p.commit_transaction(TIMEOUT)
    assert committed() == 6
    consumer.close()
    assert [v for _, v in read(cluster, "tx-out", 1, "read_committed")] == \
        [f"IN{i}".encode() for i in range(6)]


def test_state_survives_a_coordinator_move(cluster: Cluster) -> None:
    cluster.create_topic("tx-move", 1, 3)
    p = producer(cluster, "tid-move")
    p.begin_transaction()
    p.produce("tx-move", b"before", partition=0)
    p.commit_transaction(TIMEOUT)
    before = describe(cluster, "tid-move")
    _, _, old_node = cluster.faults.coordinator_of("tid-move", "transaction")
    new_node = cluster.faults.move_coordinator("tid-move", key_type="transaction")
    assert new_node != old_node
    after = wait_state(cluster, "tid-move", "CompleteCommit")
    assert (after.producer_id, after.producer_epoch) == (before.producer_id,
                                                         before.producer_epoch)
    p.begin_transaction()
    p.produce("tx-move", b"after", partition=0)
    p.commit_transaction(TIMEOUT)
    assert read(cluster, "tx-move", 1, "read_committed") == [(0, b"before"), (0, b"after")]


def test_requests_are_checked(cluster: Cluster) -> None:
    """What a client gets for a bad InitProducerId, AddPartitionsToTxn or ListTransactions."""
    from kaflite.net.connection import BrokerConnection
    from kaflite.protocol import errors
    from kaflite.protocol.messages import (
        AddPartitionsToTxnRequest,
        InitProducerIdRequest,
        ListTransactionsRequest,
    )
    from kaflite.protocol.messages import add_partitions_to_txn_request as apq

    producer(cluster, "tid-checks")  # makes sure the id and its coordinator exist
    _, _, node = cluster.faults.coordinator_of("tid-checks", "transaction")
    other = next(n for n in cluster.brokers if n != node)

    async def ask(node_id: int, req: Any, version: int | None = None) -> Any:
        b = cluster.broker(node_id)
        conn = await BrokerConnection(b.advertised_host, b.advertised_port).open()
        try:
            return await conn.request(req, version=version)
        finally:
            conn.close()

    def init(node_id: int, tid: str, timeout_ms: int) -> int:
        resp = cluster.call(ask(node_id, InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=timeout_ms)))
        return int(resp.error_code)

    assert init(node, "tid-checks", 900001) == errors.InvalidTransactionTimeoutError.code
    assert init(node, "tid-checks", 0) == errors.InvalidTransactionTimeoutError.code
    assert init(node, "", 1000) == errors.InvalidRequestError.code
    assert init(other, "tid-checks", 1000) == errors.NotCoordinatorError.code
    state = describe(cluster, "tid-checks")
    add = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="tid-checks", v3_and_below_producer_id=state.producer_id,
        v3_and_below_producer_epoch=state.producer_epoch,
        v3_and_below_topics=[apq.AddPartitionsToTxnTopic(name="tx-basic", partitions=[0]),
                             apq.AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0])])
    resp = cluster.call(ask(node, add, version=3))
    codes = {(t.name, r.partition_index): r.partition_error_code
             for t in resp.results_by_topic_v3_and_below for r in t.results_by_partition}
    assert codes == {("tx-basic", 0): errors.OperationNotAttemptedError.code,
                     ("no-such-topic", 0): errors.UnknownTopicOrPartitionError.code}
    listed = cluster.call(ask(node, ListTransactionsRequest(state_filters=["Empty", "Bogus"])))
    assert listed.unknown_state_filters == ["Bogus"]
    assert "tid-checks" in {t.transactional_id for t in listed.transaction_states}
    assert all(t.transaction_state == "Empty" for t in listed.transaction_states)


def test_markers_are_retried_until_written(cluster: Cluster) -> None:
    """Leaders refusing WriteTxnMarkers (fault injection): the coordinator retries, then
    completes; read_committed consumers wait for the markers meanwhile."""
    cluster.create_topic("tx-retry", 1, 3)
    p = producer(cluster, "tid-retry")
    cluster.faults.inject_error("WriteTxnMarkers", "NOT_ENOUGH_REPLICAS", 3, topic="tx-retry")
    p.begin_transaction()
    p.produce("tx-retry", b"eventually", partition=0)
    p.commit_transaction(TIMEOUT)
    wait_state(cluster, "tid-retry", "CompleteCommit")
    _, _, node = cluster.faults.coordinator_of("tid-retry", "transaction")
    refused: dict[str, int] = {}
    for c in cluster.connections(client_id=f"broker-{node}-txn-marker-sender",
                                 include_replicas=True, include_closed=True):
        for name, n in c.apis["WriteTxnMarkers"].errors.items():
            refused[name] = refused.get(name, 0) + n
    assert refused == {"NOT_ENOUGH_REPLICAS": 3}
    assert read(cluster, "tx-retry", 1, "read_committed") == [(0, b"eventually")]
    cluster.faults.clear()
