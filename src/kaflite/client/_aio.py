"""Small asyncio helpers that keep cancellation intact on Python 3.11.

On 3.11, ``asyncio.wait_for`` returns the inner result when a cancellation
arrives in the same loop iteration as that result, so the caller's
``cancel()`` is lost (fixed in 3.12). A task whose cancellation is lost keeps
running, and a ``close()`` that awaits it hangs. Everything in the client
therefore waits with ``asyncio.timeout`` (which tracks its own cancellations),
and stops its tasks with ``cancel_and_wait``, which neither waits forever for a
task that ignored its cancellation nor swallows a cancellation of the caller.
"""

from __future__ import annotations

import asyncio
from typing import TypeVar

__all__ = ["cancel_and_wait", "wait_event"]

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass; True if it was set."""
    if event.is_set():
        return True
    if timeout <= 0:
        return False
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def cancel_and_wait(*tasks: asyncio.Task[T] | None, timeout: float = 5.0) -> None:
    """Cancel ``tasks`` and wait (at most ``timeout``) until they have finished."""
    pending = [t for t in tasks if t is not None and not t.done()]
    for p in pending:
        p.cancel()
    if pending:
        await asyncio.wait(pending, timeout=timeout)
    for t in tasks:
        if t is not None and t.done() and not t.cancelled():
            t.exception()  # retrieved: a failure at shutdown is not worth a warning
