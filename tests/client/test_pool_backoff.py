"""Reconnect back-off and connection setup timeouts grow per consecutive failure, as in Java."""

from __future__ import annotations

import asyncio
import socket

import pytest

from kaflite.client.events import EventLog
from kaflite.client.pool import BrokerAddress, ConnectionPool
from kaflite.config import resolve
from kaflite.net.connection import ConnectionClosed


def pool(**config: object) -> ConnectionPool:
    cfg = resolve("producer", {"bootstrap.servers": "127.0.0.1:1"}, **config)
    return ConnectionPool(cfg, EventLog("t"))


def within_jitter(value: float, nominal: float) -> bool:
    return nominal * 0.8 - 1e-9 <= value <= nominal * 1.2 + 1e-9


def test_setup_timeout_doubles_up_to_the_max() -> None:
    p = pool(socket_connection_setup_timeout_ms=1000, socket_connection_setup_timeout_max_ms=5000)
    for failures, nominal in [(0, 1000), (1, 2000), (2, 4000), (3, 5000), (10, 5000)]:
        for _ in range(20):
            assert within_jitter(p._setup_timeout_ms(failures), nominal), failures


def test_reconnect_backoff_doubles_up_to_the_max() -> None:
    p = pool(reconnect_backoff_ms=50, reconnect_backoff_max_ms=300)
    for failures, nominal in [(1, 50), (2, 100), (3, 200), (4, 300), (9, 300)]:
        for _ in range(20):
            assert within_jitter(p._backoff_delay(failures) * 1000, nominal), failures


def test_failed_connects_back_off_and_stretch_the_setup_timeout() -> None:
    with socket.socket() as s:   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def main() -> None:
        p = pool(reconnect_backoff_ms=20, reconnect_backoff_max_ms=1000,
                 socket_connection_setup_timeout_ms=1000,
                 socket_connection_setup_timeout_max_ms=30_000)
        p.update_brokers({7: BrokerAddress(7, "127.0.0.1", port)})
        timeouts = []
        new = p._new

        def spy(host: str, port: int, node_id: int | None, failures: int = 0):  # type: ignore[no-untyped-def]
            conn = new(host, port, node_id, failures)
            timeouts.append(conn.connect_timeout)
            return conn

        p._new = spy  # type: ignore[method-assign]
        for _ in range(3):
            with pytest.raises(ConnectionClosed):
                await p.get(7)
        await p.close()
        # Each consecutive failure doubles the setup timeout (seconds) ...
        assert [within_jitter(t, nominal)
                for t, nominal in zip(timeouts, (1.0, 2.0, 4.0), strict=True)] == [True] * 3
        # ... and the wait before the next attempt: 20, 40, 80 ms (jitter 20%).
        delays = [int(e.message.rsplit("retry in ", 1)[1].split()[0])
                  for e in p.events.list("connect") if "retry in" in e.message]
        assert [within_jitter(d, n) for d, n in zip(delays, (20, 40, 80), strict=True)] \
            == [True] * 3

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_connect_one_caller_abandons_fails_the_others_with_a_network_error() -> None:
    """Two callers share one connect attempt to a broker that accepts the connection and
    never answers ApiVersions; the first gives up (cancelled by a deadline of its own,
    as the metadata re-bootstrap trigger does). The second must get a network error it
    retries, not the first one's cancellation (a producer's batch was lost so), and the
    abandoned attempt is no failure of the broker's (no backoff)."""
    async def main() -> None:
        with socket.socket() as server:      # listening, never accepting: a mute broker
            server.bind(("127.0.0.1", 0))
            server.listen()
            p = pool(request_timeout_ms=30_000)
            p.update_brokers({7: BrokerAddress(7, "127.0.0.1", server.getsockname()[1])})
            first = asyncio.ensure_future(p.get(7))
            await asyncio.sleep(0)
            second = asyncio.ensure_future(p.get(7))
            await asyncio.sleep(0.2)
            first.cancel()
            done, _ = await asyncio.wait({second}, timeout=10)
            assert done, "the second caller waited on"
            with pytest.raises(ConnectionClosed, match="abandoned"):
                second.result()
            assert first.cancelled()
            assert p.ready_at(7) == 0.0
            await p.close()

    asyncio.run(main())
