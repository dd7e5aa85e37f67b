"""``Proxy``: the listeners, the upstream, the broker map and the sessions.

    async with Proxy("kafka-1:9092,kafka-2:9092", "127.0.0.1:19092") as proxy:
        ...   # clients bootstrap from proxy.bootstrap_servers

or, from synchronous code (its own event loop thread)::

    with Proxy(cluster.bootstrap_servers) as proxy:
        Producer({"bootstrap.servers": proxy.bootstrap_servers})

The proxy listens on its bootstrap address; a connection there goes to any
upstream bootstrap server. Each upstream broker gets a port of its own when the
proxy first sees it in a response (``BrokerMap``): a connection to that port
goes to that broker, so a client's connection to "broker 2" really ends at
broker 2.

``proxy.faults`` (``filters/rules.py``) takes kaflite's cluster fault rules at
runtime (errors, delays, throttles, dropped requests, scoped to an upstream broker
or not), and ``drop_connections(broker)`` closes the client connections to one
broker now: what ``kaflite.verify`` injects into a cluster that has no such hooks.

``naive=True`` is the shared VIP of the seeds: every broker is advertised at
the one bootstrap address (as brokers whose ``advertised.listeners`` name a load
balancer), and each connection goes to an upstream broker drawn at random, as a
Kubernetes Service in front of the brokers picks a backend (kube-proxy's
iptables mode draws one per connection). A client then sends a partition's
Produce or Fetch to whichever broker its connection happens to reach, and gets
NOT_LEADER_OR_FOLLOWER from the others. It exists to be shown, beside the real
thing. (A round-robin showed it less often than chance would: librdkafka opens
its broker connections in a similar order each run, and in 8 runs of 20 that
order met the proxy's turn exactly, each connection on its own broker.)

``sni_suffix="px.example.com"`` (with TLS) routes by SNI on the one port: broker
n is advertised as ``broker-<n>.px.example.com`` at the bootstrap port, and a
connection goes to the broker its TLS ClientHello names (``SSLContext``'s
``sni_callback``; any other name, or none, is a bootstrap connection). The
certificate must cover ``*.px.example.com``.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import socket
import ssl
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from kaflite._loop import LoopThread
from kaflite.cluster.observe import ClientSnapshot, ConnectionSnapshot
from kaflite.protocol.framing import DEFAULT_MAX_FRAME_SIZE
from kaflite.proxy.filters.base import Filter, FilterChain
from kaflite.proxy.filters.rules import RulesFilter
from kaflite.proxy.mapping import BrokerMap
from kaflite.proxy.metrics import ProxyMetrics
from kaflite.proxy.registry import ProxyRegistry
from kaflite.proxy.request_log import ProxyRequestLog
from kaflite.proxy.sasl import ProxySasl, UpstreamSasl
from kaflite.proxy.session import Session

if TYPE_CHECKING:
    from kaflite.proxy.http import HttpServer

__all__ = ["Proxy", "parse_address"]

T = TypeVar("T")


def parse_address(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


class Proxy:
    """A protocol-aware Kafka proxy in front of any Kafka-compatible cluster."""

    def __init__(self, upstream: str, listen: str = "127.0.0.1:0", *, naive: bool = False,
                 filters: Sequence[Filter] = (), advertised_host: str | None = None,
                 broker_port_base: int = 0, http_port: int | None = None,
                 ssl_context: ssl.SSLContext | None = None,
                 upstream_ssl: ssl.SSLContext | None = None,
                 sasl: ProxySasl | None = None, upstream_sasl: UpstreamSasl | None = None,
                 sni_suffix: str | None = None,
                 max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
                 connect_timeout_s: float = 10.0,
                 request_log: bool | str = False,
                 request_log_config: Mapping[str, object] | None = None) -> None:
        self.bootstrap = [parse_address(a) for a in upstream.split(",") if a.strip()]
        if not self.bootstrap:
            raise ValueError("no upstream bootstrap server")
        self.listen_host, self.listen_port = parse_address(listen)
        self.naive = naive
        # kaflite's fault rules, added and removed at runtime (``filters/rules.py``): last
        # in the chain, where a broker would see the request
        self.faults = RulesFilter()
        self.filters = FilterChain([*filters, self.faults])
        self.ssl_context = ssl_context
        self.upstream_ssl = upstream_ssl
        self.sni_suffix = sni_suffix.strip(".").lower() if sni_suffix else None
        self._sni_names: weakref.WeakKeyDictionary[ssl.SSLObject | ssl.SSLSocket, str] = \
            weakref.WeakKeyDictionary()
        if self.sni_suffix is not None:
            if ssl_context is None or naive:
                raise ValueError("SNI routing needs TLS to the clients, and no --naive")
            self._sni_host = re.compile(r"broker-(\d+)\." + re.escape(self.sni_suffix))
            ssl_context.sni_callback = self._on_sni
        self.sasl = sasl                    # ends the clients' SASL here
        self.upstream_sasl = upstream_sasl  # the proxy's own login upstream
        self.security_name = ("SASL_" if sasl is not None else "") + (
            "SSL" if ssl_context is not None else "PLAINTEXT")
        self.max_frame_size = max_frame_size
        # A fetch response may be larger than any request a client sends.
        self.max_upstream_frame = max(max_frame_size, DEFAULT_MAX_FRAME_SIZE)
        self.connect_timeout_s = connect_timeout_s
        self.http_port = http_port
        self.registry = ProxyRegistry()
        self.metrics = ProxyMetrics(self.registry)
        self.brokers = BrokerMap(advertised_host or self.listen_host, self._open_listener,
                                 broker_port_base,
                                 None if self.sni_suffix is None else self.sni_host)
        self.advertised: dict[int, tuple[int, int]] = {}   # upstream's ApiVersions
        self.sessions: set[Session] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.servers: list[asyncio.Server] = []
        self.node_ports: dict[int, int] = {}
        self.http: HttpServer | None = None
        self._rr = itertools.count()
        self._draw = random.Random()    # naive mode's backend per connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: LoopThread | None = None
        self._bound_port = 0
        # the request log (kaflite.proxy.request_log): True writes it to the upstream
        # cluster, a string to the cluster with those bootstrap servers
        self.request_log: ProxyRequestLog | None = None
        if request_log:
            self.request_log = ProxyRequestLog(
                upstream if request_log is True else str(request_log), request_log_config)

    # -- addresses ------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return f"{self.brokers.advertised_host}:{self._bound_port}"

    @property
    def port(self) -> int:
        return self._bound_port

    @property
    def http_url(self) -> str | None:
        return None if self.http is None else self.http.url

    # -- SNI routing ----------------------------------------------------------------------
    def sni_host(self, node_id: int) -> str:
        return f"broker-{node_id}.{self.sni_suffix}"

    def _on_sni(self, obj: ssl.SSLObject | ssl.SSLSocket, name: str | None,
                ctx: ssl.SSLContext) -> None:
        if name:
            self._sni_names[obj] = name

    def sni_node(self, obj: object) -> int | None:
        """The broker a TLS connection's server name asks for (None: bootstrap)."""
        if not isinstance(obj, ssl.SSLObject | ssl.SSLSocket):
            return None
        found = self._sni_host.fullmatch(self._sni_names.pop(obj, "").lower())
        return int(found.group(1)) if found else None

    def targets_for(self, node_id: int | None) -> list[tuple[str, int, int | None]]:
        """Where a session for ``node_id`` connects upstream (first that answers)."""
        if self.naive:
            known = sorted(self.brokers.upstream.items())
            if known:
                node, (host, port) = self._draw.choice(known)
                return [(host, port, node)]
        elif node_id is not None:
            found = self.brokers.upstream_of(node_id)
            return [] if found is None else [(found[0], found[1], node_id)]
        start = next(self._rr) % len(self.bootstrap)
        order = self.bootstrap[start:] + self.bootstrap[:start]
        return [(host, port, None) for host, port in order]

    # -- listeners ------------------------------------------------------------------------
    def _bind(self, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.listen_host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.listen_host, port))
            sock.listen(512)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        return sock

    def _serve(self, sock: socket.socket, node_id: int | None) -> None:
        loop = self._loop
        assert loop is not None

        async def serve() -> None:
            server = await loop.create_server(lambda: Session(self, node_id).downstream,
                                              sock=sock, ssl=self.ssl_context)
            self.servers.append(server)

        task = loop.create_task(serve())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def _open_listener(self, node_id: int) -> int:
        """Bind node ``node_id``'s port now (its answer must name it); serve it soon."""
        if self.naive or self.sni_suffix is not None:   # one port for every broker
            return self._bound_port
        base = self.brokers.broker_port_base
        try:
            sock = self._bind(base + node_id if base else 0)
        except OSError:   # base + node id is taken (or out of range): any free port
            sock = self._bind(0)
        port = int(sock.getsockname()[1])
        self.node_ports[node_id] = port
        self._serve(sock, node_id)
        return port

    # -- lifecycle (async) ----------------------------------------------------------------
    async def start(self) -> Proxy:
        self._loop = asyncio.get_running_loop()
        sock = self._bind(self.listen_port)
        self._bound_port = int(sock.getsockname()[1])
        if self.brokers.broker_port_base == 0 and self.listen_port and not self.naive \
                and self.sni_suffix is None:
            self.brokers.broker_port_base = self.listen_port + 1
        server = await self._loop.create_server(lambda: Session(self, None).downstream,
                                                sock=sock, ssl=self.ssl_context)
        self.servers.append(server)
        if self.request_log is not None:
            await self.request_log.start()
        if self.http_port is not None:
            from kaflite.proxy.http import HttpServer

            self.http = HttpServer(self, self.listen_host, self.http_port)
            await self.http.start()
        return self

    async def stop(self) -> None:
        if self.http is not None:
            await self.http.stop()
            self.http = None
        for server in self.servers:
            server.close()
        for session in list(self.sessions):
            session.close()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for server in self.servers:
            await server.wait_closed()
        self.servers.clear()
        self.filters.close()
        if self.request_log is not None:   # what is buffered is written, then it stops
            await self.request_log.close()

    async def __aenter__(self) -> Proxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- what it knows --------------------------------------------------------------------
    def connections(self, client_id: str | None = None, broker: int | None = None,
                    include_closed: bool = False) -> list[ConnectionSnapshot]:
        return self._call(lambda: self.registry.connections(client_id, broker,
                                                            include_closed))

    def clients(self) -> list[ClientSnapshot]:
        return self._call(self.registry.clients)

    def drop_connections(self, broker: int | None = None, client_id: str | None = None
                         ) -> int:
        """Close the client connections to upstream node ``broker`` (any, by default) of
        ``client_id`` (any) now, as a broker's ``drop_connections`` fault does: how many."""
        def drop() -> int:
            hit = [s for s in self.sessions if not s.closed
                   and (broker is None or s.reached_node() == broker)
                   and (client_id is None or s.record.client_id == client_id)]
            for session in hit:
                session.fail(f"dropped (a fault on broker {broker})")
            return len(hit)

        return self._call(drop)

    def _call(self, fn: Callable[[], T]) -> T:
        thread = self._thread
        if thread is None or thread.in_loop():
            return fn()

        async def call() -> T:
            return fn()

        return thread.run(call(), 30)

    # -- sync façade ----------------------------------------------------------------------
    def __enter__(self) -> Proxy:
        self._thread = LoopThread("kaflite-proxy")
        self._loop = self._thread.loop
        self._thread.run(self.start(), 30)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._thread is not None
        try:
            self._thread.run(self.stop(), 30)
        finally:
            self._thread.stop()
            self._thread = None
