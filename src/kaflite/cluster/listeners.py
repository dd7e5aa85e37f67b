"""Listeners, with Kafka's config names.

``listeners`` is a comma-separated list of ``NAME://host:port``; each name maps
to a security protocol through ``listener.security.protocol.map`` (Kafka's
default maps each protocol's own name to itself, so ``SASL_SSL://...`` needs no
entry). ``advertised.listeners`` gives the address clients are told for each
listener (the bound one when it is missing). ``inter.broker.listener.name``
names the listener the brokers use among themselves.

The embedded cluster runs several brokers from one config, so a listener's
port is a template: port 0 is any free port, and a non-zero port P gives
broker ``i`` the port P + i. A listener's own settings may be overridden with
Kafka's per-listener prefix ``listener.name.<name lowercased>.<config>``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kaflite.config import ConfigError

__all__ = [
    "DEFAULT_PROTOCOL_MAP",
    "SECURITY_PROTOCOLS",
    "ListenerSpec",
    "inter_broker_listener",
    "listener_config",
    "parse_listeners",
    "parse_protocol_map",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)$")


@dataclass(frozen=True)
class ListenerSpec:
    name: str              # upper case, as Kafka normalises it
    host: str
    port: int
    security_protocol: str

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def for_broker(self, index: int) -> ListenerSpec:
        """This listener for the ``index``-th broker of a cluster (port P -> P + index)."""
        return ListenerSpec(self.name, self.host, self.port + index if self.port else 0,
                            self.security_protocol)

    def url(self, port: int | None = None) -> str:
        return f"{self.name}://{self.host}:{self.port if port is None else port}"


def parse_protocol_map(value: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (value or DEFAULT_PROTOCOL_MAP).split(","):
        if not item.strip():
            continue
        name, sep, proto = item.strip().partition(":")
        if not sep or proto.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map",
                              f"Invalid value {item} for configuration "
                              "listener.security.protocol.map")
        out[name.upper()] = proto.upper()
    return out


def parse_listeners(value: str, protocol_map: Mapping[str, str], default_host: str,
                    config_name: str = "listeners") -> list[ListenerSpec]:
    """``NAME://host:port,...`` -> specs; an empty host is ``default_host``."""
    specs: list[ListenerSpec] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        m = _LISTENER.match(item)
        if m is None:
            raise ConfigError(config_name, f"Invalid value {item} for configuration "
                              f"{config_name}: expected NAME://host:port")
        name = m.group(1).upper()
        proto = protocol_map.get(name)
        if proto is None:
            raise ConfigError(config_name, f"No security protocol defined for listener {name}")
        host = m.group(2).strip("[]") or default_host
        specs.append(ListenerSpec(name, host, int(m.group(3)), proto))
    names = [s.name for s in specs]
    if not specs or len(set(names)) != len(names):
        raise ConfigError(config_name, f"{config_name} must name each listener once: {value}")
    return specs


def inter_broker_listener(props: Mapping[str, str], listeners: list[ListenerSpec]) -> str:
    """``inter.broker.listener.name``; else the listener named by
    ``security.inter.broker.protocol`` (Kafka's default PLAINTEXT); else the first."""
    names = [s.name for s in listeners]
    name = props.get("inter.broker.listener.name")
    if name:
        if name.upper() not in names:
            raise ConfigError("inter.broker.listener.name",
                              f"inter.broker.listener.name must be a listener name: {name}")
        return name.upper()
    fallback = props.get("security.inter.broker.protocol", "PLAINTEXT").upper()
    return fallback if fallback in names else names[0]


def listener_config(props: Mapping[str, str], listener: str, name: str) -> str | None:
    """``listener.name.<listener>.<name>``, else ``<name>`` (None when neither is set)."""
    specific = props.get(f"listener.name.{listener.lower()}.{name}")
    return specific if specific is not None else props.get(name)
