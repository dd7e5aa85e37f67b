"""Kafka client properties: names, defaults and validation.

Every property is declared once, with Kafka's own dotted name, its type, its
default (the Java client's) and the roles that accept it. A client takes its
configuration as a dict with the dotted names, as keyword arguments with
underscores, or both (keyword arguments win)::

    resolve("producer", {"bootstrap.servers": "b:9092"}, linger_ms=5)

An unknown property, a value of the wrong type or one out of range is a
``ConfigError`` at construction time, and the message names the property.
Values are normalised: durations and sizes become ``int``, booleans accept
``"true"``/``"false"``, lists accept comma-separated strings, and ``acks``
accepts ``"all"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

__all__ = ["PROPERTIES", "SASL_MECHANISMS", "SECURITY_PROTOCOLS", "ClientConfig", "ConfigError",
           "ConfigValue", "Property", "redacted", "resolve"]

# A property's value once resolved: "int" and "bool" properties hold ints and bools,
# "str" ones strings, "list" ones lists of strings, "callable" ones the user's function
# (a serializer, oauth_cb), and nullable ones may hold None.
ConfigValue = str | int | bool | list[str] | Callable[..., object] | None

COMMON, PRODUCER, CONSUMER, ADMIN = "common", "producer", "consumer", "admin"
ROLES = (PRODUCER, CONSUMER, ADMIN)


class ConfigError(ValueError):
    """An unknown or invalid configuration property, of a client or of a topic.

    ``property`` names it; ``message`` is the text alone (a broker sends it in
    its INVALID_CONFIG answers, as Kafka words them)."""

    def __init__(self, name: str, message: str) -> None:
        self.property = name
        self.message = message
        super().__init__(f"{name}: {message}")


@dataclass(frozen=True)
class Property:
    name: str
    kind: str                       # int, bool, str, list, callable
    default: ConfigValue
    roles: frozenset[str]
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] | None = None
    nullable: bool = False
    check: Callable[[ConfigValue], str | None] | None = None
    sensitive: bool = False        # a secret: never shown in reprs, logs or events


PROPERTIES: dict[str, Property] = {}


def _p(name: str, kind: str, default: ConfigValue, *roles: str, minimum: int | None = None,
       maximum: int | None = None, choices: tuple[str, ...] | None = None, nullable: bool = False,
       check: Callable[[ConfigValue], str | None] | None = None,
       sensitive: bool = False) -> None:
    PROPERTIES[name] = Property(name, kind, default, frozenset(roles or (COMMON,)),
                                minimum=minimum, maximum=maximum, choices=choices, nullable=nullable,
                                check=check, sensitive=sensitive)


def _acks(value: ConfigValue) -> str | None:
    return None if value in (-1, 0, 1) else "must be one of all, -1, 0, 1"


def _group_protocol(value: ConfigValue) -> str | None:
    # Java parses GroupProtocol case-insensitively ("CONSUMER" or "consumer")
    if isinstance(value, str) and value.lower() in ("classic", "consumer"):
        return None
    return f"must be one of classic, consumer, got {value!r}"


def _mechanism(value: ConfigValue) -> str | None:
    if value == "GSSAPI" or value in SASL_MECHANISMS:
        return None
    return f"{value} is not supported by kaflite (supported: {', '.join(SASL_MECHANISMS)})"


_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
# librdkafka's aliases: the name a user may give -> kaflite's (Kafka's) name
ALIASES = {"sasl.mechanisms": "sasl.mechanism", "sasl.user": "sasl.username",
           "security.protocol.type": "security.protocol"}
# values a user may spell in lower case (librdkafka accepts "sasl_ssl")
_UPPER = ("security.protocol", "sasl.mechanism")
# a common property whose default differs for one role: (role, name) -> default
ROLE_DEFAULTS: dict[tuple[str, str], ConfigValue] = {("admin", "enable.metrics.push"): False}
_ASSIGNORS = ("range", "roundrobin", "sticky", "cooperative-sticky")

# -- common ------------------------------------------------------------------------
_p("bootstrap.servers", "list", None)
_p("client.id", "str", "kaflite")
_p("client.rack", "str", "")
_p("request.timeout.ms", "int", 30_000, minimum=0)
_p("metadata.max.age.ms", "int", 300_000, minimum=0)
_p("connections.max.idle.ms", "int", 540_000, minimum=-1)
_p("reconnect.backoff.ms", "int", 50, minimum=0)
_p("reconnect.backoff.max.ms", "int", 1000, minimum=0)
_p("retry.backoff.ms", "int", 100, minimum=0)
_p("retry.backoff.max.ms", "int", 1000, minimum=0)
_p("socket.connection.setup.timeout.ms", "int", 10_000, minimum=0)
_p("socket.connection.setup.timeout.max.ms", "int", 30_000, minimum=0)
_p("max.in.flight.requests.per.connection", "int", 5, minimum=1)
_p("metadata.recovery.strategy", "str", "rebootstrap", choices=("none", "rebootstrap"))
_p("metadata.recovery.rebootstrap.trigger.ms", "int", 300_000, minimum=0)
# KIP-1242: say which cluster and node a connection means in ApiVersions v5, so that a
# broker of another cluster behind the same address answers REBOOTSTRAP_REQUIRED
_p("metadata.cluster.check.enable", "bool", True)
# SO_SNDBUF / SO_RCVBUF. Java's defaults are 131072 and 65536; kaflite's are -1 (the OS
# default, as librdkafka's), because a fixed 64 KiB receive buffer turns off Linux's
# autotuning and cost a Python reader 40% more CPU per byte fetched (docs/benchmarks.md).
_p("send.buffer.bytes", "int", -1, minimum=-1)
_p("receive.buffer.bytes", "int", -1, minimum=-1)
_p("security.protocol", "str", "PLAINTEXT", choices=SECURITY_PROTOCOLS)
_p("client.software.name", "str", "kaflite")
_p("client.software.version", "str", "0.1.0")
_p("allow.auto.create.topics", "bool", True)
_p("max.frame.bytes", "int", 104_857_600, minimum=1024)
_p("events.max", "int", 10_000, minimum=0)
# KIP-714: push the client's metrics to the cluster when a subscription asks for them
# (kaflite.client.telemetry). On by default, but off for the admin client, as Java's
# AdminClientConfig has it (ROLE_DEFAULTS).
_p("enable.metrics.push", "bool", True)

# -- security (librdkafka's names and defaults) ----------------------------------------
# librdkafka's default mechanism is GSSAPI (Kerberos), which kaflite does not implement:
# it is accepted as a value only so that the error names the real problem.
_p("sasl.mechanism", "str", "GSSAPI", check=_mechanism)
_p("sasl.username", "str", None, nullable=True)
_p("sasl.password", "str", None, nullable=True, sensitive=True)
# kaflite's: log in with a delegation token over SCRAM (Java's ScramLoginModule option
# tokenauth=true): sasl.username is the token id, sasl.password the base64 of its HMAC
_p("sasl.scram.tokenauth", "bool", False)
_p("ssl.ca.location", "str", None, nullable=True)
_p("ssl.certificate.location", "str", None, nullable=True)
_p("ssl.key.location", "str", None, nullable=True)
_p("ssl.key.password", "str", None, nullable=True, sensitive=True)
_p("ssl.endpoint.identification.algorithm", "str", "https", choices=("https", "none"))
_p("enable.ssl.certificate.verification", "bool", True)
_p("oauth_cb", "callable", None, nullable=True)
_p("sasl.oauthbearer.method", "str", "default", choices=("default", "oidc"))
_p("sasl.oauthbearer.client.id", "str", None, nullable=True)
_p("sasl.oauthbearer.client.secret", "str", None, nullable=True, sensitive=True)
_p("sasl.oauthbearer.token.endpoint.url", "str", None, nullable=True)
_p("sasl.oauthbearer.scope", "str", None, nullable=True)
_p("sasl.oauthbearer.config", "str", None, nullable=True, sensitive=True)

# -- producer ----------------------------------------------------------------------
_p("acks", "int", -1, PRODUCER, check=_acks)
_p("linger.ms", "int", 5, PRODUCER, minimum=0)
_p("batch.size", "int", 1_048_576, PRODUCER, minimum=0)   # see docs/benchmarks.md "Producer defaults"
_p("buffer.memory", "int", 33_554_432, PRODUCER, minimum=0)
_p("max.block.ms", "int", 60_000, PRODUCER, minimum=0)
_p("max.request.size", "int", 1_048_576, PRODUCER, minimum=1)
_p("compression.type", "str", "none", PRODUCER, choices=_CODECS)
_p("enable.idempotence", "bool", True, PRODUCER)
_p("delivery.timeout.ms", "int", 120_000, PRODUCER, minimum=0)
_p("retries", "int", 2_147_483_647, PRODUCER, minimum=0)
_p("partitioner", "str", "default", PRODUCER,
   choices=("default", "murmur2", "murmur2_random", "consistent_random", "random",
            "round_robin"))
_p("partitioner.ignore.keys", "bool", False, PRODUCER)
_p("partitioner.adaptive.partitioning.enable", "bool", True, PRODUCER)
_p("transactional.id", "str", None, PRODUCER, nullable=True)
_p("transaction.timeout.ms", "int", 60_000, PRODUCER, minimum=1)
_p("key.serializer", "callable", None, PRODUCER, nullable=True)
_p("value.serializer", "callable", None, PRODUCER, nullable=True)

# -- consumer ----------------------------------------------------------------------
_p("group.id", "str", None, CONSUMER, ADMIN, nullable=True)
_p("group.instance.id", "str", None, CONSUMER, nullable=True)
_p("group.protocol", "str", "classic", CONSUMER, check=_group_protocol)
_p("group.remote.assignor", "str", None, CONSUMER, nullable=True)
_p("session.timeout.ms", "int", 45_000, CONSUMER, minimum=1)
_p("heartbeat.interval.ms", "int", 3_000, CONSUMER, minimum=1)
_p("max.poll.interval.ms", "int", 300_000, CONSUMER, minimum=1)
_p("rebalance.timeout.ms", "int", None, CONSUMER, nullable=True, minimum=1)
_p("auto.offset.reset", "str", "latest", CONSUMER, choices=("earliest", "latest", "none"))
_p("enable.auto.commit", "bool", True, CONSUMER)
_p("auto.commit.interval.ms", "int", 5_000, CONSUMER, minimum=0)
_p("fetch.min.bytes", "int", 1, CONSUMER, minimum=0)
_p("fetch.max.wait.ms", "int", 500, CONSUMER, minimum=0)
_p("max.partition.fetch.bytes", "int", 1_048_576, CONSUMER, minimum=0)
_p("fetch.max.bytes", "int", 52_428_800, CONSUMER, minimum=0)
_p("fetch.buffer.bytes", "int", 67_108_864, CONSUMER, minimum=1)
_p("max.poll.records", "int", 500, CONSUMER, minimum=1)
_p("isolation.level", "str", "read_uncommitted", CONSUMER,
   choices=("read_uncommitted", "read_committed"))
_p("partition.assignment.strategy", "list", ["range", "cooperative-sticky"], CONSUMER)
_p("check.crcs", "bool", True, CONSUMER)
_p("exclude.internal.topics", "bool", True, CONSUMER)
_p("key.deserializer", "callable", None, CONSUMER, nullable=True)
_p("value.deserializer", "callable", None, CONSUMER, nullable=True)

# -- admin -------------------------------------------------------------------------
_p("default.api.timeout.ms", "int", 60_000, CONSUMER, ADMIN, minimum=0)


def _coerce(prop: Property, value: object) -> ConfigValue:
    name, kind = prop.name, prop.kind
    if value is None:
        if prop.nullable or prop.default is None:
            return None
        raise ConfigError(name, "must not be null")
    if kind == "int":
        if name == "acks" and isinstance(value, str) and value.strip().lower() == "all":
            return -1
        if isinstance(value, bool):
            raise ConfigError(name, f"expected an integer, got {value!r}")
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ConfigError(name, f"expected an integer, got {value!r}") from None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise ConfigError(name, f"expected an integer, got {value!r}")
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise ConfigError(name, f"expected true or false, got {value!r}")
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(name, f"expected a string, got {value!r}")
        return value
    if kind == "list":
        if isinstance(value, str):
            items = [v.strip() for v in value.split(",")]
        elif isinstance(value, (list, tuple)):
            items = [str(v).strip() for v in value]
        else:
            raise ConfigError(name, f"expected a list or a comma-separated string, got {value!r}")
        return [v for v in items if v]
    if not callable(value):    # kind == "callable"
        raise ConfigError(name, f"expected a callable, got {type(value).__name__}")
    return value


def _validate(prop: Property, value: ConfigValue) -> None:
    if value is None:
        return
    name = prop.name
    if prop.minimum is not None and isinstance(value, int) and value < prop.minimum:
        raise ConfigError(name, f"must be at least {prop.minimum}, got {value}")
    if prop.maximum is not None and isinstance(value, int) and value > prop.maximum:
        raise ConfigError(name, f"must be at most {prop.maximum}, got {value}")
    if prop.choices is not None and value not in prop.choices:
        raise ConfigError(name, f"must be one of {', '.join(prop.choices)}, got {value!r}")
    if prop.check is not None:
        problem = prop.check(value)
        if problem:
            raise ConfigError(name, problem)


def _int(values: Mapping[str, ConfigValue], name: str) -> int:
    v = values[name]
    assert isinstance(v, int), name
    return v


def _optional_str(values: Mapping[str, ConfigValue], name: str) -> str | None:
    v = values[name]
    assert v is None or isinstance(v, str), name
    return v


class ClientConfig(Mapping[str, ConfigValue]):
    """A validated, read-only view of one client's properties (defaults filled in).

    Indexing gives a property's value as the union ``ConfigValue``; the typed
    getters (``int``, ``bool``, ``string``, ...) give it as its kind's type."""

    def __init__(self, role: str, values: dict[str, ConfigValue]) -> None:
        self.role = role
        self._values = values

    def __getitem__(self, name: str) -> ConfigValue:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def int(self, name: str) -> int:
        return _int(self._values, name)

    def bool(self, name: str) -> bool:
        return bool(self._values[name])

    def string(self, name: str) -> str:
        """A ``str`` property that is not nullable."""
        v = self._values[name]
        assert isinstance(v, str), name
        return v

    def optional_string(self, name: str) -> str | None:
        """A nullable ``str`` property."""
        return _optional_str(self._values, name)

    def strings(self, name: str) -> list[str]:
        """A ``list`` property."""
        v = self._values[name]
        assert isinstance(v, list), name
        return v

    def function(self, name: str) -> Callable[..., object] | None:
        """A ``callable`` property (a serializer, ``oauth_cb``): the user's function."""
        v = self._values[name]
        assert v is None or callable(v), name
        return v

    def __repr__(self) -> str:
        return f"ClientConfig({self.role}, {redacted(self._values)!r})"


