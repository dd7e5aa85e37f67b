"""Spark's Kafka source and sink options: names, defaults and validation.

A Spark user must feel at home, so the option names, defaults and the checks
are those of Spark's own ``kafka`` format (``KafkaSourceProvider``), and an
option Spark rejects is rejected here with the same kind of message. Option
names are case-insensitive, as in Spark.

Source options::

    kafka.bootstrap.servers                     required
    subscribe | subscribePattern | assign       exactly one
    startingOffsets                             latest (streaming) / earliest (batch)
    endingOffsets                               latest (batch only)
    startingTimestamp, startingOffsetsByTimestamp,
    endingTimestamp, endingOffsetsByTimestamp   timestamps instead of offsets
    startingOffsetsByTimestampStrategy          error | latest (no offset for the timestamp)
    failOnDataLoss                              true
    maxOffsetsPerTrigger, minOffsetsPerTrigger, maxTriggerDelay (15m)
    minPartitions, maxRecordsPerPartition
    includeHeaders                              false
    groupIdPrefix                               spark-kafka-source / spark-kafka-relation
    kafka.*                                     passed to the kaflite client (Java's
                                                security names mapped: spark/_security.py)

Precedence of the starting/ending choices is Spark's: a global timestamp, then
offsets by timestamp, then offsets.

Errors are ``KafkaOptionError`` (a ``ValueError``, Python's counterpart of the
``IllegalArgumentException`` Spark throws), raised when the reader or writer
is created, so ``load()``/``start()``/``save()`` fail before any job runs.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kaflite.client import TopicPartition
from kaflite.config import PROPERTIES
from kaflite.spark._security import java_security_options

__all__ = [
    "EARLIEST",
    "LATEST",
    "SHORT_CLIENT_NAMES",
    "SINK_CLIENT_ID",
    "Assign",
    "EarliestOffsets",
    "GlobalTimestamp",
    "KafkaOptionError",
    "LatestOffsets",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptions",
    "SpecificOffsets",
    "SpecificTimestamps",
    "Strategy",
    "Subscribe",
    "SubscribePattern",
    "client_config",
    "parse_sink_options",
    "parse_source_options",
    "parse_time_ms",
]

log = logging.getLogger("kaflite.spark")

# The sentinels of Spark's offset JSON (KafkaOffsetRangeLimit.LATEST / EARLIEST).
LATEST = -1
EARLIEST = -2

STRATEGY_KEYS = ("assign", "subscribe", "subscribepattern")
STRATEGY_NAMES = {"assign": "assign", "subscribe": "subscribe",
                  "subscribepattern": "subscribePattern"}

OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
ASSIGN_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
TIMESTAMPS_EXAMPLE = ('{"topicA": {"0": 123456789, "1": 123456789}, '
                      '"topicB": {"0": 123456789, "1": 123456789}}')

DEFAULT_MAX_TRIGGER_DELAY = "15m"


class KafkaOptionError(ValueError):
    """An invalid or unsupported option (Spark's IllegalArgumentException)."""


# -- what to read ---------------------------------------------------------------------
@dataclass(frozen=True)
class Subscribe:
    topics: tuple[str, ...]

    def __str__(self) -> str:
        return f"Subscribe[{','.join(self.topics)}]"


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str

    def matches(self, topic: str) -> bool:
        # Java's Pattern.matcher(topic).matches(): the whole name must match.
        return re.fullmatch(self.pattern, topic) is not None

    def __str__(self) -> str:
        return f"SubscribePattern[{self.pattern}]"


@dataclass(frozen=True)
class Assign:
    partitions: tuple[TopicPartition, ...]

    def __str__(self) -> str:
        return f"Assign[{', '.join(map(str, self.partitions))}]"


Strategy = Subscribe | SubscribePattern | Assign


# -- where to start and end -------------------------------------------------------------
@dataclass(frozen=True)
class EarliestOffsets:
    pass


@dataclass(frozen=True)
class LatestOffsets:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """Offsets per partition; -1 means latest and -2 earliest."""

    offsets: dict[TopicPartition, int]


@dataclass(frozen=True)
class GlobalTimestamp:
    timestamp: int
    strategy: str = "error"   # startingOffsetsByTimestampStrategy


@dataclass(frozen=True)
class SpecificTimestamps:
    timestamps: dict[TopicPartition, int]
    strategy: str = "error"


OffsetSpec = EarliestOffsets | LatestOffsets | SpecificOffsets | GlobalTimestamp | SpecificTimestamps


# Spark's default group id prefixes, and the shorter names kaflite's client ids use.
SHORT_CLIENT_NAMES = {"spark-kafka-source": "spark-source", "spark-kafka-relation": "spark-relation"}
SINK_CLIENT_ID = "spark-sink"


@dataclass
class SourceOptions:
    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec | None          # None for streaming
    kafka_params: dict[str, str]
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    group_id_prefix: str = "spark-kafka-source"
    poll_timeout_ms: int = 120_000
    fetch_offset_num_retries: int = 3
    fetch_offset_retry_interval_ms: int = 1000
    unique_group_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def isolation_level(self) -> int:
        return 1 if self.kafka_params.get("isolation.level") == "read_committed" else 0

    def group_id(self, role: str) -> str:
        """Spark's group id scheme (``<prefix>-<query uuid>-<role>``), for messages."""
        return f"{self.group_id_prefix}-{self.unique_group_id}-{role}"

    @property
    def client_name(self) -> str:
        """The first part of the clients' ids: the group id prefix, with Spark's two
        defaults shortened (``spark-source``, ``spark-relation``)."""
        return SHORT_CLIENT_NAMES.get(self.group_id_prefix, self.group_id_prefix)

    def client_id(self, role: str) -> str:
        """The client id of the driver's clients: ``<name>-<query>-<role>``, where
        ``<query>`` is the first 8 hex digits of the query's unique id (as in its group
        id), so ids stay short and readable: ``spark-source-1f0c9a2e-driver-0``."""
        return (self.kafka_params.get("client.id")
                or f"{self.client_name}-{self.unique_group_id[:8]}-{role}")

    def executor_client_id(self) -> str:
        """The executors' client id: the same for every query with this prefix.

        Executors keep their clients from query to query (``_kafka.client_for``),
        so the id names the source, not the query: ``<name>-executor``.
        """
        return self.kafka_params.get("client.id") or f"{self.client_name}-executor"


@dataclass
class SinkOptions:
    topic: str | None
    kafka_params: dict[str, str]


# -- parsing helpers ------------------------------------------------------------------------
def _lower(options: Mapping[str, object]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _bool(params: dict[str, str], key: str, name: str, default: bool) -> bool:
    raw = params.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise KafkaOptionError(f"Option '{name}' must be 'true' or 'false', got '{raw}'")
    return value == "true"


def _positive(params: dict[str, str], key: str, name: str) -> int | None:
    raw = params.get(key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise KafkaOptionError(f"Option '{name}' must be a positive integer, "
                               f"got '{raw}'") from None
    if value <= 0:
        raise KafkaOptionError(f"{name} must be positive")
    return value


_TIME_UNITS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000,
               "h": 3_600_000, "d": 86_400_000}


def parse_time_ms(value: str) -> int:
    """Spark's ``timeStringAsMs``: "15m", "10s", "250ms", "1h"; a bare number is ms."""
    m = re.fullmatch(r"\s*(-?\d+)\s*([a-z]*)\s*", value.lower())
    if m is None or m.group(2) not in ("", *_TIME_UNITS):
        raise KafkaOptionError(f"Invalid time string: '{value}' (e.g. 15m, 10s, 250ms)")
    n, unit = int(m.group(1)), m.group(2) or "ms"
    return int(n * _TIME_UNITS[unit])


def _json(raw: str, example: str) -> object:
    """``raw`` parsed (the caller checks its shape), or the option's error."""
    try:
        return json.loads(raw)
    except ValueError:
        raise KafkaOptionError(f"Expected e.g. {example}, got {raw}") from None


def parse_partition_offsets(raw: str, example: str = OFFSETS_EXAMPLE
                            ) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23}}`` → ``{TopicPartition("topic", 0): 23}``."""
    data = _json(raw, example)
    out: dict[TopicPartition, int] = {}
    if not isinstance(data, dict):
        raise KafkaOptionError(f"Expected e.g. {example}, got {raw}")
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise KafkaOptionError(f"Expected e.g. {example}, got {raw}")
        for p, off in parts.items():
            try:
                partition = int(p)
            except (TypeError, ValueError):
                raise KafkaOptionError(f"Expected e.g. {example}, got {raw}") from None
            if not isinstance(off, int) or isinstance(off, bool):
                raise KafkaOptionError(f"Expected e.g. {example}, got {raw}")
            out[TopicPartition(topic, partition)] = off
    return out


def parse_assign(raw: str) -> tuple[TopicPartition, ...]:
    data = _json(raw, ASSIGN_EXAMPLE)
    if not isinstance(data, dict):
        raise KafkaOptionError(f"Expected e.g. {ASSIGN_EXAMPLE}, got {raw}")
    out = []
    for topic, parts in data.items():
        if not isinstance(parts, list) or not all(
                isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise KafkaOptionError(f"Expected e.g. {ASSIGN_EXAMPLE}, got {raw}")
        out += [TopicPartition(topic, p) for p in parts]
    return tuple(out)


def _strategy(params: dict[str, str]) -> Strategy:
    given = [k for k in STRATEGY_KEYS if k in params]
    names = ", ".join(STRATEGY_NAMES[k] for k in STRATEGY_KEYS)
    if not given:
        raise KafkaOptionError("One of the following options must be specified for Kafka "
                               f"source: {names}. See the docs for more details.")
    if len(given) > 1:
        raise KafkaOptionError("Only one of the following options can be specified for Kafka "
                               f"source: {names}. See the docs for more details.")
    key = given[0]
    value = params[key]
    if key == "assign":
        if not value.strip().startswith("{"):
            raise KafkaOptionError("No topicpartitions to assign as specified value for option "
                                   f"'assign' is '{value}'")
        return Assign(parse_assign(value))
    if key == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaOptionError("No topics to subscribe to as specified value for option "
                                   f"'subscribe' is '{value}'")
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise KafkaOptionError("Pattern to subscribe is empty as specified value for option "
                               f"'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise KafkaOptionError(f"Invalid subscribePattern '{value}': {exc}") from None
    return SubscribePattern(pattern)


def _offset_spec(params: dict[str, str], timestamp_key: str, by_timestamp_key: str,
                 offsets_key: str, default: OffsetSpec) -> OffsetSpec:
    """Spark's ``getKafkaOffsetRangeLimit``: global timestamp > by timestamp > offsets."""
    raw_strategy = params.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if raw_strategy not in ("error", "latest"):
        raise KafkaOptionError(
            "startingOffsetsByTimestampStrategy must be 'error' or 'latest', "
            f"got '{params['startingoffsetsbytimestampstrategy']}'")
    if timestamp_key in params:
        ts = params[timestamp_key].strip()
        try:
            return GlobalTimestamp(int(ts), raw_strategy)
        except ValueError:
            raise KafkaOptionError(f"Expected a single long value, got {ts}") from None
    if by_timestamp_key in params:
        return SpecificTimestamps(
            parse_partition_offsets(params[by_timestamp_key].strip(), TIMESTAMPS_EXAMPLE),
            raw_strategy)
    raw = params.get(offsets_key)
    if raw is None:
        return default
    value = raw.strip()
    if value.lower() == "latest":
        return LatestOffsets()
    if value.lower() == "earliest":
        return EarliestOffsets()
    return SpecificOffsets(parse_partition_offsets(value))


