"""The long-running commands (``kaflite up``, ``proxy``, ``console``): serve until Ctrl-C.

A graceful stop runs on the event loop, so a loop that is busy (a stall, a bug, a
cluster wedged by its own load) would keep Ctrl-C waiting for as long as it stays
busy: issue 36 saw ``kaflite up`` ignore SIGINT until it was killed. So the signal
is taken by a Python-level handler, which runs on the main thread between two
bytecodes even while the loop is busy. It asks the loop to stop gracefully, and
starts a watchdog: a process still running ``grace_s`` seconds later exits at
once. A second Ctrl-C exits at once too. Exiting without the graceful stop is a
crash as far as the data is concerned, and every broker recovers from one at its
next start (acknowledged records are on disk before they are acknowledged).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from types import FrameType

import typer

__all__ = ["STOP_GRACE_S", "serve_until_interrupted"]

STOP_GRACE_S = 10.0


def _exit_now(signum: int, why: str) -> None:
    sys.stderr.write(f"kaflite: {why}; exiting now (the data on disk is recovered at the "
                     "next start, as after a crash)\n")
    sys.stderr.flush()
    os._exit(128 + signum)


async def serve_until_interrupted(what: str, grace_s: float = STOP_GRACE_S) -> None:
    """Say how to stop ``what``, then wait for SIGINT or SIGTERM (see the module
    docstring for what happens when stopping takes longer than ``grace_s``)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    asked: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if asked:
            _exit_now(signum, "interrupted again while stopping")
        asked.append(signum)
        loop.call_soon_threadsafe(stop.set)
        watchdog = threading.Timer(
            grace_s, _exit_now, (signum, f"still stopping after {grace_s:g} s"))
        watchdog.daemon = True
        watchdog.start()

    # Kept for the rest of the process's life: the stop that follows is covered too.
    # (Only the main thread may set handlers; elsewhere, as under a test's thread,
    # the caller stops the loop itself.)
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
    typer.echo(f"Ctrl-C stops {what}.")
    await stop.wait()
