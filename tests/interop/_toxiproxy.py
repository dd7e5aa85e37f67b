"""Shopify's toxiproxy on loopback, and a ``docker`` stand-in, for peers' test suites
written against a docker compose environment (IBM/sarama's functional tests).

``Toxiproxy`` runs ``toxiproxy-server`` with its HTTP API on a free loopback port and
the named proxies made at start (its ``-config`` file), each listening on a loopback
port and forwarding to an upstream address. The suite then drives it over that API
(disable a proxy, add a toxic, reset) as it would its own.

``DockerStandIn`` is an executable named ``docker`` in a directory of its own, to put
first on a suite's ``PATH``: ``docker compose stop kafka-N`` kills broker N of the
target (Apache Kafka's with SIGTERM, as docker does), ``docker compose start kafka-N``
restarts it (each a no-op when the broker is
already so, as for a container). The script asks this process over a loopback socket;
any other command it refuses, saying so, with status 1.
"""

from __future__ import annotations

import json
import re
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from types import TracebackType

from kaflite.testing import ApacheKafka, ClusterUnderTest

__all__ = ["DockerStandIn", "Toxiproxy", "free_port"]

API_WAIT_S = 10.0


def free_port() -> int:
    """A loopback port free when asked."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Toxiproxy:
    """``toxiproxy-server`` with ``proxies`` (name: (listen port, upstream address))."""

    def __init__(self, server: Path, proxies: dict[str, tuple[int, str]],
                 workdir: Path) -> None:
        self.server = server
        self.proxies = proxies
        self.workdir = workdir
        self.api_port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def log(self) -> Path:
        return self.workdir / "toxiproxy.log"

    def start(self) -> None:
        config = self.workdir / "toxiproxy.json"
        config.write_text(json.dumps([
            {"name": name, "listen": f"127.0.0.1:{port}", "upstream": upstream,
             "enabled": True} for name, (port, upstream) in self.proxies.items()]))
        self.api_port = free_port()
        with self.log.open("wb") as out:
            self._proc = subprocess.Popen(
                [str(self.server), "-host", "127.0.0.1", "-port", str(self.api_port),
                 "-config", str(config)], stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + API_WAIT_S
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"toxiproxy-server exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/proxies", timeout=2) as r:
                    if set(json.load(r)) >= set(self.proxies):
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"toxiproxy's API did not answer in {API_WAIT_S:g} s: "
                                   f"{self.log.read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> Toxiproxy:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_SCRIPT = """#!{python}
# kaflite's stand-in for `docker compose stop|start <service>`: asks the test process.
import socket, sys
with socket.create_connection(("127.0.0.1", {port})) as s:
    s.sendall(("\\t".join(sys.argv[1:]) + "\\n").encode())
    reply = s.makefile().read()
status, _, message = reply.partition(" ")
if message:
    print(message, file=sys.stdout if status == "0" else sys.stderr)
sys.exit(int(status))
"""
_SERVICE = re.compile(r"^kafka-(\d+)$")


class DockerStandIn:
    """A ``docker`` on ``PATH`` (``bin_dir``) whose compose stop and start kill and
    restart the target's brokers (``kafka-N`` is node N); ``calls`` records each."""

    def __init__(self, target: ClusterUnderTest, workdir: Path) -> None:
        self.target = target
        self.bin_dir = workdir / "docker-stand-in"
        self.calls: list[str] = []
        self._down: set[int] = set()
        self._lock = threading.Lock()
        self._server: socketserver.ThreadingTCPServer | None = None
        self._thread: threading.Thread | None = None

    def answer(self, argv: list[str]) -> tuple[int, str]:
        """The status and message for one ``docker`` command line."""
        self.calls.append(" ".join(argv))
        service = _SERVICE.match(argv[-1]) if len(argv) == 3 else None
        if argv[:1] != ["compose"] or argv[1:2] not in (["stop"], ["start"]) or not service:
            return 1, f"kaflite's docker stand-in does only compose stop|start kafka-N: {argv}"
        node = int(service.group(1))
        if node not in self.target.node_ids:
            return 1, f"no broker {node} in {self.target.name}"
        with self._lock:
            if argv[1] == "stop" and node not in self._down:
                if isinstance(self.target, ApacheKafka):
                    # as `docker compose stop`: SIGTERM (Kafka's controlled shutdown),
                    # SIGKILL after the grace period
                    self.target.shutdown(node)
                else:
                    self.target.kill(node)
                self._down.add(node)
            elif argv[1] == "start" and node in self._down:
                self.target.restart(node)
                self._down.discard(node)
        return 0, ""

    def start(self) -> None:
        stand_in = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                argv = self.rfile.readline().decode().rstrip("\n").split("\t")
                try:
                    status, message = stand_in.answer(argv)
                except Exception as exc:   # the suite sees it as docker's failure
                    status, message = 1, f"{type(exc).__name__}: {exc}"
                self.wfile.write(f"{status} {message}".encode())

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name="docker-stand-in")
        self._thread.start()
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        script = self.bin_dir / "docker"
        script.write_text(_SCRIPT.format(python=sys.executable, port=port))
        script.chmod(0o755)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> DockerStandIn:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
