"""The request-level fault rules' one home: the rule book, and a rule from its JSON body.

``RuleBook`` holds ``Rule`` objects (``_inject``) behind a lock, so that any thread
may add and remove them while connections consult them (``plan``/``finish``).
kaflite's brokers consult the cluster's ``FaultInjector`` (a ``RuleBook``);
kaflite's proxy consults its ``RulesFilter``'s book for the traffic it forwards to
any Kafka-compatible cluster, with the same rules.

``rule_from_body(kind, body)`` reads a rule as the control API's JSON body gives
it (``POST /faults/<kind>``; ``kaflite.verify``'s nemesis sends the same bodies to
a cluster or to a proxy):

=========  ===================================================================
error      {api, error, count=1, topic, partition, group, client_id, broker, level}
delay      {api, ms, count=null, topic, partition, group, client_id, broker}
throttle   {ms, api, count=null, client_id, broker}
drop       {api, count=1, topic, group, client_id, broker} (api "*": every API)
=========  ===================================================================

``count`` null keeps the rule until it is removed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from kaflite.cluster._inject import (
    RequestPlan,
    Rule,
    SessionPartitions,
    _consume,
    finish_response,
    plan_request,
)
from kaflite.cluster._msgscope import TopicResolver
from kaflite.protocol import errors
from kaflite.protocol.messages import REGISTRY, Struct, api_by_name

__all__ = ["RULE_KINDS", "RuleBook", "api_key_of", "rule_from_body"]

# the default count of each kind: an error or a drop once, a delay or throttle until removed
RULE_KINDS: dict[str, int | None] = {"error": 1, "delay": None, "throttle": None, "drop": 1}


def api_key_of(api: int | str | None) -> int | None:
    """An API key from a key, a numeric string or a Kafka API name ("Produce")."""
    if api is None or isinstance(api, int):
        if api is not None and api not in REGISTRY:
            raise ValueError(f"unknown API key {api}")
        return api
    text = api.strip()
    if text.lstrip("-").isdigit():
        return api_key_of(int(text))
    try:
        return api_by_name(text).api_key
    except KeyError:
        lowered = {info.name.lower(): k for k, info in REGISTRY.items()}
        key = lowered.get(text.lower().replace("_", "").replace("-", ""))
        if key is None:
            raise ValueError(f"unknown API {api!r}") from None
        return key


class RuleBook:
    """The request-level rules, as the brokers' connections (or a proxy) consult them.

    A cluster's ``FaultInjector`` is one; so is kaflite's proxy's ``RulesFilter``; in a multi-process cluster each broker
    process holds a copy (``replace``), and reports the rules it hit
    (``on_hit``) back to the controller process, which counts them down.
    """

    def __init__(self) -> None:
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self.on_hit: Callable[[list[int]], None] | None = None

    @property
    def active(self) -> bool:
        return bool(self._rules)

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        self._changed()
        return rule

    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def remove(self, rule_id: int) -> bool:
        with self._lock:
            for rule in self._rules:
                if rule.id == rule_id:
                    self._rules.remove(rule)
                    break
            else:
                return False
        self._changed()
        return True

    def clear(self) -> int:
        with self._lock:
            n = len(self._rules)
            self._rules.clear()
        self._changed()
        return n

    def replace(self, rules: list[Rule]) -> None:
        with self._lock:
            self._rules = list(rules)

    def _changed(self) -> None:
        """A rule was added or removed (the cluster's injector tells broker processes)."""

    def consume(self, rule_ids: list[int]) -> None:
        """Count down the rules a broker process hit."""
        with self._lock:
            for rule in [r for r in self._rules if r.id in rule_ids]:
                _consume(rule, self._rules)
        self._changed()

    # -- the connection's hooks (called on the broker's loop) ----------------------------
    def plan(self, broker_id: int, client_id: str | None, is_replica: bool, api_key: int,
             version: int, request: Struct, resolve: TopicResolver | None
             ) -> RequestPlan | None:
        """The plan for one request to broker ``broker_id`` (-1: a broker not known)."""
        with self._lock:
            before = self._hits()
            out = plan_request(self._rules, broker_id, client_id, is_replica, api_key,
                               version, request, resolve)
        self._report(before)
        return out

    def finish(self, plan: RequestPlan, api_key: int, version: int, request: Struct,
               response: Struct, resolve: TopicResolver | None,
               session_partitions: SessionPartitions | None = None) -> Struct:
        with self._lock:
            before = self._hits()
            out = finish_response(plan, self._rules, api_key, version, request, response,
                                  resolve, session_partitions)
        self._report(before)
        return out

    def _hits(self) -> dict[int, int] | None:
        return {r.id: r.hits for r in self._rules} if self.on_hit is not None else None

    def _report(self, before: dict[int, int] | None) -> None:
        if before is None or self.on_hit is None:
            return
        after = {r.id: r.hits for r in self.rules()}
        hit = [i for i, n in before.items() if after.get(i, n + 1) != n]
        if hit:
            self.on_hit(hit)


def _opt(body: Mapping[str, object], name: str) -> str | None:
    value = body.get(name)
    return None if value is None else str(value)


def _oint(body: Mapping[str, object], name: str) -> int | None:
    value = body.get(name)
    return None if value is None else int(str(value))


def _required(body: Mapping[str, object], name: str) -> str:
    value = body.get(name)
    if value is None:
        raise ValueError(f"{name} is required")
    return str(value)


def rule_from_body(kind: str, body: Mapping[str, object]) -> Rule:
    """The rule a control API body asks for (see the module docstring); ValueError
    for a body that names no valid rule. A drop without ``api`` is no rule (it closes
    connections now): the caller does that."""
    if kind not in RULE_KINDS:
        raise ValueError(f"a rule's kind is one of {', '.join(RULE_KINDS)}, not {kind!r}")
    count = _oint(body, "count") if "count" in body else RULE_KINDS[kind]
    api = _required(body, "api") if kind == "drop" else _opt(body, "api")
    api_key = None if api == "*" else api_key_of(api)
    client_id, broker = _opt(body, "client_id"), _oint(body, "broker")
    if kind == "throttle":    # a quota is the client's, on a broker: no topic, no group
        return Rule("throttle", api_key, delay_ms=int(_required(body, "ms")), remaining=count,
                    client_id=client_id, broker=broker)
    topic, group = _opt(body, "topic"), _opt(body, "group")
    if kind == "drop":
        return Rule("drop", api_key, remaining=count, topic=topic, group=group,
                    client_id=client_id, broker=broker)
    partition = _oint(body, "partition")
    if kind == "delay":
        return Rule("delay", api_key, delay_ms=int(_required(body, "ms")), remaining=count,
                    topic=topic, partition=partition, group=group, client_id=client_id,
                    broker=broker)
    return Rule("error", api_key, error_code=errors.code_named(_required(body, "error")),
                remaining=count, topic=topic, partition=partition, group=group,
                client_id=client_id, broker=broker, level=_opt(body, "level"))
