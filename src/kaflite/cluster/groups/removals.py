"""Members the coordinator removed without their asking, as structured events.

A session that expired, a rebalance a member did not finish in time, a fence on
request: each is a point where the coordinator gives a member's partitions away
while the member may still believe it holds them. Its client must learn so from
the next answer it gets (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH...). To check that
from outside, each removal is logged on the ``kaflite.groups.removals`` logger as
one JSON object: group, member id, client id, protocol, cause, and when (wall clock
and ``time.monotonic()``, which all processes of one machine share).

``install_sink(path)`` appends those lines to a file from a thread of its own
(``logging.handlers.QueueListener``): the coordinator's event loop only puts a
record on a queue. ``kaflite.verify`` installs it in the cluster process, and the
variable ``KAFLITE_GROUP_REMOVALS`` makes broker processes (``--processes``) do the
same (``install_sink_from_env``). Without a sink the logger is silent.
"""

from __future__ import annotations

import atexit
import json
import logging
import logging.handlers
import os
import queue
import time
from pathlib import Path

__all__ = ["ENV", "install_sink", "install_sink_from_env", "remove_sink", "removed"]

log = logging.getLogger("kaflite.groups.removals")
log.propagate = False          # the events have their own sink; the groups' log says why
ENV = "KAFLITE_GROUP_REMOVALS"
_sinks: dict[str, tuple[logging.handlers.QueueListener, logging.Handler, logging.Handler]] = {}


def removed(group: str, member_id: str, client_id: str, protocol: str, cause: str) -> None:
    """The coordinator removed ``member_id`` of ``group`` without its asking."""
    if not log.handlers:
        return
    log.info("%s", json.dumps({"group": group, "member_id": member_id, "client_id": client_id,
                               "protocol": protocol, "cause": cause, "wall": time.time(),
                               "monotonic": time.monotonic()}))


class _Lines(logging.Handler):
    """One message a line, appended (O_APPEND: processes may share the file)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.file = open(path, "a", buffering=1)   # noqa: SIM115 - closed in close()

    def emit(self, record: logging.LogRecord) -> None:
        self.file.write(record.getMessage() + "\n")

    def close(self) -> None:
        self.file.close()
        super().close()


def install_sink(path: Path) -> None:
    """Append every removal to ``path`` from now on (once per path and process), until
    ``remove_sink(path)`` or the process exits."""
    key = str(path)
    if key in _sinks:
        return
    q: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
    handler = _Lines(path)
    listener = logging.handlers.QueueListener(q, handler)
    listener.start()
    front = logging.handlers.QueueHandler(q)
    _sinks[key] = (listener, handler, front)
    log.addHandler(front)
    log.setLevel(logging.INFO)
    if len(_sinks) == 1:
        atexit.register(_remove_all)


def remove_sink(path: Path) -> None:
    """Stop appending to ``path``: what is queued is written first."""
    sink = _sinks.pop(str(path), None)
    if sink is None:
        return
    listener, handler, front = sink
    log.removeHandler(front)
    listener.stop()             # writes what is queued, then ends the thread
    handler.close()


def _remove_all() -> None:
    for key in list(_sinks):
        remove_sink(Path(key))


def install_sink_from_env() -> None:
    path = os.environ.get(ENV)
    if path:
        install_sink(Path(path))
