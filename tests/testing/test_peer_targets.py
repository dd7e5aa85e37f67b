"""The ``Tansu`` and ``KFake`` targets themselves: each starts, kaflite's client reaches
every broker it lists and round-trips records through it, ``kill``/``restart``/
``move_leader`` do what they say (or raise ``Unsupported`` with the reason), and
``stop`` leaves no process behind. ``Proxied(Tansu)`` cuts the broker off from the
clients and lets them back, its data kept.

Marked ``peer`` (with ``make interop``): kfake is built with Go and Tansu comes as a
binary of its own; without them these skip with the reason (under ``CI=true`` they fail).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from kaflite.client import Admin, Producer
from kaflite.testing import (
    ClusterUnderTest,
    KFake,
    Proxied,
    Tansu,
    TargetUnavailable,
    Unsupported,
    tansu_binary,
)
from kaflite.testing._probe import brokers_seen, run_blocking
from tests.interop._clients import create_topic, read_to_end, run, uid
from tests.interop.conftest import ENSURE_KFAKE, ensured_path, unavailable

pytestmark = [pytest.mark.interop, pytest.mark.peer]


@pytest.fixture(scope="module")
def kfake_binary() -> Path:
    return ensured_path(ENSURE_KFAKE, "franz-go's kfake", 600)


@pytest.fixture
def tansu() -> Iterator[Tansu]:
    try:
        binary = tansu_binary()
    except TargetUnavailable as exc:
        unavailable("Tansu", str(exc))
    with Tansu(binary) as target:
        yield target


@pytest.fixture
def kfake(kfake_binary: Path) -> Iterator[KFake]:
    with KFake(kfake_binary, brokers=3) as target:
        yield target


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def cut(conn: socket.socket) -> bool:
    """The peer closed ``conn`` (an end of stream, or a reset); a timeout raises."""
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


def refuses(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


async def described_nodes(servers: str) -> set[int]:
    async with Admin(bootstrap_servers=servers) as admin:
        cluster = await admin.describe_cluster()
        return {b.node_id for b in cluster["brokers"]}


async def round_trip(target: ClusterUnderTest, topic: str, count: int = 50) -> list[bytes]:
    """Create ``topic``, write ``count`` records with acks=all, read them back."""
    servers = target.bootstrap_servers
    await create_topic(servers, topic, 2, 1)
    async with Producer(bootstrap_servers=servers, acks="all") as p:
        await asyncio.gather(*(p.send(topic, f"v{i}".encode(), partition=i % 2)
                               for i in range(count)))
    return await values(servers, topic, count)


async def values(servers: str, topic: str, want: int) -> list[bytes]:
    return sorted(r.value or b"" for r in await read_to_end(servers, topic, 2, want=want))


def want(count: int = 50) -> list[bytes]:
    return sorted(f"v{i}".encode() for i in range(count))


def test_tansu_serves_kills_restarts_empty_and_stops_cleanly(tansu: Tansu) -> None:
    [node] = tansu.node_ids
    assert run(described_nodes(tansu.bootstrap_servers)) == {node}
    topic = uid("tansu-target")
    assert run(round_trip(tansu, topic)) == want()
    [pid] = tansu.pids()

    tansu.kill(node)
    assert gone(pid) and refuses(tansu.bootstrap_servers)
    tansu.restart(node)
    assert tansu.pids() != [pid]
    # the same port again, but in-memory storage: the topic went with the process
    assert not tansu.restart_keeps_data
    assert run(described_nodes(tansu.bootstrap_servers)) == {node}
    assert run(round_trip(tansu, topic)) == want()      # created anew, holding only these
    with pytest.raises(Unsupported, match="one broker"):
        tansu.move_leader(topic, 0)

    [pid] = tansu.pids()
    tansu.stop()
    assert gone(pid)
    tansu.stop()    # twice is fine


def test_kfake_serves_kills_restarts_moves_and_stops_cleanly(kfake: KFake) -> None:
    assert kfake.node_ids == [0, 1, 2] and kfake.restart_keeps_data
    assert run(described_nodes(kfake.bootstrap_servers)) == {0, 1, 2}
    topic = uid("kfake-target")
    assert run(round_trip(kfake, topic)) == want()

    # kfake's controller cannot go (its admin requests would have nowhere to go)
    controller = kfake.controller
    assert controller is not None and controller in kfake.unkillable()
    with pytest.raises(Unsupported, match="controller"):
        kfake.kill(controller)

    victim = next(n for n in kfake.node_ids if n != controller)
    # a connection open before the kill is cut, as a crash would cut it
    host, _, port = kfake.addresses[victim].rpartition(":")
    with socket.create_connection((host, int(port)), timeout=5) as held:
        kfake.kill(victim)
        held.settimeout(5)
        assert cut(held)
    assert refuses(kfake.addresses[victim])
    others = ",".join(a for n, a in kfake.addresses.items() if n != victim)
    assert run(described_nodes(others)) == set(kfake.node_ids) - {victim}
    with pytest.raises(RuntimeError, match="not found"):
        kfake.move_leader(topic, 0, victim)
    assert run(values(others, topic, 50)) == want()

    kfake.restart(victim)
    assert run(described_nodes(kfake.bootstrap_servers)) == {0, 1, 2}
    assert kfake.move_leader(topic, 0, victim) == victim == kfake.leader(topic, 0)
    moved = kfake.move_leader(topic, 1)
    assert moved == kfake.leader(topic, 1)
    # the data outlived the kill: one copy in kfake's process, served by the new leader
    assert run(values(kfake.bootstrap_servers, topic, 50)) == want()

    [pid] = kfake.pids()
    kfake.stop()
    assert gone(pid)
    kfake.stop()


def test_tansu_behind_the_proxy_is_cut_off_and_back_with_its_data() -> None:
    try:
        binary = tansu_binary()
    except TargetUnavailable as exc:
        unavailable("Tansu", str(exc))
    proxied = Proxied(Tansu(binary))
    with proxied:
        [node] = proxied.node_ids
        assert proxied.restart_keeps_data and proxied.pids() == proxied.inner.pids()
        topic = uid("proxied")
        assert run(round_trip(proxied, topic)) == want()
        assert run_blocking(brokers_seen(proxied.bootstrap_servers), 10) == {node}

        proxied.kill(node)
        # a client gets no answer through the proxy; the broker itself still serves
        assert run_blocking(brokers_seen(proxied.bootstrap_servers), 10) is None
        assert proxied.outage.closed > 0
        assert run(values(proxied.inner.bootstrap_servers, topic, 50)) == want()

        proxied.restart(node)
        assert run(values(proxied.bootstrap_servers, topic, 50)) == want()
        pids = proxied.pids()
    assert all(gone(pid) for pid in pids)
