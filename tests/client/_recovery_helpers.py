"""What the recovery tests share (``test_recovery.py``, ``test_kip848_recovery.py``): the
fault cleanup fixture, unique names, a bounded ``run``, and where a fault shows (the
broker's error counts, the client's events)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any

import pytest

from kaflite.cluster import Cluster


@pytest.fixture(autouse=True)
def clear_faults(cluster: Cluster) -> Iterator[None]:
    """Every fault rule of a test goes at its end, so the module's cluster is shared."""
    yield
    cluster.faults.clear()


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def run(coro: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
    started = time.monotonic()
    result = asyncio.run(asyncio.wait_for(coro, timeout))
    # On Python 3.11 a cancellation swallowed inside the client would let a timed-out
    # test return normally: a test that ran out of time fails here instead.
    assert time.monotonic() - started < timeout, "the test ran out of time"
    return result


def events(client: Any, text: str) -> list[str]:
    return [str(e) for e in client.events() if text in str(e)]


def api_errors(cluster: Cluster, client_id: str, api: str) -> dict[str, int]:
    """Error counts for ``api`` over every connection (open or closed) of ``client_id``."""
    out: dict[str, int] = {}
    for conn in cluster.connections(client_id=client_id, include_closed=True):
        snap = conn.apis.get(api)
        if snap is not None:
            for name, n in snap.errors.items():
                out[name] = out.get(name, 0) + n
    return out


async def until(what: str, check: Callable[[], bool], step: Callable[[], Awaitable[Any]],
                timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await step()