def redacted(values: Mapping[str, object]) -> dict[str, object]:
    """``values`` with every sensitive property's value masked, for reprs and logs."""
    out = dict(values)
    for name, value in values.items():
        prop = PROPERTIES.get(name)
        if prop is not None and prop.sensitive and value is not None:
            out[name] = "[hidden]"
    return out


def resolve(role: str, config: Mapping[str, object] | None = None,
            **kwargs: object) -> ClientConfig:
    """Validate ``config`` and ``kwargs`` for a client of ``role``; fill in defaults.

    The values given may be anything (they come from users, files and command
    lines); each is checked and normalised to its property's kind here."""
    if role not in ROLES:
        raise ValueError(f"unknown client role {role!r}")
    given: dict[str, object] = dict(config or {})
    for key, value in kwargs.items():
        given[key if key in PROPERTIES else key.replace("_", ".")] = value
    out: dict[str, ConfigValue] = {}
    for name, value in given.items():
        name = ALIASES.get(name, name)
        if name in _UPPER and isinstance(value, str):
            value = value.strip().upper()
        prop = PROPERTIES.get(name)
        if prop is None:
            raise ConfigError(name, "unknown configuration property")
        if COMMON not in prop.roles and role not in prop.roles:
            raise ConfigError(name, f"is not {'an' if role[0] in 'aeiou' else 'a'} {role} property")
        coerced = _coerce(prop, value)
        _validate(prop, coerced)
        out[name] = coerced
    for name, prop in PROPERTIES.items():
        if name not in out and (COMMON in prop.roles or role in prop.roles):
            out[name] = ROLE_DEFAULTS.get((role, name), prop.default)
    servers = out.get("bootstrap.servers")
    if not isinstance(servers, list) or not servers:
        raise ConfigError("bootstrap.servers", "is required")
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError("bootstrap.servers", f"{server!r} is not host:port")
    _check_security(out)
    if role == PRODUCER:
        _check_producer(out, explicit=set(given))
    if role == CONSUMER:
        _check_consumer(out, explicit={ALIASES.get(n, n) for n in given})
    if _int(out, "reconnect.backoff.max.ms") < _int(out, "reconnect.backoff.ms"):
        out["reconnect.backoff.max.ms"] = out["reconnect.backoff.ms"]
    return ClientConfig(role, out)


