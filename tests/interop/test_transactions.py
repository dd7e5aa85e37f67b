"""kaflite's transactional producer against each target: a committed transaction is
seen by read_committed, an aborted one is not (but is in the log, for
read_uncommitted), offsets sent in a transaction become the group's committed offsets
only when it commits, and a second producer with the same transactional id fences the
first."""

from __future__ import annotations

import pytest

from kaflite.client import Consumer, Producer, TopicPartition
from kaflite.protocol import errors
from kaflite.testing import ClusterUnderTest
from tests.interop._clients import create_topic, read_to_end, replicas, run, uid
from tests.interop.conftest import limited, matrix_fixture

pytestmark = pytest.mark.interop

# kaflite, Apache Kafka, Tansu and kfake (tests/interop/conftest.py); where a peer
# deviates from Kafka the test checks the deviation it knows, then skips with it
# (docs/compatibility.md, "The client x broker matrix").
target = matrix_fixture()

PARTITIONS = 2


def test_commit_and_abort_seen_correctly_by_read_committed(target: ClusterUnderTest) -> None:
    topic = uid("txn")
    servers = target.bootstrap_servers

    async def main() -> tuple[list[bytes], list[bytes]]:
        await create_topic(servers, topic, PARTITIONS, replicas(target))
        async with Producer(bootstrap_servers=servers, transactional_id=uid("tid"),
                            acks="all") as p:
            await p.init_transactions()
            p.begin_transaction()
            for i in range(20):
                await p.send(topic, f"committed-{i}".encode(), partition=i % PARTITIONS)
            await p.commit_transaction()
            p.begin_transaction()
            for i in range(10):
                await p.send(topic, f"aborted-{i}".encode(), partition=i % PARTITIONS)
            await p.abort_transaction()
            # committed data of the same producer after the aborted run must survive it
            p.begin_transaction()
            for i in range(20, 30):
                p.produce(topic, f"committed-{i}".encode(), partition=i % PARTITIONS)
            await p.commit_transaction()
        # The markers are written after EndTxn is answered: read to the last stable
        # offset and until all the committed records are there.
        committed = await read_to_end(servers, topic, PARTITIONS, "read_committed", want=30)
        everything = await read_to_end(servers, topic, PARTITIONS, "read_uncommitted", want=40)
        return ([r.value or b"" for r in committed], [r.value or b"" for r in everything])

    committed, everything = run(main())
    want = {f"committed-{i}".encode() for i in range(30)}
    aborted = {f"aborted-{i}".encode() for i in range(10)}
    if target.name.startswith("tansu"):
        assert sorted(committed) == sorted(want | aborted)
        pytest.skip(f"{target.name}: Tansu 0.6 answers a read_committed fetch with the "
                    "aborted batches and no aborted_transactions, so they reach the "
                    "consumer (as checked)")
    assert sorted(committed) == sorted(want)
    assert sorted(everything) == sorted(want | aborted)


def test_offsets_in_a_transaction_commit_with_it(target: ClusterUnderTest) -> None:
    topic, group = uid("txn-offsets"), uid("txn-group")
    servers = target.bootstrap_servers
    tp = TopicPartition(topic, 0)

    async def main() -> int | None:
        await create_topic(servers, topic, 1, replicas(target))
        async with Producer(bootstrap_servers=servers, transactional_id=uid("tid")) as p:
            await p.init_transactions()
            p.begin_transaction()
            await p.send(topic, b"out", partition=0)
            await p.send_offsets_to_transaction({(topic, 0): 5}, group)
            await p.commit_transaction()
            p.begin_transaction()
            await p.send(topic, b"out", partition=0)
            await p.send_offsets_to_transaction({(topic, 0): 7}, group)
            await p.abort_transaction()
        # The group's consumer asks with require_stable: it waits out offsets still
        # pending on a transaction marker, so it sees the outcome of both transactions.
        async with Consumer(bootstrap_servers=servers, group_id=group) as c:
            return await c.committed(tp)

    assert run(main()) == 5


def test_a_second_producer_fences_the_first(target: ClusterUnderTest) -> None:
    limited(target, {"tansu": "Tansu 0.6 closes the connection on each EndTxn of the "
                              "fenced producer, which retries until max.block.ms (60 s)"})
    topic, tid = uid("txn-fence"), uid("tid")
    servers = target.bootstrap_servers
    # kfake takes the zombie's commit for a KIP-890 retry of the abort that fencing did
    # (its epoch is one behind and no transaction is open: txns.go, doEnd)
    kfake = target.name.startswith("kfake")
    fenced = (errors.InvalidTxnStateError,) if kfake else (errors.ProducerFencedError,
                                                            errors.InvalidProducerEpochError)

    async def main() -> list[bytes]:
        await create_topic(servers, topic, 1, replicas(target))
        old = Producer(bootstrap_servers=servers, transactional_id=tid)
        new = Producer(bootstrap_servers=servers, transactional_id=tid)
        try:
            await old.init_transactions()
            old.begin_transaction()
            await old.send(topic, b"zombie", partition=0)
            await new.init_transactions()   # bumps the epoch, aborting the zombie's
            with pytest.raises(fenced):
                await old.commit_transaction()
            new.begin_transaction()
            await new.send(topic, b"fresh", partition=0)
            await new.commit_transaction()
        finally:
            await old.close()
            await new.close()
        return [r.value or b"" for r in
                await read_to_end(servers, topic, 1, "read_committed", want=1)]

    assert run(main()) == [b"fresh"]
    if kfake:
        pytest.skip(f"{target.name}: the fenced producer's commit fails with "
                    "INVALID_TXN_STATE, not PRODUCER_FENCED (kfake's KIP-890 retry "
                    "detection); the rest holds (as checked)")
