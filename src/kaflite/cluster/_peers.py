"""A broker's client connections to the other brokers, one per broker, opened on first
use over the inter-broker listener (with its TLS and SASL): what the transaction
coordinator's marker channel and the share-partition leaders' persister use."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from kaflite.cluster.acl import inter_broker
from kaflite.net.connection import BrokerConnection, ConnectionClosed

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["PeerConnections"]


class PeerConnections:
    def __init__(self, broker: Broker, client_id: str, request_timeout_ms: int = 30_000) -> None:
        self.broker = broker
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._conns: dict[int, BrokerConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}
        self.closed = False

    def close(self) -> None:
        self.closed = True
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def drop(self, node_id: int) -> None:
        """Forget a connection that failed (the next request opens a new one)."""
        stale = self._conns.pop(node_id, None)
        if stale is not None:
            with contextlib.suppress(Exception):   # already broken
                stale.close()

    async def connection(self, node_id: int) -> BrokerConnection:
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        async with self._opening.setdefault(node_id, asyncio.Lock()):
            conn = self._conns.get(node_id)
            if conn is not None and conn.connected:
                return conn
            info = self.broker.controller.brokers.get(node_id)
            if info is None or not info.alive:
                raise ConnectionClosed(f"broker {node_id} is not alive")
            address = info.endpoint(self.broker.inter_broker_listener)
            if address is None:
                raise ConnectionClosed(f"broker {node_id} has no inter-broker listener")
            tls, sasl = self.broker.inter_broker_security()
            conn = inter_broker(await BrokerConnection(
                *address, client_id=self.client_id, ssl_context=tls, sasl=sasl,
                node_id=node_id, request_timeout_ms=self.request_timeout_ms).open())
            if self.closed:
                conn.close()
                raise ConnectionClosed(f"{self.client_id} is closed")
            self._conns[node_id] = conn
            return conn
