"""The metadata log's background thread: fsyncs, never on the event loop.

Theory of operation
-------------------
The event loop writes each metadata batch with one ``os.write`` (into the page
cache) and asks this worker to fsync the file. Requests coalesce: however many
batches were appended while an fsync ran, the next fsync covers them all (group
commit), so a burst of changes costs one or two fsyncs, none of them waited for
on the loop. Other jobs run here too, after any pending fsync (``drain``).

The thread starts on the first request and ends after ``IDLE_S`` without work,
so an idle controller, or one a test forgot to close, holds no thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path

__all__ = ["Worker"]

log = logging.getLogger("kaflite.cluster.metalog")
IDLE_S = 2.0


class Worker:
    def __init__(self, name: str) -> None:
        self.name = name
        self._cond = threading.Condition()
        self._sync: Path | None = None
        self._jobs: deque[Callable[[], None]] = deque()
        self._thread: threading.Thread | None = None
        self.fsyncs = 0

    def sync(self, path: Path) -> None:
        """fsync ``path`` soon (after the appends made so far)."""
        with self._cond:
            self._sync = path
            self._wake()

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
            self._wake()

    def drain(self, timeout: float | None = None) -> bool:
        """Block until every request made so far is done (not for the event loop)."""
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def _wake(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()
        else:
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._sync is None and not self._jobs:
                    self._cond.wait(IDLE_S)
                    if self._sync is None and not self._jobs:
                        self._thread = None
                        return
                path, self._sync = self._sync, None
                job = self._jobs.popleft() if path is None and self._jobs else None
            try:
                if path is not None:
                    self._fsync(path)
                elif job is not None:
                    job()
            except Exception:   # the thread must go on serving the next requests
                log.exception("%s: background metadata work failed", self.name)

    def _fsync(self, path: Path) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:   # a segment a snapshot made obsolete, already removed
            return
        try:
            os.fsync(fd)
            self.fsyncs += 1
        finally:
            os.close(fd)
