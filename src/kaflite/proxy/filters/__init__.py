"""Filters, loaded by name: ``load_filter("chaos:rate=0.1,api=Produce|Fetch")``.

A spec is ``NAME`` or ``NAME:key=value,key=value``; a list value separates its
items with ``|``. The shipped filters:

* ``chaos`` (``chaos.py``): errors, latency, dropped answers, closed connections;
* ``audit`` (``audit.py``): one JSON line per control-plane request;
* ``topic-prefix`` (``prefix.py``): a virtual cluster on a topic prefix.

``register(name, factory)`` adds one of your own.

Every proxy also has ``rules`` (``rules.py``), last in its chain, as ``proxy.faults``:
kaflite's cluster fault rules, added and removed at runtime.
"""

from __future__ import annotations

from kaflite.proxy.filters.base import Exchange, Filter, FilterChain, FilterFactory

__all__ = ["Exchange", "Filter", "FilterChain", "known_filters", "load_filter", "parse_spec",
           "register"]

_FACTORIES: dict[str, FilterFactory] = {}


def register(name: str, factory: FilterFactory) -> None:
    _FACTORIES[name] = factory


def _builtin() -> None:
    if _FACTORIES:
        return
    from kaflite.proxy.filters.audit import AuditFilter
    from kaflite.proxy.filters.chaos import ChaosFilter
    from kaflite.proxy.filters.prefix import TopicPrefixFilter

    register(ChaosFilter.name, ChaosFilter.from_options)
    register(AuditFilter.name, AuditFilter.from_options)
    register(TopicPrefixFilter.name, TopicPrefixFilter.from_options)


def known_filters() -> list[str]:
    _builtin()
    return sorted(_FACTORIES)


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    name, _, rest = spec.partition(":")
    options: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"filter option {item!r} is not key=value")
        options[key.strip()] = value.strip()
    return name.strip(), options


def load_filter(spec: str) -> Filter:
    _builtin()
    name, options = parse_spec(spec)
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown filter {name!r} (known: {', '.join(known_filters())})")
    return factory(options)