def _check_producer(out: dict[str, ConfigValue], explicit: set[str]) -> None:
    # As in Java: idempotence is on by default, and quietly turned off when the
    # user asks for something it cannot do (acks != all, more than 5 in flight)
    # without having asked for idempotence explicitly.
    in_flight = _int(out, "max.in.flight.requests.per.connection")
    conflicts = out["acks"] != -1 or in_flight > 5
    if "enable.idempotence" not in explicit and conflicts:
        out["enable.idempotence"] = False
    explicit_idempotence = out["enable.idempotence"]
    if explicit_idempotence:
        if out["acks"] != -1:
            raise ConfigError("acks", "must be all (-1) when enable.idempotence is true")
        if in_flight > 5:
            raise ConfigError("max.in.flight.requests.per.connection",
                              "must be at most 5 when enable.idempotence is true")
    if out["transactional.id"] is not None and not explicit_idempotence:
        raise ConfigError("enable.idempotence", "must be true for a transactional producer")
    if _int(out, "delivery.timeout.ms") < _int(out, "linger.ms") + _int(out, "request.timeout.ms"):
        raise ConfigError("delivery.timeout.ms",
                          "must be at least linger.ms + request.timeout.ms")


def _check_security(out: dict[str, ConfigValue]) -> None:
    protocol = _optional_str(out, "security.protocol")
    if protocol is None or not protocol.startswith("SASL_"):
        return
    mechanism = out["sasl.mechanism"]
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError("sasl.mechanism", f"{mechanism} is not supported by kaflite "
                          f"(supported: {', '.join(SASL_MECHANISMS)})")
    if mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        for name in ("sasl.username", "sasl.password"):
            if out[name] is None:
                raise ConfigError(name, f"is required for sasl.mechanism {mechanism}")
    elif out["sasl.oauthbearer.method"] == "oidc":
        for name in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
                     "sasl.oauthbearer.token.endpoint.url"):
            if out[name] is None:
                raise ConfigError(name, "is required for sasl.oauthbearer.method oidc")


