"""What every API handler declares: its key, its version range and a coroutine.

ApiVersions is built from these declarations, so the versions a broker
advertises are exactly the ones it can serve.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kaflite.protocol.headers import RequestHeader

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["Handler", "HandlerFn"]

HandlerFn = Callable[["Broker", "ServerConnection", RequestHeader, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Handler:
    api_key: int
    min_version: int
    max_version: int
    handle: HandlerFn