def _check_kafka_params(params: dict[str, str]) -> None:
    if "kafka.group.id" in params:
        log.warning("Kafka option 'kafka.group.id' has been set on this query: kaflite uses it "
                    "for nothing (it joins no consumer group and commits no offsets)")
        if "groupidprefix" in params:
            log.warning("Option groupIdPrefix will be ignored as option kafka.group.id "
                        "has been set.")
    if "kafka.auto.offset.reset" in params:
        raise KafkaOptionError(
            "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
            "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
            "Streaming manages which offsets are consumed internally, rather than relying on the "
            "kafkaConsumer to do it. This will ensure that no data is missed when new "
            "topics/partitions are dynamically subscribed. Note that 'startingOffsets' only "
            "applies when a new Streaming query is started, and that resuming will always pick "
            "up from where the query left off. See the docs for more details.")
    if "kafka.key.deserializer" in params:
        raise KafkaOptionError(
            "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
            "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the keys.")
    if "kafka.value.deserializer" in params:
        raise KafkaOptionError(
            "Kafka option 'value.deserializer' is not supported as values are deserialized as "
            "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
            "deserialize the values.")
    for name in ("enable.auto.commit", "interceptor.classes"):
        if f"kafka.{name}" in params:
            raise KafkaOptionError(f"Kafka option '{name}' is not supported")
    if "kafka.bootstrap.servers" not in params:
        raise KafkaOptionError("Option 'kafka.bootstrap.servers' must be specified for "
                               "configuring Kafka consumer")


