"""Checkpoint writes and fsyncs later, off the event loop: for files rewritten by the hundred.

A leader change rewrites the partition's ``leader-epoch-checkpoint``. When a
broker dies, every partition it led elects a new leader at the same moment, and
a broker that starts opens every partition's log; with an fsync of the file and
one of its directory each time, thousands of partitions held one event loop for
seconds (issue 36: 5,000 partitions, a broker kill took 8.5 s of the loop that
every broker of the cluster shares, the checkpoint writes a third of it). As
Kafka since 3.7 (KAFKA-15046: the leader-epoch checkpoint is written without
fsync on the request path, its flush scheduled on another thread), the flush is
done later by one background thread (``defer_fsync``). With the fsync gone, the
write and rename themselves were still 1.4 s of a broker kill at 5,000
partitions; ``defer_write`` hands the whole write to the same thread (the newest
text of a file wins), and:

* ``pending_text`` gives a file's newest text while it is queued or being
  written, so a reader (a log reopened in the same process) never sees an old one;
* ``write_now`` puts a queued file in place at once: a partition's log calls it for
  its leader-epoch checkpoint before it moves its recovery point, so that the
  epochs of everything recovery will not scan again are on disk first;
* ``cancel_under`` drops what is queued for a directory about to be deleted.

What is lost that way is only what a power failure, or a crash of the process
within the moment a write waits, can take; recovery then re-learns the epochs
of the batches past the recovery point. ``flush()`` waits for everything queued
(a broker's clean stop).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["cancel_under", "defer_fsync", "defer_write", "flush", "fsync_path",
           "pending_text", "replace_file", "write_now"]

_lock = threading.Condition()
# keyed by str, not Path: hashing a Path was a third of a leader election's checkpoint cost
_pending: set[str] = set()           # in place, to fsync
_writes: dict[str, str] = {}         # newest text, to put in place (then fsync)
_writing: dict[str, str] = {}        # the batch the thread is writing now
_busy = False
_thread: threading.Thread | None = None


def _wake() -> None:
    """(under ``_lock``) start the thread if needed and wake it."""
    global _thread
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_run, name="kaflite-deferred-fsync", daemon=True)
        _thread.start()
    _lock.notify_all()


def defer_fsync(path: Path) -> None:
    """Make ``path`` (already written and renamed into place) durable later."""
    with _lock:
        _pending.add(str(path))
        _wake()


def defer_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically, and fsync it, on the background thread."""
    with _lock:
        _writes[str(path)] = text
        _wake()


def pending_text(path: Path) -> str | None:
    """The newest text of ``path`` not yet in place (None: the file on disk is current)."""
    key = str(path)
    with _lock:
        text = _writes.get(key)
        return text if text is not None else _writing.get(key)


def write_now(path: Path) -> None:
    """Put ``path``'s queued text in place now (its fsync stays deferred)."""
    key = str(path)
    with _lock:
        _lock.wait_for(lambda: key not in _writing)
        text = _writes.pop(key, None)
        if text is not None:
            replace_file(path, text)
            _pending.add(key)
            _wake()


def cancel_under(directory: Path) -> None:
    """Forget the queued writes of files in ``directory`` (it is being deleted)."""
    prefix = os.path.join(directory, "")
    with _lock:
        for key in [k for k in _writes if k.startswith(prefix) and os.sep not in k[len(prefix):]]:
            del _writes[key]


def flush(timeout: float = 30.0) -> bool:
    """Wait until every deferred write and fsync is done; False past ``timeout``."""
    with _lock:
        return _lock.wait_for(lambda: not _pending and not _writes and not _busy, timeout)


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(text.encode("utf-8"))
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _run() -> None:
    global _busy
    while True:
        with _lock:
            _lock.wait_for(lambda: bool(_pending or _writes))
            batch = list(_pending)
            _pending.clear()
            _writing.update(_writes)
            _writes.clear()
            _busy = True
        try:
            for key, text in _writing.items():
                try:
                    replace_file(Path(key), text)
                except OSError:
                    continue            # its directory was deleted meanwhile
                batch.append(key)
            for directory in {os.path.dirname(k) for k in batch if fsync_path(k)}:
                fsync_path(directory)
        finally:
            with _lock:
                _writing.clear()
                _busy = False
                _lock.notify_all()


def fsync_path(path: str | Path) -> bool:
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
