"""The filter interface: an ordered chain of request and response filters.

A filter is a small class with a ``name`` (how the proxy's configuration names
it) and four methods, each optional:

* ``wants(api_key, version)``: must requests and responses of this API be decoded
  for me? (Produce and Fetch requests are otherwise forwarded without decoding.)
* ``on_request(exchange)``: look at or change ``exchange.request``
  (set ``exchange.request_changed``), answer it locally (``exchange.answer``),
  delay, drop or close;
* ``on_response(exchange)``: look at or change ``exchange.response`` (set
  ``exchange.response_changed``);
* ``close()``: the proxy stops.

Requests go through the chain in order, responses in reverse order (the filter
next to the upstream sees the response first), as an onion.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from kaflite.cluster._msgscope import TopicResolver
from kaflite.protocol.messages import Struct

__all__ = ["Exchange", "Filter", "FilterChain", "FilterFactory"]


@dataclass(slots=True)
class Exchange:
    """One request through the proxy, and its response once it arrives."""

    connection_id: int
    peer: str
    node_id: int | None               # the upstream broker (None: a bootstrap connection)
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    request: Struct | None = None      # decoded, when the proxy or a filter needs it
    response: Struct | None = None
    request_changed: bool = False
    response_changed: bool = False
    local_response: Struct | None = None   # answered by the proxy, not forwarded
    delay_s: float = 0.0               # hold the response back this long
    drop_response: bool = False        # never answer (the client times out)
    close: bool = False                # close the client's connection
    mute_s: float = 0.0                # once answered, read nothing more from the client
                                       # for this long (a KIP-219 throttle)
    started: float = field(default_factory=time.perf_counter)
    notes: dict[str, object] = field(default_factory=dict)   # filters' own state
    resolve: TopicResolver | None = None   # topic id -> name, as the proxy learned them
    upstream_node: int | None = None   # the broker the request goes to, where known (a
                                       # bootstrap connection's, once its address is known)

    def answer(self, response: Struct) -> None:
        """Answer the request here, without forwarding it upstream."""
        self.local_response = response


class Filter:
    """Base class: every hook does nothing."""

    name: ClassVar[str] = "filter"

    def wants(self, api_key: int, version: int) -> bool:
        return False

    def on_request(self, exchange: Exchange) -> None:
        return None

    def on_response(self, exchange: Exchange) -> None:
        return None

    def close(self) -> None:
        return None


FilterFactory = Callable[[dict[str, str]], Filter]


class FilterChain:
    """The ordered filters of one proxy."""

    def __init__(self, filters: Sequence[Filter] = ()) -> None:
        self.filters = list(filters)

    def __bool__(self) -> bool:
        return bool(self.filters)

    def wants(self, api_key: int, version: int) -> bool:
        return any(f.wants(api_key, version) for f in self.filters)

    def on_request(self, exchange: Exchange) -> None:
        for f in self.filters:
            f.on_request(exchange)
            if exchange.close or exchange.local_response is not None:
                return

    def on_response(self, exchange: Exchange) -> None:
        for f in reversed(self.filters):
            f.on_response(exchange)

    def close(self) -> None:
        for f in self.filters:
            f.close()
