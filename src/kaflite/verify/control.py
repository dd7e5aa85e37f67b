"""The cluster under test: an embedded 3-broker ``Cluster`` in a child process.

The cluster runs in its own process (``kaflite.verify._server``) so that the
nemesis can kill the whole of it with SIGKILL and start it again from its data
directory, as a machine crash would, and so that the brokers and the clients
under test do not share one interpreter lock. Every other fault goes through
the cluster's HTTP API, which calls ``cluster.faults`` on the cluster's loop.

The brokers listen on fixed loopback ports (``base_port + node id``, outside the
kernel's ephemeral range) so that clients find a restarted cluster where they
left it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import IO, Any, Self

__all__ = ["REMOVALS_FILE", "ClusterProcess", "ControlError", "free_ports"]

PORT_RANGE = (20000, 32000)  # below Linux's ephemeral range (32768-60999)


class ControlError(RuntimeError):
    """The cluster refused or could not apply a control request."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


def _bindable(port: int, reuse: bool = False) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if reuse:  # as asyncio's servers bind: TIME_WAIT connections do not count
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, rng: random.Random | None = None, attempts: int = 200) -> int:
    """The first of ``n`` consecutive loopback ports that are free now."""
    rng = rng or random.Random()
    for _ in range(attempts):
        base = rng.randrange(PORT_RANGE[0], PORT_RANGE[1] - n)
        if all(_bindable(base + i) for i in range(n)):
            return base
    raise RuntimeError(f"no {n} consecutive free ports in {PORT_RANGE}")


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _wait_gone(pid: int, timeout: float = 10) -> None:
    """Wait until ``pid`` (not our child: the cluster process's) no longer exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.02)


# Where the cluster process appends the members its coordinators removed (``_server``)
REMOVALS_FILE = "group-removals.jsonl"


class ClusterProcess:
    def __init__(self, data_dir: str | Path, brokers: int = 3,
                 config: dict[str, Any] | None = None, start_timeout: float = 60,
                 processes: bool = False) -> None:
        self.data_dir = Path(data_dir)
        self.processes = processes     # one OS process per broker (a broker kill is SIGKILL)
        self.brokers = brokers
        self.config = dict(config or {})
        self.start_timeout = start_timeout
        self.base_port = free_ports(brokers + 1)
        self.http_port = self.base_port + brokers
        self.token = secrets.token_urlsafe(24)   # the console token, the same across restarts
        self.proc: subprocess.Popen[str] | None = None
        self.crashes = 0
        self._log: IO[str] | None = None
        self._lock = threading.Lock()

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"127.0.0.1:{self.base_port + i}" for i in range(self.brokers))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    # -- the process -------------------------------------------------------------------
    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = open(self.data_dir / "cluster.log", "a", encoding="utf-8")  # noqa: SIM115
        args = [sys.executable, "-m", "kaflite.verify._server", "--data-dir",
                str(self.data_dir), "--brokers", str(self.brokers), "--base-port",
                str(self.base_port), "--http-port", str(self.http_port),
                f"--token={self.token}"]   # one argument: a token may begin with "-"
        for name, value in self.config.items():
            args += ["--config", f"{name}={value}"]
        if self.processes:
            args.append("--processes")
        proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=self._log, text=True)
        self.proc = proc
        line = self._ready_line(proc)
        if not line.startswith("{"):
            code = proc.poll()
            self.stop()
            why = (f"no ready line in {self.start_timeout:g} s" if code is None
                   else f"it exited with {code}")
            log = self.data_dir / "cluster.log"
            tail = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            raise RuntimeError(f"the cluster process did not start ({why}): {line!r}; "
                               f"the end of {log}:\n{tail}")
        return self

    def _ready_line(self, proc: subprocess.Popen[str]) -> str:
        out: list[str] = []
        stdout = proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: out.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(self.start_timeout)
        return out[0] if out else ""

    def stop(self) -> None:
        """Graceful: close its stdin, then terminate, then kill, each with a bound."""
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            if proc.stdout is not None:
                proc.stdout.close()
        if self._log is not None:
            self._log.close()
            self._log = None

    def removals(self) -> list[dict[str, Any]]:
        """Every member its coordinators removed without its asking, over all its lives
        (``kaflite.cluster.groups.removals``), oldest first."""
        path = self.data_dir / REMOVALS_FILE
        if not path.is_file():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):   # a line cut short by a SIGKILL
                out.append(json.loads(line))
        return sorted(out, key=lambda r: float(r["monotonic"]))

    def crash(self) -> None:
        """SIGKILL the whole cluster: nothing is flushed, handed over or closed."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        brokers = self._broker_pids(proc.pid) if self.processes else []
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        # Its broker processes (with --processes) die with it, all at once.
        for pid in brokers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in brokers:
            _wait_gone(pid)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        self.crashes += 1

    def _broker_pids(self, parent: int) -> list[int]:
        """The broker processes of the cluster process ``parent`` now (its children:
        a pid from earlier may belong to another process since)."""
        try:
            pids = [b["pid"] for b in self.view()["brokers"] if b.get("pid")]
        except (ControlError, RuntimeError, OSError):
            pids = []
        return [int(p) for p in pids if _parent_of(int(p)) == parent]

    def restart(self) -> None:
        """Start again from the data directory, on the same ports."""
        deadline = time.monotonic() + 30
        while not all(_bindable(self.base_port + i, reuse=True)
                      for i in range(self.brokers + 1)):
            if time.monotonic() > deadline:
                raise RuntimeError("the crashed cluster's ports did not come free")
            time.sleep(0.1)
        self.start()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- the HTTP API ------------------------------------------------------------------
    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                timeout: float = 60) -> Any:
        data = None
        if body is not None:
            data = json.dumps(body).encode()   # null is meant: a rule's "count": null is unlimited
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "X-Kaflite-Token": self.token})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error", exc.reason)
            except ValueError:
                message = exc.reason
            raise ControlError(exc.code, str(message)) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ControlError(0, f"cluster unreachable: {exc}") from None

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("POST", path, body or {})

    def view(self) -> dict[str, Any]:
        """Brokers and partitions (leader, ISR, replicas), as ``GET /cluster`` gives them."""
        result: dict[str, Any] = self.request("GET", "/cluster")
        return result

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        for t in self.view()["topics"]:
            if t["name"] == topic:
                parts: list[dict[str, Any]] = t["partitions"]
                return parts
        return []

    def remove_rule(self, rule_id: int) -> None:
        with contextlib.suppress(ControlError):
            self.request("DELETE", f"/faults/{rule_id}")

    def clear_rules(self) -> None:
        self.request("DELETE", "/faults")

    # -- the nemesis's faults (``kaflite.verify.targets.FaultTarget``) --------------------
    name = "kaflite"
    kinds: frozenset[str] | None = None       # every fault the nemesis knows
    left_out: Mapping[str, str] = MappingProxyType({})
    excluded_errors: Mapping[tuple[str, str], str] = MappingProxyType({})
    means: Mapping[str, str] = MappingProxyType({})   # each through the control API

    def broker_down(self, broker: int, how: str) -> None:
        self.post(f"/brokers/{broker}/{how}")          # kill or stop

    def broker_up(self, broker: int) -> None:
        self.post(f"/brokers/{broker}/restart")

    def isolate(self, broker: int, isolated: bool) -> None:
        self.post(f"/brokers/{broker}/isolate", {"isolated": isolated})

    def move_leader(self, topic: str, partition: int, to: int | None) -> int:
        return int(self.post("/leaders/move", {"topic": topic, "partition": partition,
                                               "to": to})["leader"])

    def move_coordinator(self, key: str, key_type: str, to: int | None) -> int:
        body: dict[str, Any] = {"key": key, "type": key_type}
        if to is not None:
            body["to"] = to
        return int(self.post("/coordinators/move", body)["coordinator"])

    def add_rule(self, kind: str, body: dict[str, Any]) -> int:
        """A fault rule (``error``, ``delay``, ``throttle`` or ``drop``); its id."""
        return int(self.post(f"/faults/{kind}", body)["id"])

    def drop_connections(self, broker: int) -> int:
        return int(self.post("/faults/drop", {"broker": broker})["dropped"])

    def heal(self) -> None:
        """Whatever the faults left: the cluster up, rules gone, brokers back and joined."""
        if not self.running:
            self.restart()
        self.clear_rules()
        for b in self.view()["brokers"]:
            if b.get("isolated"):
                self.isolate(int(b["id"]), False)
            if not b.get("running"):
                self.broker_up(int(b["id"]))
