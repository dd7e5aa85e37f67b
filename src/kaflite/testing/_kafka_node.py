"""One Apache Kafka KRaft node (broker and controller in one JVM), run from Maven's jars.

A node owns a directory: ``server.properties``, its log dir ``data/``, the JVM's own
output ``jvm.out`` (startup failures, fatal errors) and the broker's WARN log
``server.log`` (log4j2, configured by ``log4j2.properties`` beside ``libs/``). Its
ports are chosen once by the cluster and kept across ``kill``/``start``, so clients
and the other voters find it again, as they would a real restarted host.

The JVM flags are sized for a 2-core machine that runs three nodes and the tests: a
small heap, the serial collector (no GC threads to compete with the brokers) and C1
only (``TieredStopAtLevel=1``: most of a short-lived broker's CPU at startup is JIT).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kaflite.testing._target import TargetUnavailable

__all__ = ["JVM_OPTS", "KafkaNode", "format_nodes", "java_executable"]

JVM_OPTS = ("-Xms256m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true")
FORMAT_TIMEOUT_S = 60.0
STOP_GRACE_S = 10.0
KILL_WAIT_S = 10.0


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` when set, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise TargetUnavailable("java is not installed (Apache Kafka needs a Java 17+ runtime)")
    return java


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} is missing)"
    return "\n".join(text[-lines:])


def _escaped(value: str) -> str:
    """A value as java.util.Properties reads it back: a PEM given inline
    (``ssl.keystore.key``) spans lines."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


@dataclass
class KafkaNode:
    """The ``node.id``, the two loopback ports and the directory of one KRaft node."""

    node_id: int
    broker_port: int
    controller_port: int
    directory: Path
    libs: Path
    props: Mapping[str, str] = field(default_factory=dict)
    #: every listener's port, by listener name (PLAINTEXT and CONTROLLER included)
    ports: Mapping[str, int] = field(default_factory=dict)
    #: the JVM's flags (heap, collector, JIT); the default suits tests on 2 cores
    jvm_opts: Sequence[str] = JVM_OPTS
    proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    @property
    def jvm_output(self) -> Path:
        return self.directory / "jvm.out"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs."""
        return self.proc.pid if self.running and self.proc is not None else None

    def _java(self, main: str, *args: str) -> list[str]:
        log4j = self.libs.parent / "log4j2.properties"
        return [java_executable(), *self.jvm_opts, f"-Dlog4j2.configurationFile={log4j}",
                f"-Dkaflite.kafka.log={self.log_file}", "-cp", f"{self.libs}/*", main, *args]

    def write_properties(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "data").mkdir(exist_ok=True)
        text = "".join(f"{k}={_escaped(v)}\n" for k, v in self.props.items())
        self.properties_file.write_text(text)

    def format_command(self, cluster_id: str) -> list[str]:
        """KRaft refuses to start on an unformatted log dir. With static
        ``controller.quorum.voters`` the format takes no quorum flag."""
        # "--cluster-id=<id>" in one word: a URL-safe base64 id may begin with '-', which
        # the tool's argument parser would take for an option (1 start in 64 failed so)
        return self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                          "--config", str(self.properties_file))

    def start(self) -> None:
        """Launch the JVM (not waiting for it to serve: the cluster probes that)."""
        if self.running:
            return
        out = self.jvm_output.open("ab")
        try:
            # A session of its own: a SIGKILL is for this JVM alone, and a Ctrl-C at the
            # test runner does not reach it before the fixture's teardown does.
            self.proc = subprocess.Popen(
                self._java("kafka.Kafka", str(self.properties_file)),
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.directory, start_new_session=True)
        finally:
            out.close()

    def kill(self) -> None:
        """SIGKILL: no controlled shutdown, no flush; what a crashed host leaves."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL)
        proc.wait(KILL_WAIT_S)

    def terminate(self) -> None:
        """SIGTERM, Kafka's clean shutdown (it runs a JVM shutdown hook)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_or_kill(self, timeout: float = STOP_GRACE_S) -> None:
        """Wait for a terminated node to exit; SIGKILL it if it is still there."""
        proc = self.proc
        if proc is None:
            return
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def exited_why(self) -> str:
        """Why the JVM is gone: its exit status and the end of its logs."""
        code = self.proc.returncode if self.proc is not None else None
        return (f"Kafka node {self.node_id} exited with status {code}\n"
                f"--- {self.jvm_output.name} ---\n{_tail(self.jvm_output)}\n"
                f"--- {self.log_file.name} ---\n{_tail(self.log_file)}")


def format_nodes(nodes: list[KafkaNode], cluster_id: str) -> None:
    """Format every node's log dir, the JVMs in parallel (each is a 1-2 s start)."""
    procs = [(node, subprocess.Popen(node.format_command(cluster_id), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
             for node in nodes]
    failures = []
    for node, proc in procs:
        try:
            out, _ = proc.communicate(timeout=FORMAT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if proc.returncode != 0:
            failures.append(f"node {node.node_id}: status {proc.returncode}\n"
                            + out.decode(errors="replace")[-3000:])
    if failures:
        raise RuntimeError("kafka.tools.StorageTool format failed:\n" + "\n".join(failures))