def _kafka_params(params: dict[str, str]) -> dict[str, str]:
    kafka = {k[len("kafka."):]: v for k, v in params.items() if k.startswith("kafka.")}
    return java_security_options(kafka, KafkaOptionError)


def parse_source_options(options: Mapping[str, object], streaming: bool) -> SourceOptions:
    """Validate the options of a read (batch) or readStream (streaming) query."""
    params = _lower(options)
    if streaming:
        if "endingoffsets" in params:
            raise KafkaOptionError("ending offset not valid in streaming queries")
        if "endingoffsetsbytimestamp" in params or "endingtimestamp" in params:
            raise KafkaOptionError("ending timestamp not valid in streaming queries")
        starting = _offset_spec(params, "startingtimestamp", "startingoffsetsbytimestamp",
                                "startingoffsets", LatestOffsets())
        ending: OffsetSpec | None = None
    else:
        starting = _offset_spec(params, "startingtimestamp", "startingoffsetsbytimestamp",
                                "startingoffsets", EarliestOffsets())
        if isinstance(starting, LatestOffsets):
            raise KafkaOptionError("starting offset can't be latest for batch queries on Kafka")
        if isinstance(starting, SpecificOffsets):
            for tp, off in starting.offsets.items():
                if off == LATEST:
                    raise KafkaOptionError(f"startingOffsets for {tp} can't be latest for "
                                           "batch queries on Kafka")
        ending = _offset_spec(params, "endingtimestamp", "endingoffsetsbytimestamp",
                              "endingoffsets", LatestOffsets())
        if isinstance(ending, EarliestOffsets):
            raise KafkaOptionError("ending offset can't be earliest for batch queries on Kafka")
        if isinstance(ending, SpecificOffsets):
            for tp, off in ending.offsets.items():
                if off == EARLIEST:
                    raise KafkaOptionError(f"ending offset for {tp} can't be earliest for "
                                           "batch queries on Kafka")
    strategy = _strategy(params)
    min_partitions = _positive(params, "minpartitions", "minPartitions")
    max_records = _positive(params, "maxrecordsperpartition", "maxRecordsPerPartition")
    _check_kafka_params(params)
    max_per_trigger = _positive(params, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    min_per_trigger = _positive(params, "minoffsetspertrigger", "minOffsetsPerTrigger")
    delay = parse_time_ms(params.get("maxtriggerdelay", DEFAULT_MAX_TRIGGER_DELAY))
    if streaming:
        if (min_per_trigger is not None and max_per_trigger is not None
                and min_per_trigger > max_per_trigger):
            raise KafkaOptionError(
                f"The value of minOffsetPerTrigger({min_per_trigger}) is higher than the "
                f"maxOffsetsPerTrigger({max_per_trigger}).")
    else:
        for key, name in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                          ("minoffsetspertrigger", "minOffsetsPerTrigger"),
                          ("maxtriggerdelay", "maxTriggerDelay")):
            if key in params:
                log.warning("%s option ignored in batch queries", name)
    kafka = _kafka_params(params)
    default_prefix = "spark-kafka-source" if streaming else "spark-kafka-relation"
    return SourceOptions(
        strategy=strategy, starting=starting, ending=ending, kafka_params=kafka,
        fail_on_data_loss=_bool(params, "failondataloss", "failOnDataLoss", True),
        max_offsets_per_trigger=max_per_trigger if streaming else None,
        min_offsets_per_trigger=min_per_trigger if streaming else None,
        max_trigger_delay_ms=delay,
        min_partitions=min_partitions, max_records_per_partition=max_records,
        include_headers=_bool(params, "includeheaders", "includeHeaders", False),
        group_id_prefix=params.get("groupidprefix", default_prefix),
        poll_timeout_ms=int(params.get("kafkaconsumer.polltimeoutms", "120000")),
        fetch_offset_num_retries=int(params.get("fetchoffset.numretries", "3")),
        fetch_offset_retry_interval_ms=int(params.get("fetchoffset.retryintervalms", "1000")),
    )


