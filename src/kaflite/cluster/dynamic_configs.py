"""Dynamic broker configs: set while the cluster runs, for one broker or for all of them.

As Kafka's ``kafka-configs --entity-type brokers``: IncrementalAlterConfigs and
AlterConfigs on a BROKER resource named by a broker id (that broker alone,
DYNAMIC_BROKER_CONFIG) or by the empty string (the cluster-wide default,
DYNAMIC_DEFAULT_BROKER_CONFIG). The controller keeps them (``Controller.broker_configs``,
ConfigRecords of resource type BROKER in the metadata log), every broker reads them.

A value resolves in Kafka's order: the broker's own dynamic value, the cluster-wide
dynamic one, the value the broker was started with, the default. kaflite's brokers
apply the dynamic values of the topic configs' broker synonyms (``log.retention.ms``,
``log.segment.bytes``, ``message.max.bytes``, ``min.insync.replicas`` ...) to every
topic that does not override them, at once, and the replication throttle's rates
(``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``,
``kaflite.cluster.quotas.replication``) at the next fetch. The other configs Kafka can change
dynamically (thread pools, the cleaner's I/O rate, connection limits) are stored and
described as Kafka does; kaflite has no such pools or limits to resize. What Kafka
refuses, kaflite refuses with Kafka's error and message: a config read only at start,
a broker-only config at the default level, an SSL config without a listener prefix,
a value of the wrong type, another broker's id, and a cleaner left with 1 MB of dedupe
buffer a thread or less, or whose thread count more than halves or doubles at once;
and ``cordoned.log.dirs`` changed below ``metadata.version`` 4.3-IV0 (kaflite stores
it from that level on, and cordons nothing: docs/architecture.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kaflite.cluster._kafka_broker_configs import (
    BROKER_LEVEL_ONLY,
    BROKER_QUOTA_CONFIGS,
    DYNAMIC_TYPES,
    LISTENER_LEVEL_ONLY,
    STATIC,
)
from kaflite.protocol import errors

__all__ = ["DEFAULT", "SOURCE_BROKER", "SOURCE_DEFAULT", "BrokerConfigStore",
           "check_metadata_version", "config_type", "lookup", "resource_node", "validate"]

DEFAULT = ""                       # the resource name of the cluster-wide default
SOURCE_BROKER = "DYNAMIC_BROKER_CONFIG"
SOURCE_DEFAULT = "DYNAMIC_DEFAULT_BROKER_CONFIG"

#: resource name ("" or a broker id) -> config -> value
BrokerConfigStore = dict[str, dict[str, str]]


def resource_node(name: str, node_id: int, *, describe: bool) -> int | None:
    """The broker a BROKER resource names (None: the default), checked as Kafka checks it:
    a broker answers for itself and for the default only."""
    if name == DEFAULT:
        return None
    try:
        node = int(name)
    except ValueError:
        raise errors.InvalidRequestError(
            f"Node id must be an integer, but it is: {name}") from None
    if node != node_id:
        also = " or empty string" if describe else ""
        raise errors.InvalidRequestError(
            f"Unexpected broker id, expected {node_id}{also}, but received {name}")
    return node


# ``listener.name.<listener>.<config>``: a config for one listener (Kafka's pattern)
LISTENER_PREFIXED = re.compile(r"listener\.name\.[^.]*\.(.*)")
# the listener configs Kafka takes at the cluster-wide level too
_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate",
                                     "num.network.threads"})


def config_type(name: str) -> str | None:
    """Kafka's type of a dynamic broker config (None: not one Kafka knows); a
    listener-prefixed one has its base config's type."""
    kind = DYNAMIC_TYPES.get(name)
    if kind is None:
        match = LISTENER_PREFIXED.fullmatch(name)
        if match is not None:
            kind = DYNAMIC_TYPES.get(match.group(1))
    return kind


def _listed(names: list[str]) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def _value_error(name: str, value: str) -> str | None:
    kind = config_type(name)
    try:
        if kind in ("INT", "SHORT", "LONG"):
            if int(value) < 0 and name in BROKER_QUOTA_CONFIGS:
                return "Value must be at least 0"
        elif kind == "DOUBLE":
            float(value)
        elif kind == "BOOLEAN" and value.strip().lower() not in ("true", "false"):
            return "Expected value to be either true or false"
    except ValueError:
        return f"Not a number of type {kind}"
    return None


def _per_listener(name: str) -> bool:
    match = LISTENER_PREFIXED.fullmatch(name)
    return match is not None and match.group(1) not in _CLUSTER_LEVEL_LISTENER


