"""Transactions of kafka-python, aiokafka, kcat and kafkajs through the proxy, against
a 3-broker cluster whose transaction coordinator and partition leaders move in the
middle of a transaction (confluent-kafka and kaflite's client: test_clients.py).

Each client commits one transaction written in two halves, with the transaction
coordinator and every leader of the topic moved between the halves (the client
goes on in the same transaction); then it writes a second transaction, waits until
its records are in the log, and aborts it. A read_committed consumer of the same
client reads the topic back: exactly the committed records, none of the aborted
ones. The proxy's registry named the client's transaction-coordinator connections
(to the old and the new coordinator), and no answer the client got named an upstream port (``AddressWatch``).
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kaflite.cluster import Cluster
from kaflite.proxy import Proxy
from tests.cluster.test_kafkajs import At, Peer, needs_kafkajs
from tests.proxy.conftest import AddressWatch, assert_no_upstream_address

PARTITIONS = 3
COUNT = 96          # committed, in two halves
ABORTED = 32


def values(prefix: str, n: int, start: int = 0) -> list[str]:
    return [f"{prefix}-{i}" for i in range(start, start + n)]


def log_end(cluster: Cluster, topic: str) -> int:
    """The sum of the topic's high watermarks: records (and markers) in the log."""
    parts = cluster.controller.topics[topic].partitions
    return sum(cluster.broker(parts[p].leader).partitions[(topic, p)].high_watermark
               for p in range(PARTITIONS))


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


MOVES: dict[str, tuple[int, int]] = {}     # transactional id -> (old, new) coordinator


def move_all(cluster: Cluster, topic: str, tid: str) -> None:
    old = cluster.faults.coordinator_of(tid, "transaction")[2]
    MOVES[tid] = (old, cluster.faults.move_coordinator(tid, key_type="transaction"))
    for p in range(PARTITIONS):
        cluster.faults.move_leader(topic, p)


TXN_APIS = {"InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"}


def check_txn_roles(proxy: Proxy, client_id: str, tid: str) -> None:
    """The client's transactional requests went to the coordinator before the move (on
    that broker's proxy port) and after it to the new one, whose connection the
    registry names txn-coordinator (the old one loses the role with NOT_COORDINATOR)."""
    old, new = MOVES[tid]
    rows = proxy.connections(client_id=client_id, include_closed=True)
    seen = [(c.broker, c.roles, sorted(c.apis)) for c in rows]
    assert any(c.broker == old and TXN_APIS & set(c.apis) for c in rows), seen
    assert any(c.broker == new and "txn-coordinator" in c.roles for c in rows), seen


