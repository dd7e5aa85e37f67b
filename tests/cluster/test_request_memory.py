"""Partly received requests cannot pin a broker's memory.

- a peer's announced frame size is not allocated before the bytes arrive;
- a closed connection's buffers are freed at once, with the garbage collector off;
- all connections together are held to ``queued.max.request.bytes``: a client that
  sends more gets TCP back-pressure, and the broker keeps serving the others.
"""

from __future__ import annotations

import gc
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from kaflite.client.sync import Admin
from kaflite.cluster import Cluster
from kaflite.cluster.request_memory import SMALL, RequestMemory

MB = 1 << 20


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def announce(port: int, size: int, send: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(struct.pack(">i", size) + struct.pack(">hhih", 0, 9, 1, -1) + bytes(send))
    return s


def settle(cluster: Cluster) -> None:
    """A round trip on the cluster's loop, so that it has read what was sent."""
    async def nothing() -> None:
        return None
    for _ in range(3):
        cluster.call(nothing())


def drained(cluster: Cluster) -> bool:
    """Whether the broker let go of all request memory (closed peers are noticed
    once their paused connections read again: a few loop rounds)."""
    memory = cluster.broker(0).request_memory
    for _ in range(200):
        if memory.used == 0:
            return True
        settle(cluster)
    return False


def metadata_works(cluster: Cluster) -> bool:
    admin = Admin(bootstrap_servers=cluster.bootstrap_servers)
    try:
        return bool(admin.describe_cluster()["brokers"])
    finally:
        admin.close()


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_announced_frames_that_never_arrive_cost_nothing(no_gc: None) -> None:
    with Cluster(brokers=1) as cluster:
        port = cluster.broker(0).port
        assert metadata_works(cluster)
        before = rss()
        held = [announce(port, 100 * MB - 1, 1024) for _ in range(16)]
        settle(cluster)
        while_open = rss() - before
        for s in held:
            s.close()
        assert drained(cluster)
        after_close = rss() - before
        assert metadata_works(cluster)
    # 16 x 100 MB would be 1.6 GB; each connection holds at most 1 MiB of buffer
    assert while_open < 100 * MB, while_open
    assert after_close < 100 * MB, after_close


def test_closed_connections_free_their_frames_without_a_collection(no_gc: None) -> None:
    with Cluster(brokers=1) as cluster:
        port = cluster.broker(0).port
        before = rss()
        for _ in range(8):   # 8 x 20 MB really sent, then the connection closes
            s = announce(port, 60 * MB, 20 * MB)
            settle(cluster)
            s.close()
            assert drained(cluster)
        grown = rss() - before
    assert grown < 100 * MB, grown


def test_the_pool_pushes_back_and_the_broker_serves_others() -> None:
    limit = 8 * MB
    with Cluster(brokers=1, config={"queued.max.request.bytes": limit}) as cluster:
        broker = cluster.broker(0)
        port = broker.port
        socks = [announce(port, 90 * MB, 0) for _ in range(6)]
        sent = [0] * len(socks)

        def push(i: int) -> None:
            s = socks[i]
            s.settimeout(2)
            chunk = bytes(MB)
            try:
                for _ in range(40):    # 40 MB each, if the broker took it
                    s.sendall(chunk)
                    sent[i] += MB
            except OSError:
                pass   # back-pressure: the send timed out

        threads = [threading.Thread(target=push, args=(i,)) for i in range(len(socks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        settle(cluster)
        memory = broker.request_memory
        used, pauses = memory.used, memory.pauses
        assert metadata_works(cluster)   # a new connection is served meanwhile
        for s in socks:
            s.close()
        assert drained(cluster)
    assert pauses > 0
    # Each connection may grow one doubling step past the limit, and one of them is
    # let through (40 MB sent: a buffer of 64 MiB); without the pool the broker
    # would have taken all 6 x 40 MB.
    assert used <= 2 * limit + 64 * MB, used
    assert sum(sent) < 6 * 40 * MB


class FakeReader:
    def __init__(self) -> None:
        self.paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False


def test_pool_pauses_when_full_and_resumes_when_memory_returns() -> None:
    pool = RequestMemory(limit=100 * SMALL)
    a, b, c = FakeReader(), FakeReader(), FakeReader()
    pool.update(a, 60 * SMALL)
    pool.update(b, 30 * SMALL)
    assert not a.paused and not b.paused
    pool.update(b, 50 * SMALL)   # 110 >= 100: b asked for more and waits
    assert b.paused and not a.paused and pool.used == 110 * SMALL
    pool.update(c, SMALL // 2)   # small requests are never paused
    assert not c.paused
    pool.update(c, 0)
    pool.update(a, 0)            # a's request was handled: room again, b reads
    assert not b.paused and pool.used == 50 * SMALL
    pool.forget(b)
    assert pool.used == 0


def test_pool_never_leaves_every_holder_waiting() -> None:
    pool = RequestMemory(limit=100 * SMALL)
    a, b = FakeReader(), FakeReader()
    pool.update(a, 70 * SMALL)
    pool.update(b, 40 * SMALL)   # full: b waits, a still reads
    assert b.paused and not a.paused
    pool.update(a, 80 * SMALL)   # a too: nobody would read, so the first waiter goes on
    assert a.paused and not b.paused
    pool.update(b, 60 * SMALL)   # ... and keeps reading until its request is done
    assert not b.paused
    pool.update(b, 0)            # done; still full (a holds 80): a is let through
    assert not a.paused
    pool.forget(a)               # a's connection closed: the pool is empty
    assert pool.used == 0


def test_a_frame_larger_than_the_whole_pool_still_gets_through() -> None:
    pool = RequestMemory(limit=10 * SMALL)
    a = FakeReader()
    pool.update(a, 50 * SMALL)
    assert not a.paused          # the only holder: not strict, as Kafka's pool
