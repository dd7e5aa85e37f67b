"""fsync later, off the event loop: for checkpoints rewritten by the hundred at once.

A leader change rewrites the partition's ``leader-epoch-checkpoint``. When a
broker dies, every partition it led elects a new leader at the same moment, and
a broker that starts opens every partition's log; with an fsync of the file and
one of its directory each time, thousands of partitions held one event loop for
seconds (issue 36: 5,000 partitions, a broker kill took 8.5 s of the loop that
every broker of the cluster shares, the checkpoint writes a third of it). As
Kafka since 3.7 (KAFKA-15046: the leader-epoch checkpoint is written without
fsync on the request path, its flush scheduled on another thread), the file is
replaced atomically at once and made durable later by one background thread.

What is lost that way is only what a power failure can take before the flush;
a crashed process leaves the page cache, and with it the new file, to the OS.
``flush()`` waits for everything queued (a broker's clean stop).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["defer_fsync", "flush", "fsync_path"]

_lock = threading.Condition()
_pending: set[Path] = set()
_busy = False
_thread: threading.Thread | None = None


def defer_fsync(path: Path) -> None:
    """Make ``path`` (already written and renamed into place) durable later."""
    global _thread
    with _lock:
        _pending.add(path)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="kaflite-deferred-fsync",
                                       daemon=True)
            _thread.start()
        _lock.notify_all()


def flush(timeout: float = 30.0) -> bool:
    """Wait until every deferred fsync is done; False if it took longer than ``timeout``."""
    with _lock:
        return _lock.wait_for(lambda: not _pending and not _busy, timeout)


def _run() -> None:
    global _busy
    while True:
        with _lock:
            _lock.wait_for(lambda: bool(_pending))
            batch = list(_pending)
            _pending.clear()
            _busy = True
        try:
            for directory in {p.parent for p in batch if fsync_path(p)}:
                fsync_path(directory)
        finally:
            with _lock:
                _busy = False
                _lock.notify_all()


def fsync_path(path: Path) -> bool:
    """fsync a file or a directory; False if it is gone (removed meanwhile)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.fsync(fd)
    except OSError:
        pass              # some file systems refuse fsync on directories
    finally:
        os.close(fd)
    return True
