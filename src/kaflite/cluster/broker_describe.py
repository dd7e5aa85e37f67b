"""DescribeConfigs of a BROKER resource, answered as a Kafka 4.4 broker answers it.

A broker (resource name: its id) describes every config Kafka defines
(``_kafka_broker_configs.CONFIGS``; Kafka's internal ones only when set) and every other
name set on it, each from four layers in Kafka's order of precedence:
DYNAMIC_BROKER_CONFIG (set for this broker while the cluster runs),
DYNAMIC_DEFAULT_BROKER_CONFIG (set for every broker), STATIC_BROKER_CONFIG (what the
broker started with) and DEFAULT_CONFIG (Kafka's default). The synonyms are those layers'
values, in that order, of the config and of the names that stand for the same setting
(``log.retention.ms``/``minutes``/``hours`` ...), from the config's own first value on.

The static layer is kaflite's: the broker's effective ``node.id``, ``broker.id``,
``process.roles``, ``listeners``, ``advertised.listeners``, ``log.dirs`` and
``broker.rack``, and each config of the broker's config whose value is not Kafka's
default (kaflite's own defaults included, where they differ from Kafka's). Every other
Kafka config is described with Kafka's default, whether kaflite acts on it or not
(docs/compatibility.md, "Describing a broker's configs").

As Kafka, a PASSWORD config's value is never shown, nor a name Kafka does not know
(sensitive, type UNKNOWN); kaflite's own ``kaflite.*`` configs are shown, with type
UNKNOWN. The cluster-wide default resource (name "") describes only what was set there.
Each entry's ``documentation`` is kaflite's own text (``kaflite.cluster.config_docs``: what
the config does on kaflite, or that kaflite does not act on it), which the DescribeConfigs
handler adds when the request asks for it; null, as Kafka's, when it does not, and for a
name neither Kafka nor kaflite knows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kaflite.cluster._kafka_broker_configs import (
    CONFIGS,
    DYNAMIC_TYPES,
    INTERNAL,
    LISTENER_MECHANISM_CONFIGS,
    SYNONYMS,
)
from kaflite.cluster.configs import BROKER_DEFAULTS, SOURCE_CODES
from kaflite.cluster.dynamic_configs import LISTENER_PREFIXED, SOURCE_BROKER, SOURCE_DEFAULT
from kaflite.protocol.messages import describe_configs_response as dcr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker

__all__ = ["KAFKA_DEFAULTS", "TYPE_CODES", "config_type", "describe", "started_with",
           "synonym_names"]

STATIC = "STATIC_BROKER_CONFIG"
DEFAULT = "DEFAULT_CONFIG"
#: DescribeConfigs' config_type codes (v3+)
TYPE_CODES = {"UNKNOWN": 0, "BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5,
              "DOUBLE": 6, "LIST": 7, "CLASS": 8, "PASSWORD": 9}
#: Kafka's default of each broker config that has one (its DEFAULT_CONFIG layer)
KAFKA_DEFAULTS: dict[str, str] = {
    name: default for name, (_, default) in CONFIGS.items() if default is not None}
OWN_PREFIX = "kaflite."

Layer = tuple[Mapping[str, str], str]


def _base_name(name: str) -> str | None:
    """The config a ``listener.name.<listener>.[<mechanism>.]<config>`` overrides."""
    match = LISTENER_PREFIXED.fullmatch(name)
    if match is None:
        return None
    rest = match.group(1)
    return next((c for c in sorted(LISTENER_MECHANISM_CONFIGS) if rest.endswith(c)), rest)


def synonym_names(name: str, listener_override: bool = True) -> tuple[str, ...]:
    """The names that stand for ``name``'s setting, the first taking precedence
    (Kafka's ``brokerConfigSynonyms``)."""
    for group in SYNONYMS:
        if name == group[0] or (name in group and group[0] != "log.flush.interval.ms"):
            return group
    base = _base_name(name) if listener_override else None
    return (name, base) if base is not None else (name,)


def config_type(name: str) -> str | None:
    """Kafka's type of a broker config (a listener override has its base's; None: a
    name Kafka does not know)."""
    for each in (name, *synonym_names(name)):
        if each in CONFIGS:
            return CONFIGS[each][0]
    return DYNAMIC_TYPES.get(name)     # the replication quotas' rates


def started_with(broker: Broker) -> dict[str, str]:
    """The broker's STATIC_BROKER_CONFIG layer: its effective addresses, ids and data
    directory, and the configs it was given that are not Kafka's defaults."""
    out: dict[str, str] = {}
    for key, value in broker.config.props.items():
        default = CONFIGS[key][1] if key in CONFIGS else BROKER_DEFAULTS.get(key)
        if value != default:
            out[key] = value
    out["node.id"] = out["broker.id"] = str(broker.node_id)
    out["process.roles"] = "broker"
    out["listeners"] = ",".join(
        f"{s.name}://{_host(s.host)}:{broker.bound.get(s.name, s.port)}"
        for s in broker.listeners)
    out["advertised.listeners"] = ",".join(
        f"{name}://{_host(host)}:{port}" for name, (host, port) in broker.endpoints.items())
    out["log.dirs"] = str(broker.data_dir)
    if broker.rack is not None:
        out["broker.rack"] = broker.rack
    return out


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _effective(static: Mapping[str, str], layers: list[Layer]) -> dict[str, str]:
    """The broker's configs after the dynamic layers (lowest first) override the static
    ones: a dynamic value removes its synonyms' lower values, as Kafka rebuilds them."""
    props = dict(static)
    for values, _ in layers:
        for key, value in values.items():
            for synonym in synonym_names(key, listener_override=False):
                props.pop(synonym, None)
            props[key] = value
    return props


def _entry(name: str, value: str | None, layers: list[Layer], per_broker: bool,
           synonyms: bool) -> dcr.DescribeConfigsResourceResult:
    kind = config_type(name)
    own = kind is None and name.startswith(OWN_PREFIX)
    sensitive = kind == "PASSWORD" or (kind is None and not own)
    names = synonym_names(name)
    found = [(n, values[n], source) for values, source in layers for n in names if n in values]
    while found and found[0][0] != name:       # from the config's own first value on
        found.pop(0)
    if not per_broker:
        found = [s for s in found if s[2] == SOURCE_DEFAULT]
    return dcr.DescribeConfigsResourceResult(
        name=name, value=None if sensitive else value, read_only=name not in DYNAMIC_TYPES,
        config_source=SOURCE_CODES[found[0][2] if found else DEFAULT],
        is_sensitive=sensitive,
        synonyms=[dcr.DescribeConfigsSynonym(n, None if sensitive else v, SOURCE_CODES[s])
                  for n, v, s in found] if synonyms else [],
        config_type=TYPE_CODES[kind or "UNKNOWN"], documentation=None)


def describe(static: Mapping[str, str], default: Mapping[str, str],
             own: Mapping[str, str] | None, keys: list[str] | None,
             synonyms: bool) -> list[dcr.DescribeConfigsResourceResult]:
    """The entries of one BROKER resource: a broker's (``own``: its dynamic configs) or,
    with ``own`` None, the cluster-wide default's."""
    if own is None:
        layers: list[Layer] = [(default, SOURCE_DEFAULT), (static, STATIC),
                               (KAFKA_DEFAULTS, DEFAULT)]
        return [_entry(k, v, layers, False, synonyms) for k, v in sorted(default.items())
                if keys is None or k in keys]
    layers = [(own, SOURCE_BROKER), (default, SOURCE_DEFAULT), (static, STATIC),
              (KAFKA_DEFAULTS, DEFAULT)]
    values = _effective(static, [(default, SOURCE_DEFAULT), (own, SOURCE_BROKER)])
    names = {n for n in CONFIGS if n not in INTERNAL} | set(static) | set(default) | set(own)
    return [_entry(k, values.get(k, KAFKA_DEFAULTS.get(k)), layers, True, synonyms)
            for k in sorted(names) if keys is None or k in keys]