def _check_consumer(out: dict[str, ConfigValue], explicit: set[str]) -> None:
    protocol = out["group.protocol"] = str(out["group.protocol"]).lower()
    # Java's ConsumerConfig (Kafka 4): each protocol refuses the other one's settings
    # when they are given explicitly for a group member.
    unsupported = (("partition.assignment.strategy", "heartbeat.interval.ms",
                    "session.timeout.ms") if protocol == "consumer"
                   else ("group.remote.assignor",))
    given = [n for n in unsupported if n in explicit and out[n] not in (None, "", [])]
    if given and out["group.id"] is not None:
        raise ConfigError(given[0], f"{', '.join(given)} cannot be set when group.protocol="
                          f"{protocol.upper()}")
    strategies = out["partition.assignment.strategy"]
    assert isinstance(strategies, list)
    for s in strategies:
        if s not in _ASSIGNORS:
            raise ConfigError("partition.assignment.strategy",
                              f"unknown assignor {s!r} (known: {', '.join(_ASSIGNORS)})")
    if not strategies:
        raise ConfigError("partition.assignment.strategy", "needs at least one assignor")
    if _int(out, "heartbeat.interval.ms") >= _int(out, "session.timeout.ms"):
        raise ConfigError("heartbeat.interval.ms", "must be lower than session.timeout.ms")
    if out["group.instance.id"] is not None and out["group.id"] is None:
        raise ConfigError("group.instance.id", "needs group.id")
    if out["rebalance.timeout.ms"] is None:
        out["rebalance.timeout.ms"] = out["max.poll.interval.ms"]
