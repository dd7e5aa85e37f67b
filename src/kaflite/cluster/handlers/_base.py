"""What every API handler declares: the request class it serves, its version
range and a coroutine.

ApiVersions is built from these declarations, so the versions a broker
advertises are exactly the ones it can serve. The request class carries the
API key (``Handler.api_key``), and the coroutine is typed by it: a handler of
``FetchRequest`` takes a ``FetchRequest``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import Request, Struct

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["AnyHandler", "Handler", "HandlerFn"]

Q = TypeVar("Q", bound=Request[Any])
# A handler's answer: its response, or None for a request that gets none (acks=0).
HandlerFn = Callable[["Broker", "ServerConnection", RequestHeader, Q], Awaitable[Struct | None]]


@dataclass(frozen=True)
class Handler(Generic[Q]):
    request: type[Q]
    min_version: int
    max_version: int
    handle: HandlerFn[Q]

    @property
    def api_key(self) -> int:
        return self.request.API_KEY


AnyHandler = Handler[Any]    # the dispatch table's entries: each serves its own request class
