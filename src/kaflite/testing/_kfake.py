"""franz-go's fake cluster (``pkg/kfake``) as a ``ClusterUnderTest``.

kfake is a Kafka written in Go for franz-go's own tests: every broker in one process,
sharing one copy of the data (a partition has a leader, but nothing is replicated).
``tools/ensure_kfake.sh`` builds the small driver in ``tests/interop/kfake`` with Go;
pass the binary it prints. The driver starts ``kfake.NewCluster`` on loopback ports,
prints one ``ready`` line and then answers one line per command on its stdin, so this
class talks to it over two pipes (see the driver's doc comment for the commands). It
exits when its stdin closes, so it cannot outlive this process.

What kfake offers maps onto the interface as follows:

* ``kill`` is kfake's ``RemoveNode`` (the listener closes; the driver also cuts that
  broker's open connections, as a crash would) and the remaining brokers take over its
  partitions. The data lives on in the process, so ``restart`` (``AddNode`` with the
  same id and port) brings back a broker that sees everything. kfake refuses to remove
  its last broker, and its controller (the last node, fixed at start) cannot go either:
  both raise ``Unsupported``.
* ``move_leader`` is ``MoveTopicPartition``: any live broker can lead any partition.
"""

from __future__ import annotations

import contextlib
import queue
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from kaflite.testing._probe import brokers_seen, run_blocking
from kaflite.testing._target import ClusterUnderTest, TargetUnavailable, Unsupported

__all__ = ["KFake"]

START_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 10.0
STOP_GRACE_S = 10.0
PROBE_INTERVAL_S = 0.1


def _addresses(fields: list[str]) -> dict[int, str]:
    """``node=host:port`` fields as a mapping."""
    out: dict[int, str] = {}
    for field in fields:
        node, _, address = field.partition("=")
        out[int(node)] = address
    return out


class KFake(ClusterUnderTest):
    """``brokers`` kfake brokers (ids 0..n-1, as kfake numbers them) in one Go process."""

    def __init__(self, binary: str | Path, brokers: int = 3,
                 start_timeout: float = START_TIMEOUT_S) -> None:
        self.binary = Path(binary)
        if not self.binary.is_file():
            raise TargetUnavailable(f"{binary} is missing: run tools/ensure_kfake.sh")
        self.name = f"kfake-{brokers}"
        self._count = brokers
        self.start_timeout = start_timeout
        #: every broker's address by node id, kept across kill and restart
        self.addresses: dict[int, str] = {}
        #: the node kfake sends CreateTopics and the like to (it never moves)
        self.controller: int | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: Path | None = None
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    @property
    def node_ids(self) -> list[int]:
        return sorted(self.addresses) or list(range(self._count))

    @property
    def bootstrap_servers(self) -> str:
        if not self.addresses:
            raise RuntimeError(f"{self.name} is not running")
        return ",".join(self.addresses[n] for n in self.node_ids)

    def start(self) -> None:
        if self._proc is not None:
            raise RuntimeError(f"{self.name} is already started")
        handle, name = tempfile.mkstemp(prefix="kaflite-kfake-", suffix=".err")
        self._stderr = Path(name)
        with open(handle, "wb") as err:
            self._proc = subprocess.Popen(
                [str(self.binary), "-brokers", str(self._count)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, text=True, bufsize=1)
        self._reader = threading.Thread(target=self._read, args=(self._proc,), daemon=True,
                                        name=f"{self.name}-stdout")
        self._reader.start()
        ready = self._line(self.start_timeout).split()
        if not ready or ready[0] != "ready":
            raise RuntimeError(f"{self.name} did not start: {' '.join(ready)} {self._why()}")
        self.controller = int(ready[1])
        self.addresses = _addresses(ready[2:])
        self._wait_listed(self.node_ids)

    def _read(self, proc: subprocess.Popen[str]) -> None:
        """The driver's stdout, line by line, into the queue; None at its end."""
        assert proc.stdout is not None
        for line in proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _line(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"{self.name} did not answer in {timeout:g} s") from None
        if line is None:
            raise RuntimeError(f"{self.name} exited: {self._why()}")
        return line

    def _why(self) -> str:
        if self._stderr is None:
            return ""
        try:
            return self._stderr.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def command(self, *words: object) -> str:
        """Send one command to the driver; what follows its ``ok``. Raises
        ``Unsupported`` with kfake's reason, or RuntimeError on an error."""
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise RuntimeError(f"{self.name} is not running")
        with self._lock:
            proc.stdin.write(" ".join(map(str, words)) + "\n")
            proc.stdin.flush()
            verdict, _, rest = self._line(REPLY_TIMEOUT_S).partition(" ")
        if verdict == "ok":
            return rest
        if verdict == "unsupported":
            raise Unsupported(f"{self.name}: {rest}")
        raise RuntimeError(f"{self.name}: {' '.join(map(str, words))}: {rest}")

    def live(self) -> list[int]:
        """The brokers that listen now."""
        return sorted(_addresses(self.command("nodes").split()))

    def _wait_listed(self, ask: list[int]) -> None:
        """Until a Metadata request to each broker in ``ask`` lists every live broker."""
        deadline = time.monotonic() + self.start_timeout
        pending = list(ask)
        seen: set[int] | None = None
        while pending:
            want = set(self.live())
            for node_id in list(pending):
                seen = run_blocking(brokers_seen(self.addresses[node_id]), 10.0)
                if seen == want:
                    pending.remove(node_id)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: nodes {pending} list {seen}, not "
                                   f"{sorted(want)} after {self.start_timeout:g} s")
            time.sleep(PROBE_INTERVAL_S)

    def stop(self) -> None:
        """Close the driver's stdin (it closes the cluster and exits); SIGKILL it after
        the grace period."""
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):   # it already exited: a broken pipe
                    proc.stdin.close()
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_GRACE_S)
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.join(STOP_GRACE_S)    # the process is gone: its stdout ends
            if proc.stdout is not None and (reader is None or not reader.is_alive()):
                proc.stdout.close()
        self.addresses = {}
        self.controller = None
        self._lines = queue.Queue()
        stderr, self._stderr = self._stderr, None
        if stderr is not None:
            stderr.unlink(missing_ok=True)

    def unkillable(self) -> dict[int, str]:
        if self.controller is None:
            return {}
        reasons = {self.controller: "kfake's controller, which it never moves"}
        if len(self.node_ids) == 1:
            reasons[self.node_ids[0]] = "kfake's only broker"
        return reasons

    def kill(self, node_id: int) -> None:
        self.command("kill", node_id)

    def restart(self, node_id: int) -> None:
        self.command("restart", node_id)
        self._wait_listed(self.live())

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader as kfake has it (-1 if it does not exist)."""
        return int(self.command("leader", topic, partition))

    def move_leader(self, topic: str, partition: int, to: int | None = None) -> int:
        if to is None:
            current = self.leader(topic, partition)
            to = next((n for n in self.live() if n != current), None)
            if to is None:
                raise Unsupported(f"{self.name}: no other live broker can lead "
                                  f"{topic}-{partition}")
        return int(self.command("move", topic, partition, to))

    def pids(self) -> list[int]:
        """The one Go process every broker lives in."""
        return [self._proc.pid] if self._proc is not None else []
