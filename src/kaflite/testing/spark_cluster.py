"""A Spark standalone cluster on loopback for tests: one master and N workers, each a
JVM of its own started with PySpark's ``bin/spark-class``.

    with SparkStandalone(workers=2) as spark_cluster:
        session = spark_cluster.session("my-test")          # master=spark://127.0.0.1:<port>
        ...spark_cluster.kill_worker(0); spark_cluster.restart_worker(0)...

Everything is small (daemons of 256 MB, workers of one core and 512 MB) and lives in a
temporary directory that ``stop`` removes. Each worker starts a session of its own, so
``kill_worker`` SIGKILLs the worker JVM with its executor JVM and that executor's Python
workers, as if the machine had gone. The executors run this interpreter and import
kaflite from the tree this module came from (``PYTHONPATH``), installed or not.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkClusterError", "SparkStandalone", "free_port", "session_pids", "spark_home"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
SRC = str(Path(__file__).resolve().parents[2])     # the directory that holds kaflite


class SparkClusterError(RuntimeError):
    """The master or a worker did not start (the message ends with its log's tail)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """PySpark's own directory: it holds ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def python_path() -> str:
    return os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)


def session_pids(sid: int) -> list[int]:
    """The processes of session ``sid`` (from /proc; none where there is no /proc)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:       # state, ppid, pgrp, session
                pids.append(int(stat.parent.name))
    return pids


class SparkStandalone:
    """A master and ``workers`` workers; ``start`` waits until all are ALIVE."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "512m",
                 start_timeout: float = 90.0) -> None:
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.start_timeout = start_timeout
        self.home = spark_home()
        self.root = Path(tempfile.mkdtemp(prefix="kaflite-spark-standalone-"))
        self.port, self.webui_port = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.master_json_url = f"http://127.0.0.1:{self.webui_port}/json/"
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes] | None] = [None] * workers
        self._starts = 0
        self._webui_ports: list[int] = [0] * workers

    # -- processes ---------------------------------------------------------------------
    def _env(self, local_dirs: Path) -> dict[str, str]:
        env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOCAL_DIRS": str(local_dirs),
               "SPARK_WORKER_DIR": str(local_dirs / "work"),
               "SPARK_CONF_DIR": str(self.root / "conf"),
               "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": python_path()}
        env.pop("PYSPARK_DRIVER_PYTHON", None)
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        local_dirs = self.root / name
        (local_dirs / "work").mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{name}.log", "ab") as log:    # the child keeps its copy
            return subprocess.Popen([str(self.home / "bin" / "spark-class"), *args],
                                    env=self._env(local_dirs), stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def _start_worker(self, i: int) -> None:
        self._starts += 1
        name = f"worker-{i}-{self._starts}"
        self._webui_ports[i] = free_port()
        self._workers[i] = self._spawn(name, [
            WORKER_CLASS, "--host", "127.0.0.1", "--webui-port", str(self._webui_ports[i]),
            "--cores", str(self.cores), "--memory", self.memory,
            "--work-dir", str(self.root / name / "work"), self.master_url])

    def start(self) -> SparkStandalone:
        (self.root / "conf").mkdir(exist_ok=True)
        # The master's REST submission server listens on a fixed port (6066) otherwise.
        (self.root / "conf" / "spark-defaults.conf").write_text(
            "spark.master.rest.enabled false\n")
        try:
            self._master = self._spawn("master", [
                MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                "--webui-port", str(self.webui_port)])
            for i in range(self.workers):
                self._start_worker(i)
            self.wait_for_workers(self.workers)
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict[str, Any]:
        """The master's JSON view (workers, applications)."""
        with urllib.request.urlopen(self.master_json_url, timeout=5) as response:
            return dict(json.load(response))

    def alive_workers(self) -> int:
        """How many of the running worker processes the master lists as ALIVE."""
        try:
            workers = self.state().get("workers", [])
        except (OSError, ValueError):      # not listening yet, or an empty answer
            return 0
        alive = {str(w.get("webuiaddress", "")).rsplit(":", 1)[-1] for w in workers
                 if w.get("state") == "ALIVE"}
        return sum(1 for port, p in zip(self._webui_ports, self._workers, strict=True)
                   if p is not None and str(port) in alive)

    def wait_for_workers(self, count: int, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        while self.alive_workers() < count:
            for name, proc in [("master", self._master), *(
                    (f"worker {i}", p) for i, p in enumerate(self._workers))]:
                if proc is not None and proc.poll() is not None:
                    raise SparkClusterError(f"the {name} exited ({proc.returncode})"
                                            f"{self._log_tail()}")
            if time.monotonic() > deadline:
                raise SparkClusterError(f"{self.alive_workers()} of {count} workers ALIVE "
                                        f"after {timeout or self.start_timeout:g} s"
                                        f"{self._log_tail()}")
            time.sleep(0.25)

    def _log_tail(self) -> str:
        tails = [f"\n--- {p.name}:\n" + p.read_text(errors="replace")[-1500:]
                 for p in sorted(self.root.glob("*.log"))]
        return "".join(tails)

    def worker_pids(self) -> list[int | None]:
        """The workers' JVM process ids (None for a worker killed and not restarted)."""
        return [p.pid if p is not None and p.poll() is None else None
                for p in self._workers]

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker ``i``'s JVM, its executors and their Python workers: every process
        of the worker's session (PySpark's daemon leaves the worker's process group)."""
        proc = self._workers[i]
        if proc is None:
            return
        for pid in [proc.pid, *session_pids(proc.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait()
        self._workers[i] = None

    def restart_worker(self, i: int, wait: bool = True) -> None:
        """Worker ``i`` again (a new JVM, work directory); ``wait``: until all are ALIVE."""
        self.kill_worker(i)
        self._start_worker(i)
        if wait:
            self.wait_for_workers(self.workers)

    def stop(self) -> None:
        """Stop every process (workers first, then the master) and remove the files."""
        try:
            for i in range(len(self._workers)):
                self.kill_worker(i)
        finally:
            master, self._master = self._master, None
            if master is not None:
                master.terminate()
                try:
                    master.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    master.kill()
                    master.wait()
            shutil.rmtree(self.root, ignore_errors=True)

    # -- a driver ----------------------------------------------------------------------
    def session_conf(self) -> dict[str, str]:
        """Settings for a driver in this process: loopback, small memory, executors of
        one core that run this interpreter and see this source tree."""
        return {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.memory": "512m", "spark.executor.memory": self.memory,
                "spark.executor.cores": str(self.cores),
                "spark.cores.max": str(self.cores * self.workers),
                "spark.pyspark.python": sys.executable,
                "spark.executorEnv.PYTHONPATH": python_path(),
                "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                "spark.sql.streaming.stopTimeout": "30s"}

    def session(self, app_name: str = "kaflite-standalone", **conf: str) -> SparkSession:
        """A SparkSession on this cluster with kaflite's format registered."""
        from pyspark.sql import SparkSession

        from kaflite.spark.datasource import register

        builder = SparkSession.builder.master(self.master_url).appName(app_name)
        for key, value in {**self.session_conf(), **conf}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        # The context takes its executors' Python from PYSPARK_PYTHON, not from the conf.
        if not os.environ.get("PYSPARK_PYTHON"):
            session.sparkContext.pythonExec = sys.executable
        register(session)
        return session

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
