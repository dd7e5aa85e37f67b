"""Broker and topic configuration: Kafka's names, defaults and validation.

Topic configs fall back to the broker's ``log.*`` equivalents (Kafka's
"synonyms"), then to Kafka's defaults. DescribeConfigs reports each value with
its source: DYNAMIC_TOPIC_CONFIG (set on the topic), DYNAMIC_BROKER_CONFIG or
DYNAMIC_DEFAULT_BROKER_CONFIG (the synonym set while the cluster runs,
``kaflite.cluster.dynamic_configs``), STATIC_BROKER_CONFIG (set on the broker at
start) or DEFAULT_CONFIG.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kaflite.cluster.delegation_tokens import DEFAULTS as DELEGATION_TOKEN_DEFAULTS
from kaflite.cluster.internal_topics import DEFAULTS as INTERNAL_TOPIC_DEFAULTS
from kaflite.cluster.quotas.replication import (
    FOLLOWER_REPLICAS,
    LEADER_REPLICAS,
    valid_throttled_replicas,
)
from kaflite.cluster.request_log_writer import REQUEST_LOG_DEFAULTS
from kaflite.cluster.share._config import SHARE_DEFAULTS
from kaflite.config import ConfigError

__all__ = [
    "BROKER_DEFAULTS",
    "SOURCE_CODES",
    "TOPIC_CONFIGS",
    "UNIT_SYNONYMS",
    "BrokerConfig",
    "ConfigDef",
    "effective_topic_configs",
    "unit_synonym",
    "validate_topic_configs",
]


# Kafka's ConfigSource codes (DescribeConfigs, CreateTopics)
SOURCE_CODES = {"UNKNOWN": 0, "DYNAMIC_TOPIC_CONFIG": 1, "DYNAMIC_BROKER_CONFIG": 2,
                "DYNAMIC_DEFAULT_BROKER_CONFIG": 3, "STATIC_BROKER_CONFIG": 4,
                "DEFAULT_CONFIG": 5, "DYNAMIC_BROKER_LOGGER_CONFIG": 6,
                "CLIENT_METRICS_CONFIG": 7, "DYNAMIC_GROUP_CONFIG": 8}


@dataclass(frozen=True)
class ConfigDef:
    name: str
    default: str | None
    type: str  # BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD
    broker_synonym: str | None = None
    check: Callable[[str], bool] | None = None
    sensitive: bool = False


def _int(lo: int = -(1 << 63), hi: int = (1 << 63) - 1) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        try:
            return lo <= int(v) <= hi
        except ValueError:
            return False
    return check


def _choice(*options: str) -> Callable[[str], bool]:
    def check(v: str) -> bool:
        return all(part.strip() in options for part in v.split(",")) and bool(v.strip())
    return check


def _bool(v: str) -> bool:
    return v.lower() in ("true", "false")


# Kafka 4.0 topic configs (name, default, type, broker synonym), those kaflite has.
TOPIC_CONFIGS: dict[str, ConfigDef] = {c.name: c for c in [
    ConfigDef("cleanup.policy", "delete", "LIST", "log.cleanup.policy", _choice("delete", "compact")),
    ConfigDef("compression.type", "producer", "STRING", "compression.type",
              _choice("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    ConfigDef("delete.retention.ms", "86400000", "LONG", "log.cleaner.delete.retention.ms", _int(0)),
    ConfigDef("file.delete.delay.ms", "60000", "LONG", "log.segment.delete.delay.ms", _int(0)),
    ConfigDef("flush.messages", "9223372036854775807", "LONG", "log.flush.interval.messages", _int(1)),
    ConfigDef("flush.ms", "9223372036854775807", "LONG", "log.flush.interval.ms", _int(0)),
    # the replicas replication throttling applies to (KIP-73, kaflite.cluster.quotas.replication)
    ConfigDef(FOLLOWER_REPLICAS, "", "LIST", None, valid_throttled_replicas),
    ConfigDef("index.interval.bytes", "4096", "INT", "log.index.interval.bytes", _int(0, 2**31 - 1)),
    ConfigDef(LEADER_REPLICAS, "", "LIST", None, valid_throttled_replicas),
    ConfigDef("max.compaction.lag.ms", "9223372036854775807", "LONG", "log.cleaner.max.compaction.lag.ms", _int(1)),
    ConfigDef("max.message.bytes", "1048588", "INT", "message.max.bytes", _int(0, 2**31 - 1)),
    ConfigDef("message.timestamp.type", "CreateTime", "STRING", "log.message.timestamp.type",
              _choice("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.before.max.ms", "9223372036854775807", "LONG",
              "log.message.timestamp.before.max.ms", _int(0)),
    ConfigDef("message.timestamp.after.max.ms", "3600000", "LONG",
              "log.message.timestamp.after.max.ms", _int(0)),
    ConfigDef("min.cleanable.dirty.ratio", "0.5", "DOUBLE", "log.cleaner.min.cleanable.ratio"),
    ConfigDef("min.compaction.lag.ms", "0", "LONG", "log.cleaner.min.compaction.lag.ms", _int(0)),
    ConfigDef("min.insync.replicas", "1", "INT", "min.insync.replicas", _int(1, 2**31 - 1)),
    ConfigDef("preallocate", "false", "BOOLEAN", "log.preallocate", _bool),
    ConfigDef("retention.bytes", "-1", "LONG", "log.retention.bytes", _int(-1)),
    ConfigDef("retention.ms", "604800000", "LONG", "log.retention.ms", _int(-1)),
    ConfigDef("segment.bytes", "1073741824", "INT", "log.segment.bytes", _int(14, 2**31 - 1)),
    ConfigDef("segment.index.bytes", "10485760", "INT", "log.index.size.max.bytes", _int(4)),
    ConfigDef("segment.jitter.ms", "0", "LONG", "log.roll.jitter.ms", _int(0)),
    ConfigDef("segment.ms", "604800000", "LONG", "log.roll.ms", _int(1)),
    ConfigDef("unclean.leader.election.enable", "false", "BOOLEAN",
              "unclean.leader.election.enable", _bool),
]}

# A topic config's broker synonyms in another unit, after its first one (in Kafka's order,
# each with the factor to the topic config's milliseconds): a broker started with
# log.retention.hours=1 keeps its topics' records an hour (ServerTopicConfigSynonyms).
# Only the milliseconds forms may change while the cluster runs.
UNIT_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "retention.ms": (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000)),
    "segment.ms": (("log.roll.hours", 3_600_000),),
    "segment.jitter.ms": (("log.roll.jitter.hours", 3_600_000),),
}


def unit_synonym(name: str, props: Mapping[str, str]) -> tuple[str, str] | None:
    """The first of topic config ``name``'s other-unit synonyms the broker was started
    with: (that synonym, the value in the topic config's unit); None without one. A
    negative retention is -1 (unlimited), as Kafka has it."""
    for synonym, factor in UNIT_SYNONYMS.get(name, ()):
        raw = props.get(synonym)
        if raw is None:
            continue
        try:
            value = int(raw) * factor
        except ValueError:
            continue
        return synonym, str(-1 if value < 0 else value)
    return None


# Broker configs kaflite honours, with Kafka's defaults.
BROKER_DEFAULTS: dict[str, str] = {
    "auto.create.topics.enable": "true",
    "num.partitions": "1",
    "default.replication.factor": "1",
    **INTERNAL_TOPIC_DEFAULTS,          # offsets.topic.*, transaction.state.log.*
    **SHARE_DEFAULTS,                   # group.share.*, share.coordinator.* (KIP-932)
    "min.insync.replicas": "1",
    "replica.lag.time.max.ms": "30000",
    # a multi-process cluster's broker liveness (KRaft's BrokerHeartbeat)
    "broker.heartbeat.interval.ms": "2000",
    "broker.session.timeout.ms": "9000",
    "replica.fetch.wait.max.ms": "500",
    "replica.fetch.max.bytes": "1048576",
    "replica.fetch.backoff.ms": "1000",
    "replica.high.watermark.checkpoint.interval.ms": "5000",
    "socket.request.max.bytes": "104857600",
    # Kafka's default is -1 (unbounded); see cluster/request_memory.py
    "queued.max.request.bytes": "268435456",
    "connections.max.idle.ms": "600000",
    "quota.window.num": "11",                  # client quotas' rate windows
    "quota.window.size.seconds": "1",
    "replication.quota.window.num": "11",      # replication throttling's rate windows
    "replication.quota.window.size.seconds": "1",
    "message.max.bytes": "1048588",
    "log.retention.check.interval.ms": "300000",
    "group.initial.rebalance.delay.ms": "3000",
    "offsets.retention.minutes": "10080",
    "delete.topic.enable": "true",
    "log.flush.interval.messages": "9223372036854775807",
    # authorization (kaflite.cluster.acl): any non-empty class name turns it on
    "authorizer.class.name": "",
    "allow.everyone.if.no.acl.found": "false",
    # serve the versions a schema marks unstable (kaflite.cluster.handlers)
    "unstable.api.versions.enable": "false",
    # delegation tokens (kaflite.cluster.delegation_tokens); on with a secret key
    **DELEGATION_TOKEN_DEFAULTS,
    # kaflite's own: the request log (kaflite.cluster.request_log_writer)
    **REQUEST_LOG_DEFAULTS,
}


# Where Kafka's own development setup (its config/server.properties) departs from the
# production defaults above, the embedded cluster (and so ``kaflite up`` and the pytest
# fixture) follows the development setup; a config given to the cluster still wins.
# The internal topics' replication (3, min.insync 2 in production, 1 in Kafka's
# development file) needs no entry: kaflite caps it at the number of brokers.
DEVELOPMENT_DEFAULTS: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",   # production 3000: a group forms at once
}


# Listener and security configs kaflite reads, that have no default value here
# (kaflite.cluster.listeners and kaflite.cluster.auth); ``listener.name.<l>.*``
# overrides of them are known too.
SECURITY_CONFIGS = frozenset({
    "listeners", "advertised.listeners", "listener.security.protocol.map",
    "inter.broker.listener.name", "security.inter.broker.protocol",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password", "ssl.truststore.type",
    "ssl.truststore.location", "ssl.truststore.certificates", "ssl.client.auth",
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.users", "connections.max.reauth.ms",
    "sasl.mechanism.inter.broker.protocol", "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.expected.audience",
    "super.users", "delegation.token.secret.key",
})


@dataclass
class BrokerConfig:
    """Broker-wide settings: Kafka's defaults overridden by ``props``."""

    props: dict[str, str]

    @classmethod
    def from_props(cls, props: Mapping[str, object] | None = None) -> BrokerConfig:
        merged = dict(BROKER_DEFAULTS)
        for key, value in (props or {}).items():
            merged[key] = str(value).lower() if isinstance(value, bool) else str(value)
        return cls(merged)

    def get(self, name: str) -> str:
        return self.props[name]

    def unused(self) -> list[str]:
        """Names set here that no part of kaflite reads (Kafka logs these as unused)."""
        from kaflite.cluster.group_configs import SHARE_GROUP_DEFAULTS
        from kaflite.cluster.groups._config import GROUP_DEFAULTS
        from kaflite.cluster.txn._config import TXN_DEFAULTS

        known = set(BROKER_DEFAULTS) | {c.broker_synonym for c in TOPIC_CONFIGS.values()
                                        if c.broker_synonym} | SECURITY_CONFIGS | \
            set(GROUP_DEFAULTS) | set(SHARE_GROUP_DEFAULTS) | set(TXN_DEFAULTS) | \
            {other for others in UNIT_SYNONYMS.values() for other, _ in others}
        return sorted(name for name in set(self.props) - known
                      if not name.startswith("listener.name."))

    def int(self, name: str) -> int:
        return int(self.props[name])

    def bool(self, name: str) -> bool:
        return self.props[name].lower() == "true"


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check names and values; return the non-null ones. Raises ``ConfigError``."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise ConfigError(name, f"Unknown topic config name: {name}")
        if value is None:
            continue
        if definition.check is not None and not definition.check(value):
            raise ConfigError(name, f"Invalid value {value} for configuration {name}")
        out[name] = value
    return out


def effective_topic_configs(
    topic_configs: Mapping[str, str], broker: BrokerConfig,
    dynamic: Callable[[str], tuple[str, str] | None] | None = None,
) -> dict[str, tuple[str | None, str]]:
    """Every topic config: ``name -> (value, source)`` in DescribeConfigs terms.
    ``dynamic`` gives a broker config's dynamic value and source, if it has one
    (``kaflite.cluster.dynamic_configs.lookup``)."""
    out: dict[str, tuple[str | None, str]] = {}
    for name, definition in TOPIC_CONFIGS.items():
        if name in topic_configs:
            out[name] = (topic_configs[name], "DYNAMIC_TOPIC_CONFIG")
        elif dynamic is not None and definition.broker_synonym is not None and \
                (found := dynamic(definition.broker_synonym)) is not None:
            out[name] = found
        elif (synonym := definition.broker_synonym) in broker.props and \
                broker.props[synonym] != BROKER_DEFAULTS.get(synonym):
            # Set on the broker at start (a default would not be in props or would match).
            out[name] = (broker.props[synonym], "STATIC_BROKER_CONFIG")
        elif (other := unit_synonym(name, broker.props)) is not None:
            out[name] = (other[1], "STATIC_BROKER_CONFIG")
        else:
            out[name] = (definition.default, "DEFAULT_CONFIG")
    return out