def parse_sink_options(options: Mapping[str, object]) -> SinkOptions:
    """Validate the options of a write (batch) or writeStream (streaming) query."""
    params = _lower(options)
    if "kafka.bootstrap.servers" not in params:
        raise KafkaOptionError("Option 'kafka.bootstrap.servers' must be specified for "
                               "configuring Kafka producer")
    if "kafka.key.serializer" in params:
        raise KafkaOptionError("Kafka option 'key.serializer' is not supported as keys are "
                               "serialized with ByteArraySerializer.")
    if "kafka.value.serializer" in params:
        raise KafkaOptionError("Kafka option 'value.serializer' is not supported as values are "
                               "serialized with ByteArraySerializer.")
    topic = params.get("topic")
    return SinkOptions(topic=topic.strip() if topic is not None else None,
                       kafka_params=_kafka_params(params))


def client_config(kafka_params: Mapping[str, str], role: str,
                  client_id: str | None = None, **overrides: object) -> dict[str, object]:
    """The kaflite client config for ``role`` from the ``kafka.*`` options.

    Like the Java client, a property the client does not know is logged and
    ignored rather than fatal; a known property of another role (a consumer
    setting given to the producer, say) is dropped silently, since Spark
    passes the same options to every client it creates.
    """
    out: dict[str, object] = {}
    for name, value in kafka_params.items():
        prop = PROPERTIES.get(name)
        if prop is None:
            log.warning("Kafka option '%s' is not a known kaflite client property; ignored",
                        name)
            continue
        if "common" in prop.roles or role in prop.roles:
            out[name] = value
    if client_id is not None and "client.id" not in kafka_params:
        out["client.id"] = client_id
    for name, override in overrides.items():
        out[name.replace("_", ".")] = override
    return out
