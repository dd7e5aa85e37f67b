"""``kaflite up`` in a subprocess, as a user starts it, for the CLI and README tests."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

__all__ = ["KafliteUp", "kaflite"]

READY = "Ctrl-C stops the cluster gracefully."


def kaflite(*args: str, stdin: str = "", env: dict[str, str] | None = None,
            cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run one ``kaflite`` command to completion (bounded)."""
    return subprocess.run([sys.executable, "-m", "kaflite.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


class KafliteUp:
    """Start ``kaflite up ARGS`` (or ``command``), wait (bounded) until it is ready, stop it
    with Ctrl-C."""

    def __init__(self, *args: str, cwd: Path | None = None,
                 env: dict[str, str] | None = None, timeout: float = 60,
                 command: list[str] | None = None, ready: str = READY) -> None:
        self.command = command or [sys.executable, "-m", "kaflite.cli", "up", *args]
        self.ready = ready
        self.cwd, self.timeout = cwd, timeout
        self.env = env if env is not None else dict(os.environ)
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self._out: queue.Queue[str | None] = queue.Queue()

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self._out.put(line.rstrip("\n"))
        self._out.put(None)

    def start(self) -> KafliteUp:
        self.proc = subprocess.Popen(
            self.command, cwd=self.cwd, env=self.env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()
        try:
            self.read_until(self.ready)
        except BaseException:
            self.stop()   # a start that failed still stops what it started
            raise
        return self

    def read_until(self, marker: str) -> list[str]:
        """Lines printed until one starts with ``marker``; fails on exit or timeout."""
        assert self.proc is not None
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"kaflite up: no {marker!r} in {self.lines}")
            try:
                line = self._out.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"kaflite up exited {self.proc.wait(10)}: {self.lines}")
            self.lines.append(line)
            if line.startswith(marker):
                return self.lines

    def value(self, prefix: str) -> str:
        """The rest of the first printed line starting with ``prefix``."""
        for line in self.lines:
            if line.startswith(prefix):
                return line[len(prefix):].split()[0]
        raise AssertionError(f"kaflite up printed no {prefix!r}: {self.lines}")

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reader.join(10)
        while not self._out.empty():
            line = self._out.get_nowait()
            if line is not None:
                self.lines.append(line)
        return self.proc.returncode

    def __enter__(self) -> KafliteUp:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
