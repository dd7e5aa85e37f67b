"""The rules filter: kaflite's cluster fault rules, applied by the proxy to any cluster.

Every ``Proxy`` has one, last in its chain (next to the upstream, where a broker
would see the request), as ``proxy.faults``. Its rules are the cluster's own
``Rule`` objects in a ``RuleBook`` (``kaflite.cluster.rules``), added and removed
at runtime from any thread::

    rule = proxy.faults.add(rule_from_body("error", {"api": "Produce",
                                                     "error": "NOT_LEADER_OR_FOLLOWER",
                                                     "broker": 2, "count": 3}))
    proxy.faults.remove(rule.id)

A rule scoped to a ``broker`` hits the traffic to that upstream node only: a
connection to the proxy's port for node n goes to node n; a bootstrap connection
counts as the node whose address it reached, once the proxy has learned that
address from a Metadata answer (before that, it matches no broker-scoped rule).

Each kind does what kaflite's broker does with it (``kaflite.cluster.network``),
the matching and the placing of errors being the same code (``plan_request``,
``finish_response``):

* ``error``: a top-level error is answered here, without forwarding the request;
  partitions (topics) that get an error are taken out of the request before it is
  forwarded and put back into the response with the error; other levels are
  rewritten in the response. No error comes with a side effect that succeeded.
* ``delay``: the response is held back ``ms`` milliseconds.
* ``throttle``: ``throttle_time_ms`` in the response, then the client's connection
  is not read for that long (KIP-219); a version older than KIP-219 gets its
  response held back instead, as Kafka did.
* ``drop``: the client's connection is closed instead of forwarding the request.

What the proxy cannot do as a broker does: an injected UNKNOWN_MEMBER_ID does not
make the upstream coordinator forget the member (kaflite's cluster does, since
Kafka answers it only for a member it dropped), and a Fetch error is spliced only
into partitions the request names (the proxy does not follow fetch sessions).
"""

from __future__ import annotations

from kaflite.cluster._inject import RequestPlan, Rule
from kaflite.cluster.network import KIP219_VERSION
from kaflite.cluster.rules import RuleBook
from kaflite.proxy.filters.base import Exchange, Filter

__all__ = ["RulesFilter"]


class RulesFilter(Filter):
    name = "rules"

    def __init__(self) -> None:
        self.book = RuleBook()
        self.applied: dict[str, int] = {}     # rule kind -> requests it acted on

    # -- the typed API ----------------------------------------------------------------
    def add(self, rule: Rule) -> Rule:
        return self.book.add(rule)

    def remove(self, rule_id: int) -> bool:
        return self.book.remove(rule_id)

    def clear(self) -> int:
        return self.book.clear()

    def rules(self) -> list[Rule]:
        return self.book.rules()

    # -- the filter -------------------------------------------------------------------
    def wants(self, api_key: int, version: int) -> bool:
        if not self.book.active:
            return False
        return any(r.api_key is None or r.api_key == api_key for r in self.book.rules())

    def _count(self, kind: str) -> None:
        self.applied[kind] = self.applied.get(kind, 0) + 1

    def on_request(self, exchange: Exchange) -> None:
        ex = exchange
        if ex.request is None or not self.book.active:
            return
        node = ex.upstream_node if ex.upstream_node is not None else -1
        plan = self.book.plan(node, ex.client_id, False, ex.api_key, ex.version, ex.request,
                              ex.resolve)
        if plan is None:
            return
        if plan.drop:
            ex.close = True
            self._count("drop")
            return
        if plan.delay_ms:
            ex.delay_s += plan.delay_ms / 1000
            self._count("delay")
        if plan.response is not None:
            ex.answer(plan.response)
            self._count("error")
            self._throttle(ex, plan, plan.response)
            return
        if plan.stripped or plan.stripped_topics or plan.rewrites or plan.throttle_ms:
            ex.request_changed = ex.request_changed or bool(plan.stripped
                                                            or plan.stripped_topics)
            ex.notes[self.name] = plan

    def on_response(self, exchange: Exchange) -> None:
        ex = exchange
        plan = ex.notes.get(self.name)
        if not isinstance(plan, RequestPlan) or ex.request is None or ex.response is None:
            return
        if plan.stripped or plan.stripped_topics or plan.rewrites:
            ex.response = self.book.finish(plan, ex.api_key, ex.version, ex.request,
                                           ex.response, ex.resolve)
            ex.response_changed = True
            self._count("error")
        self._throttle(ex, plan, ex.response)

    def _throttle(self, ex: Exchange, plan: RequestPlan, response: object) -> None:
        ms = plan.throttle_ms
        if not ms:
            return
        self._count("throttle")
        if hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(int(response.throttle_time_ms), ms)
            ex.response_changed = True
        if ex.version < KIP219_VERSION.get(ex.api_key, 0):
            ex.delay_s += ms / 1000        # before KIP-219: the response itself waits
        else:
            ex.mute_s = max(ex.mute_s, ms / 1000)