def test_kafka_python(cluster3: Cluster, proxy: Proxy, watch: AddressWatch) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic, tid, cid = "pxt-kafkapython", "pxt-kafkapython-tid", "pxt-kp"
    cluster3.create_topic(topic, PARTITIONS, 3)
    p = KafkaProducer(bootstrap_servers=proxy.bootstrap_servers, transactional_id=tid,
                      client_id=cid)
    try:
        p.init_transactions()
        p.begin_transaction()
        for i, v in enumerate(values("keep", COUNT // 2)):
            p.send(topic, v.encode(), partition=i % PARTITIONS)
        p.flush()
        move_all(cluster3, topic, tid)
        for i, v in enumerate(values("keep", COUNT // 2, COUNT // 2)):
            p.send(topic, v.encode(), partition=i % PARTITIONS)
        p.commit_transaction()
        before = log_end(cluster3, topic)
        p.begin_transaction()
        for i, v in enumerate(values("drop", ABORTED)):
            p.send(topic, v.encode(), partition=i % PARTITIONS)
        p.flush()
        assert log_end(cluster3, topic) >= before + ABORTED     # in the log, then aborted
        p.abort_transaction()
    finally:
        p.close()
    c = KafkaConsumer(bootstrap_servers=proxy.bootstrap_servers, client_id=cid,
                      isolation_level="read_committed", auto_offset_reset="earliest",
                      enable_auto_commit=False, fetch_max_wait_ms=100)
    tps = [TopicPartition(topic, n) for n in range(PARTITIONS)]
    c.assign(tps)
    got: list[str] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            for records in c.poll(timeout_ms=200).values():
                got += [r.value.decode() for r in records]
            ends = c.end_offsets(tps)                    # the LSO, for read_committed
            if all(c.position(tp) >= ends[tp] for tp in tps):
                break
    finally:
        c.close()
    assert sorted(got) == sorted(values("keep", COUNT))
    check_txn_roles(proxy, cid, tid)
    assert_no_upstream_address(watch, cluster3, proxy)


def test_aiokafka(cluster3: Cluster, proxy: Proxy, watch: AddressWatch) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic, tid, cid = "pxt-aiokafka", "pxt-aiokafka-tid", "pxt-aio"
    cluster3.create_topic(topic, PARTITIONS, 3)

    async def main() -> list[str]:
        p = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap_servers, transactional_id=tid,
                             client_id=cid)
        await p.start()
        try:
            async with p.transaction():
                for i, v in enumerate(values("keep", COUNT // 2)):
                    await p.send(topic, v.encode(), partition=i % PARTITIONS)
                await p.flush()
                move_all(cluster3, topic, tid)
                for i, v in enumerate(values("keep", COUNT // 2, COUNT // 2)):
                    await p.send(topic, v.encode(), partition=i % PARTITIONS)
            before = log_end(cluster3, topic)
            await p.begin_transaction()
            for i, v in enumerate(values("drop", ABORTED)):
                await p.send(topic, v.encode(), partition=i % PARTITIONS)
            await p.flush()
            assert log_end(cluster3, topic) >= before + ABORTED
            await p.abort_transaction()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap_servers, client_id=cid,
                             isolation_level="read_committed", auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        got: list[str] = []
        try:
            tps = [TopicPartition(topic, n) for n in range(PARTITIONS)]
            c.assign(tps)
            ends = await c.end_offsets(tps)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=200)
                got += [r.value.decode() for records in batch.values() for r in records
                        if r.value is not None]
                if all([await c.position(tp) >= ends[tp] for tp in tps]):
                    break
        finally:
            await c.stop()
        return got

    got = asyncio.run(asyncio.wait_for(main(), 90))
    assert sorted(got) == sorted(values("keep", COUNT))
    check_txn_roles(proxy, cid, tid)
    assert_no_upstream_address(watch, cluster3, proxy)


KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kcat_lines(prefix: str, n: int, start: int = 0) -> str:
    # kcat 1.7.1 reads stdin in 1024-byte blocks (fread) and produces only the lines of
    # a whole block: each line is 64 bytes, and each write a multiple of 16 lines
    assert n % 16 == 0
    return "".join(v + "." * (63 - len(v)) + "\n" for v in values(prefix, n, start))


def kcat_transaction(kcat: str, bootstrap: str, cluster: Cluster, topic: str, tid: str,
                     prefix: str, n: int, abort: bool) -> None:
    """One kcat run is one transaction: committed when its input ends, aborted on SIGINT.
    The transaction coordinator and the leaders move when half of it is in the log."""
    proc = subprocess.Popen([kcat, "-b", bootstrap, "-P", "-t", topic, "-X", "acks=all",
                             "-X", f"transactional.id={tid}", "-X", "client.id=pxt-kcat",
                             "-m", "30"],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    try:
        before = log_end(cluster, topic)
        proc.stdin.write(kcat_lines(prefix, n // 2))
        proc.stdin.flush()
        wait_until(lambda: log_end(cluster, topic) >= before + n // 2, "the first half")
        move_all(cluster, topic, tid)
        proc.stdin.write(kcat_lines(prefix, n // 2, n // 2))
        proc.stdin.flush()
        wait_until(lambda: log_end(cluster, topic) >= before + n, "the second half")
        if abort:
            proc.send_signal(signal.SIGINT)    # kcat aborts its transaction when its input ends
        proc.stdin.close()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.returncode == 0, err
    assert ("Aborting transaction" if abort else "Transaction successfully committed") in err


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat(cluster3: Cluster, proxy: Proxy, watch: AddressWatch) -> None:
    assert KCAT is not None
    topic, tid = "pxt-kcat", "pxt-kcat-tid"
    cluster3.create_topic(topic, PARTITIONS, 3)
    bootstrap = proxy.bootstrap_servers
    kcat_transaction(KCAT, bootstrap, cluster3, topic, tid, "keep", COUNT, abort=False)
    kcat_transaction(KCAT, bootstrap, cluster3, topic, tid, "drop", ABORTED, abort=True)
    read = {}
    for isolation in ("read_committed", "read_uncommitted"):
        proc = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", topic, "-e", "-q",
                               "-f", "%s\n", "-X", f"isolation.level={isolation}"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        read[isolation] = sorted(v.rstrip(".") for v in proc.stdout.split())
    assert read["read_committed"] == sorted(values("keep", COUNT))
    assert read["read_uncommitted"] == sorted(values("keep", COUNT) + values("drop", ABORTED))
    check_txn_roles(proxy, "pxt-kcat", tid)
    assert_no_upstream_address(watch, cluster3, proxy)


@needs_kafkajs
@pytest.mark.peer
def test_kafkajs(cluster3: Cluster, proxy: Proxy, watch: AddressWatch, tmp_path: Path) -> None:
    topic, tid = "pxt-kafkajs", "pxt-kafkajs-tid"
    cluster3.create_topic(topic, PARTITIONS, 3)
    at = At(proxy.bootstrap_servers)
    peer = Peer(at, "txnmoves", tmp_path / "txn.log", topic=topic, transactionalId=tid,
                groupId="pxt-kafkajs-reader", partitions=PARTITIONS, count=COUNT,
                aborted=ABORTED, timeoutMs=90_000)
    peer.wait_for(lambda lines: any(line.get("step") == "half" for line in lines), 60,
                  "the first half")
    move_all(cluster3, topic, tid)
    before = log_end(cluster3, topic)
    peer.go_on()
    peer.wait_for(lambda lines: any(line.get("step") == "aborting" for line in lines), 60,
                  "the aborted transaction's records")
    assert log_end(cluster3, topic) >= before + COUNT // 2 + ABORTED
    peer.go_on()
    got = peer.result()["values"]
    assert sorted(got) == sorted(values("keep", COUNT))
    check_txn_roles(proxy, "kafkajs-interop", tid)
    assert_no_upstream_address(watch, cluster3, proxy)
