"""The console of an embedded cluster, served on loopback for the length of a ``with``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kaflite.cluster import Cluster
from kaflite.console import ConsoleServer, EmbeddedBackend

Console = ConsoleServer


@contextmanager
def serve_console(cluster: Cluster) -> Iterator[ConsoleServer]:
    async def start() -> ConsoleServer:
        return await ConsoleServer(EmbeddedBackend(cluster), "127.0.0.1", 0).start()

    server = cluster.call(start())
    try:
        yield server
    finally:
        cluster.call(server.stop())
