"""The harness's threads: every process of a run (and a crashed member's teardown) is a
named daemon thread, so that a client stuck in its library never holds the run open."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["start_daemon"]


def start_daemon(name: str, target: Callable[..., None], *args: Any) -> threading.Thread:
    """Start ``target(*args)`` on a daemon thread called ``name``."""
    t = threading.Thread(target=target, args=args, name=name, daemon=True)
    t.start()
    return t
