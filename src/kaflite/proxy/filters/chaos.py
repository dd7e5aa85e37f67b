"""The chaos filter: errors at a rate, added latency, dropped answers, closed connections.

Options (``chaos:rate=0.1,api=Produce|Fetch,topic=orders,client=app-1``):

* ``rate``: the share of matching requests that get an error (default 0.1);
* ``error``: the error, by name or code; by default one a client recovers from,
  per API (NOT_LEADER_OR_FOLLOWER for Produce, Fetch and ListOffsets,
  COORDINATOR_NOT_AVAILABLE for FindCoordinator and the group APIs);
* ``api``, ``topic``, ``client``: what matches (``api`` by name or key;
  default Produce, Fetch, ListOffsets, FindCoordinator, OffsetCommit, OffsetFetch);
* ``latency_ms`` with ``latency_rate`` (default 1 when latency is given): added
  latency; ``drop_rate``: answers never sent; ``close_rate``: connections closed;
* ``seed``: for a reproducible run.

An error is placed the way the cluster's fault injector places it
(``kaflite.cluster._inject``), so that it never comes with the side effect of a
request that succeeded: a top-level error is answered by the proxy without
forwarding the request; partitions that get a partition error are taken out of
the request before it is forwarded (nothing is appended for them) and put back
into the response with the error; a Fetch's partitions get it in the response.
A client that retries therefore never writes a record twice.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kaflite.cluster._inject import RequestPlan, Rule, finish_response, plan_request
from kaflite.cluster.observe import api_name
from kaflite.protocol import errors
from kaflite.protocol.messages import REGISTRY, api_by_name
from kaflite.proxy.filters.base import Exchange, Filter

__all__ = ["ChaosFilter"]

NOT_LEADER = errors.NotLeaderOrFollowerError.code
COORDINATOR_NOT_AVAILABLE = errors.CoordinatorNotAvailableError.code
DEFAULT_ERRORS = {0: NOT_LEADER, 1: NOT_LEADER, 2: NOT_LEADER, 10: COORDINATOR_NOT_AVAILABLE,
                  8: COORDINATOR_NOT_AVAILABLE, 9: COORDINATOR_NOT_AVAILABLE}


def _api_key(text: str) -> int:
    if text.isdigit():
        return int(text)
    info = api_by_name(text)
    return info.api_key


@dataclass
class _Planned:
    plan: RequestPlan
    rule: Rule


class ChaosFilter(Filter):
    name = "chaos"

    def __init__(self, rate: float = 0.1, error: int | None = None,
                 apis: frozenset[int] | None = None, topic: str | None = None,
                 client: str | None = None, latency_ms: float = 0.0, latency_rate: float = 1.0,
                 drop_rate: float = 0.0, close_rate: float = 0.0,
                 seed: int | None = None) -> None:
        self.rate = rate
        self.error = error
        self.apis = apis if apis is not None else frozenset(DEFAULT_ERRORS)
        self.topic = topic
        self.client = client
        self.latency_s = latency_ms / 1000
        self.latency_rate = latency_rate
        self.drop_rate = drop_rate
        self.close_rate = close_rate
        self.random = random.Random(seed)
        self.injected: dict[str, int] = {}    # api name -> errors injected

    @classmethod
    def from_options(cls, options: dict[str, str]) -> ChaosFilter:
        error = options.get("error")
        api = options.get("api")
        seed = options.get("seed")
        return cls(
            rate=float(options.get("rate", 0.1)),
            error=errors.code_named(int(error) if error and error.isdigit() else error)
            if error else None,
            apis=frozenset(_api_key(a) for a in api.split("|")) if api else None,
            topic=options.get("topic"), client=options.get("client"),
            latency_ms=float(options.get("latency_ms", 0)),
            latency_rate=float(options.get("latency_rate", 1)),
            drop_rate=float(options.get("drop_rate", 0)),
            close_rate=float(options.get("close_rate", 0)),
            seed=int(seed) if seed is not None else None)

    def wants(self, api_key: int, version: int) -> bool:
        return api_key in self.apis

    def _error_for(self, api_key: int) -> int | None:
        if self.error is not None:
            return self.error
        return DEFAULT_ERRORS.get(api_key, COORDINATOR_NOT_AVAILABLE)

    def on_request(self, exchange: Exchange) -> None:
        ex = exchange
        if ex.api_key not in self.apis or ex.request is None:
            return
        if self.client is not None and ex.client_id != self.client:
            return
        roll = self.random.random
        if self.close_rate and roll() < self.close_rate:
            ex.close = True
            return
        if self.latency_s and roll() < self.latency_rate:
            ex.delay_s += self.latency_s
        if self.drop_rate and roll() < self.drop_rate:
            ex.drop_response = True
        if not self.rate or roll() >= self.rate:
            return
        code = self._error_for(ex.api_key)
        if code is None or REGISTRY.get(ex.api_key) is None:
            return
        rule = Rule("error", api_key=ex.api_key, error_code=code, topic=self.topic,
                    remaining=None)
        plan = plan_request([rule], -1, ex.client_id, False, ex.api_key, ex.version,
                            ex.request, ex.resolve)
        if plan is None:
            return
        name = api_name(ex.api_key)
        if plan.response is not None:
            ex.answer(plan.response)
        elif plan.stripped or plan.stripped_topics or plan.rewrites:
            ex.request_changed = bool(plan.stripped or plan.stripped_topics)
            ex.notes[self.name] = _Planned(plan, rule)
        else:
            return
        self.injected[name] = self.injected.get(name, 0) + 1

    def on_response(self, exchange: Exchange) -> None:
        planned = exchange.notes.get(self.name)
        if not isinstance(planned, _Planned) or exchange.request is None \
                or exchange.response is None:
            return
        exchange.response = finish_response(planned.plan, [planned.rule], exchange.api_key,
                                            exchange.version, exchange.request,
                                            exchange.response, exchange.resolve)
        exchange.response_changed = True