def validate(name: str, configs: Mapping[str, str]) -> None:
    """Refuse what Kafka refuses for BROKER resource ``name`` (raises ``KafkaError``)."""
    static = [k for k in configs if k in STATIC]
    if static:
        raise errors.InvalidRequestError(
            f"Cannot update these configs dynamically: {_listed(static)}")
    listener = [k for k in configs if k in LISTENER_LEVEL_ONLY]
    if listener:
        raise errors.InvalidRequestError(
            "These security configs can be dynamically updated only per-listener using "
            f"the listener prefix: {_listed(listener)}")
    if name == DEFAULT:
        broker_only = [k for k in configs if k in BROKER_LEVEL_ONLY or _per_listener(k)]
        if broker_only:
            raise errors.InvalidRequestError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_listed(broker_only)}")
    for key, value in configs.items():
        why = _value_error(key, value)
        if why is not None:     # Kafka checks a listener's config without its prefix
            match = LISTENER_PREFIXED.fullmatch(key)
            raise errors.InvalidRequestError(
                f"Invalid value {value} for configuration "
                f"{key if match is None else match.group(1)}: {why}")


def check_metadata_version(store: Mapping[str, Mapping[str, str]], name: str,
                           new: Mapping[str, str], cordoned_log_dirs: bool) -> None:
    """Kafka's ``ConfigurationControlManager``: a change of ``cordoned.log.dirs`` (set or
    removed) needs ``metadata.version`` 4.3-IV0 (``cordoned_log_dirs``)."""
    key = "cordoned.log.dirs"
    if not cordoned_log_dirs and store.get(name, {}).get(key) != new.get(key):
        raise errors.InvalidConfigError(
            f"The {key} configuration value cannot be set because it requires "
            "metadata.version >= 4.3-IV0")


def lookup(store: Mapping[str, Mapping[str, str]], node_id: int, name: str
           ) -> tuple[str, str] | None:
    """``(value, source)`` of config ``name`` set dynamically for broker ``node_id``
    (its own value first, then the cluster-wide one); None if neither is set."""
    own = store.get(str(node_id))
    if own is not None and name in own:
        return own[name], SOURCE_BROKER
    default = store.get(DEFAULT)
    if default is not None and name in default:
        return default[name], SOURCE_DEFAULT
    return None


# The log cleaner's settings and their defaults (Kafka's CleanerConfig)
CLEANER_THREADS, DEDUPE_BUFFER = "log.cleaner.threads", "log.cleaner.dedupe.buffer.size"
_CLEANER_DEFAULTS = {CLEANER_THREADS: "1", DEDUPE_BUFFER: "134217728"}
MIN_DEDUPE_PER_THREAD = 1024 * 1024


def effective(store: Mapping[str, Mapping[str, str]], node_id: int,
              static: Mapping[str, str], name: str) -> str:
    """Broker ``node_id``'s value of cleaner setting ``name``: dynamic, static, default."""
    found = lookup(store, node_id, name)
    if found is not None:
        return found[0]
    return static.get(name, _CLEANER_DEFAULTS[name])


def check_cleaner(store: Mapping[str, Mapping[str, str]], name: str, new: Mapping[str, str],
                  node_id: int, static: Mapping[str, str]) -> None:
    """What Kafka refuses of a change to the cleaner's threads or memory, for the broker
    that takes the request: the new configuration must keep more than 1 MB of dedupe
    buffer per thread (``KafkaConfig``'s check), and the thread count may neither more
    than halve nor more than double (``LogCleaner.validateReconfiguration``)."""
    if CLEANER_THREADS not in new and DEDUPE_BUFFER not in new and \
            not {CLEANER_THREADS, DEDUPE_BUFFER} & set(store.get(name, {})):
        return
    after = {**store, name: dict(new)}
    try:
        threads = int(effective(after, node_id, static, CLEANER_THREADS))
        buffer = int(effective(after, node_id, static, DEDUPE_BUFFER))
        current = int(effective(store, node_id, static, CLEANER_THREADS))
    except ValueError:
        return      # a value of the wrong type is refused by ``validate``
    # In Kafka's words, as a Kafka 4.4 broker answers (INVALID_REQUEST each): its new
    # KafkaConfig divides the buffer by the threads, then the cleaner checks the change.
    if threads == 0:
        raise errors.InvalidRequestError("/ by zero")
    per_thread = abs(buffer) // abs(threads) * (1 if (buffer < 0) == (threads < 0) else -1)
    if per_thread <= MIN_DEDUPE_PER_THREAD:      # Java's division, toward zero
        raise errors.InvalidRequestError(
            f"requirement failed: {DEDUPE_BUFFER} must be at least 1MB per cleaner thread.")
    if threads < current // 2:
        why = f"cannot be reduced to less than half the current value {current}"
    elif threads > current * 2:
        why = f"cannot be increased to more than double the current value {current}"
    else:
        return
    raise errors.InvalidRequestError(
        "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner threads "
        f"{why} for configuration Invalid dynamic configuration")
