"""The long-running commands (``kaflite up``, ``proxy``, ``console``): serve until Ctrl-C."""

from __future__ import annotations

import asyncio
import contextlib
import signal

import typer

__all__ = ["serve_until_interrupted"]


async def serve_until_interrupted(what: str) -> None:
    """Say how to stop ``what``, then wait for SIGINT or SIGTERM."""
    typer.echo(f"Ctrl-C stops {what}.")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):   # no signal handlers on this loop
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
