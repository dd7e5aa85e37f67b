"""Any ``ClusterUnderTest`` behind ``kaflite proxy``, whose filter chain injects the broker
outages that the target cannot inject itself.

Tansu keeps its data only in memory, so a real kill loses it; kfake's controller cannot
be removed. Behind the proxy, ``kill(n)`` cuts every client connection to broker ``n``
and closes each new one at its first request (the ``Outage`` filter), and ``restart(n)``
lets them through again. The broker itself never stops, so its data is all there
afterwards (``restart_keeps_data``): this is a broker the clients cannot reach, as
after a crash or a network partition, not a crash of the broker's process. The clients
are pointed at the proxy; ``inner`` is the target behind it.
"""

from __future__ import annotations

from kaflite.proxy import Exchange, Filter, Proxy
from kaflite.testing._target import ClusterUnderTest

__all__ = ["Outage", "Proxied"]


class Outage(Filter):
    """Closes the client connections to the brokers in ``down`` at their next request.

    A bootstrap connection (the proxy does not know which broker it reaches) is closed
    while every broker is down. The sets are changed from another thread; a request sees
    either the old or the new one, both whole.
    """

    name = "outage"

    def __init__(self) -> None:
        self.down: frozenset[int] = frozenset()
        self.every: frozenset[int] = frozenset()
        self.closed = 0

    def wants(self, api_key: int, version: int) -> bool:
        return bool(self.down)

    def on_request(self, exchange: Exchange) -> None:
        node = exchange.node_id
        if (node in self.down) if node is not None else (self.down >= self.every):
            exchange.close = True
            self.closed += 1


class Proxied(ClusterUnderTest):
    """``inner`` behind a kaflite proxy on a loopback port; start and stop take both."""

    def __init__(self, inner: ClusterUnderTest) -> None:
        self.inner = inner
        self.name = f"{inner.name}+proxy"
        self.outage = Outage()
        self._proxy: Proxy | None = None

    @property
    def proxy(self) -> Proxy:
        if self._proxy is None:
            raise RuntimeError(f"{self.name} is not running")
        return self._proxy

    @property
    def node_ids(self) -> list[int]:
        return self.inner.node_ids

    @property
    def bootstrap_servers(self) -> str:
        return self.proxy.bootstrap_servers

    def start(self) -> None:
        self.inner.start()
        self.outage.every = frozenset(self.inner.node_ids)
        proxy = Proxy(self.inner.bootstrap_servers, filters=[self.outage])
        proxy.__enter__()
        self._proxy = proxy

    def stop(self) -> None:
        proxy, self._proxy = self._proxy, None
        try:
            if proxy is not None:
                proxy.__exit__(None, None, None)
        finally:
            self.inner.stop()

    def kill(self, node_id: int) -> None:
        """Cut broker ``node_id`` off from the clients: its open connections now, each
        new one at its first request."""
        if node_id not in self.node_ids:
            raise ValueError(f"{self.name} has no node {node_id}")
        self.outage.down = self.outage.down | {node_id}
        proxy = self.proxy

        def cut() -> None:
            for session in list(proxy.sessions):
                if session.node_id == node_id or (session.node_id is None
                                                  and self.outage.down >= self.outage.every):
                    session.close()

        proxy._call(cut)

    def restart(self, node_id: int) -> None:
        """Let the clients reach broker ``node_id`` again."""
        self.outage.down = self.outage.down - {node_id}

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        return self.inner.move_leader(topic, partition, to)

    def pids(self) -> list[int]:
        return self.inner.pids()
