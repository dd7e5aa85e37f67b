"""A TCP forwarder: one stable address in front of servers that come and go.

What a load balancer or a DNS name is in front of a real Kafka cluster: clients
bootstrap through it, and whoever runs the cluster may point it somewhere else.
Each accepted connection is piped to the first of the current targets that
accepts a connection (in turn, starting one further each time), byte for byte, in
both directions, until either side closes. ``repoint`` changes the targets and
closes the connections piped to the old ones, as a load balancer does when the
servers behind it are gone.

It listens where it is told (loopback by default) and knows nothing of Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

__all__ = ["Forwarder"]

_CHUNK = 1 << 16


class Forwarder:
    def __init__(self, targets: Sequence[tuple[str, int]], host: str = "127.0.0.1",
                 port: int = 0, connect_timeout_s: float = 5.0) -> None:
        self.targets = list(targets)
        self.host = host
        self.port = port
        self.connect_timeout_s = connect_timeout_s
        self.accepted = 0          # connections accepted
        self.refused = 0           # ... closed at once: no target accepted them
        self._next = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: dict[asyncio.Task[None], list[asyncio.StreamWriter]] = {}

    @property
    def address(self) -> str:
        """``host:port`` to give clients as ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    async def start(self) -> Forwarder:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def repoint(self, targets: Sequence[tuple[str, int]]) -> int:
        """Forward new connections to ``targets``; close those open now. Returns how
        many were closed."""
        self.targets = list(targets)
        self._next = 0
        return self.drop_connections()

    def drop_connections(self) -> int:
        closed = 0
        for writers in list(self._writers.values()):
            for w in writers:
                w.close()
            closed += 1
        return closed

    @property
    def open_connections(self) -> int:
        return len(self._writers)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        self._writers[task] = [writer]
        try:
            upstream = await self._connect()
            if upstream is None:
                self.refused += 1
                return
            up_reader, up_writer = upstream
            self._writers[task].append(up_writer)
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            for w in self._writers.pop(task, []):
                w.close()
            self._pipes.discard(task)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        targets = self.targets
        for i in range(len(targets)):
            host, port = targets[(self._next + i) % len(targets)]
            try:
                async with asyncio.timeout(self.connect_timeout_s):
                    conn = await asyncio.open_connection(host, port)
            except (OSError, TimeoutError):
                continue
            self._next = (self._next + i + 1) % len(targets)
            return conn
        return None

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self.drop_connections()
        pipes = list(self._pipes)
        for task in pipes:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*pipes, return_exceptions=True)


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until end of stream or an error on either side, then close ``dst``."""
    try:
        while data := await src.read(_CHUNK):
            dst.write(data)
            await dst.drain()
    except (OSError, ConnectionError):
        pass
    finally:
        dst.close()
