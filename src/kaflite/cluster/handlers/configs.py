"""DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44).

Topic configs are stored on the controller and take effect on every replica at
once (the controller pushes the topic's new state to its brokers). Broker
configs are described as Kafka describes them (``kaflite.cluster.broker_describe``), and
may be changed dynamically for one broker or for all (``kaflite.cluster.dynamic_configs``).
Group configs (resource type GROUP, ``kaflite.cluster.group_configs``) are stored on the
controller too; the group coordinator reads them on every heartbeat. Client metrics
subscriptions (resource type CLIENT_METRICS, ``kaflite.cluster.client_metrics``) are
stored the same way and read by each broker's telemetry manager.

Asked for documentation (v3+), every entry carries kaflite's own text of what the config
does on kaflite (``kaflite.cluster.config_docs``); otherwise it is null, as Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kaflite.cluster import broker_describe, config_docs, dynamic_configs, features
from kaflite.cluster.client_metrics import (
    CLIENT_METRICS_CONFIG_TYPES,
    CLIENT_METRICS_RESOURCE,
    validate_client_metrics,
)
from kaflite.cluster.configs import (
    BROKER_DEFAULTS,
    SOURCE_CODES,
    TOPIC_CONFIGS,
    UNIT_SYNONYMS,
    effective_topic_configs,
    validate_topic_configs,
)
from kaflite.cluster.group_configs import (
    GROUP_CONFIG_TYPES,
    GROUP_RESOURCE,
    effective_group_configs,
    validate_group_configs,
)
from kaflite.cluster.handlers._base import Handler
from kaflite.cluster.metalog import metadata_versions
from kaflite.config import ConfigError
from kaflite.protocol import errors
from kaflite.protocol.headers import RequestHeader
from kaflite.protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kaflite.protocol.messages import alter_configs_response as acr
from kaflite.protocol.messages import describe_configs_response as dcr
from kaflite.protocol.messages import incremental_alter_configs_response as iacr

if TYPE_CHECKING:
    from kaflite.cluster.broker import Broker
    from kaflite.cluster.network import ServerConnection

__all__ = ["HANDLERS"]

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, GROUP_RESOURCE
CLIENT_METRICS = CLIENT_METRICS_RESOURCE
SOURCE = SOURCE_CODES
TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7,
         "CLASS": 8, "PASSWORD": 9}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
#: resource type -> a config's documentation (None: none)
DOCS: dict[int, Callable[[str], str | None]] = {
    TOPIC: config_docs.TOPIC.get, BROKER: config_docs.broker_doc,
    GROUP: config_docs.GROUP.get, CLIENT_METRICS: config_docs.CLIENT_METRICS.get}


def _describe_topic(broker: Broker, name: str, keys: list[str] | None,
                    synonyms: bool) -> list[dcr.DescribeConfigsResourceResult]:
    topic = broker.controller.topics.get(name)
    if topic is None:
        raise errors.UnknownTopicOrPartitionError(name)
    out = []
    for key, (value, source) in effective_topic_configs(topic.configs, broker.config,
                                                        broker.dynamic_config).items():
        if keys is not None and key not in keys:
            continue
        definition = TOPIC_CONFIGS[key]
        syn = []
        if synonyms:
            if source == "DYNAMIC_TOPIC_CONFIG":
                syn.append(dcr.DescribeConfigsSynonym(key, value, SOURCE[source]))
            synonym = definition.broker_synonym
            if synonym:
                dynamic = broker.dynamic_config(synonym)
                if dynamic is not None:
                    syn.append(dcr.DescribeConfigsSynonym(synonym, dynamic[0], SOURCE[dynamic[1]]))
                if synonym in broker.config.props:
                    static = broker.config.props[synonym]
                    syn.append(dcr.DescribeConfigsSynonym(
                        synonym, static, SOURCE["STATIC_BROKER_CONFIG"]
                        if static != BROKER_DEFAULTS.get(synonym) else SOURCE["DEFAULT_CONFIG"]))
            for other, _ in UNIT_SYNONYMS.get(key, ()):
                if other in broker.config.props:
                    syn.append(dcr.DescribeConfigsSynonym(
                        other, broker.config.props[other], SOURCE["STATIC_BROKER_CONFIG"]))
            syn.append(dcr.DescribeConfigsSynonym(key, definition.default, SOURCE["DEFAULT_CONFIG"]))
        out.append(dcr.DescribeConfigsResourceResult(
            name=key, value=value, read_only=False,
            config_source=SOURCE[source], is_sensitive=definition.sensitive, synonyms=syn,
            config_type=TYPES[definition.type],
        ))
    return out


def _describe_group(broker: Broker, name: str, keys: list[str] | None,
                    synonyms: bool) -> list[dcr.DescribeConfigsResourceResult]:
    if not name:
        raise errors.InvalidRequestError("Group name must not be empty")
    stored = broker.controller.group_configs.get(name, {})
    out = []
    for key, (value, source) in effective_group_configs(stored, broker.config.props).items():
        if keys is not None and key not in keys:
            continue
        syn = [dcr.DescribeConfigsSynonym(key, value, SOURCE[source])] if synonyms else []
        out.append(dcr.DescribeConfigsResourceResult(
            name=key, value=value, read_only=False, config_source=SOURCE[source],
            is_sensitive=False, synonyms=syn, config_type=TYPES[GROUP_CONFIG_TYPES[key]]))
    return out


def _describe_client_metrics(broker: Broker, name: str, keys: list[str] | None
                              ) -> list[dcr.DescribeConfigsResourceResult]:
    """A subscription's stored configs alone, as Kafka describes them (none: no
    subscription of that name)."""
    if not name:
        raise errors.InvalidRequestError("Client metrics subscription name must not be empty")
    stored = broker.controller.client_metrics.get(name, {})
    return [dcr.DescribeConfigsResourceResult(
        name=key, value=value, read_only=False, config_source=SOURCE["CLIENT_METRICS_CONFIG"],
        is_sensitive=False, synonyms=[], config_type=TYPES[CLIENT_METRICS_CONFIG_TYPES[key]])
        for key, value in stored.items() if keys is None or key in keys]


def _describe_broker(broker: Broker, name: str, keys: list[str] | None,
                     synonyms: bool) -> list[dcr.DescribeConfigsResourceResult]:
    node = dynamic_configs.resource_node(name, broker.node_id, describe=True)
    store = broker.controller.broker_configs
    default = store.get(dynamic_configs.DEFAULT, {})
    own = None if node is None else store.get(str(node), {})
    return broker_describe.describe(broker_describe.started_with(broker), default, own,
                                    keys, synonyms)


async def handle_describe(broker: Broker, conn: ServerConnection, header: RequestHeader,
                          req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    for res in req.resources:
        result = dcr.DescribeConfigsResult(error_code=0, resource_type=res.resource_type,
                                           resource_name=res.resource_name)
        try:
            if res.resource_type == TOPIC:
                result.configs = _describe_topic(broker, res.resource_name,
                                                 res.configuration_keys, req.include_synonyms)
            elif res.resource_type == GROUP:
                result.configs = _describe_group(broker, res.resource_name,
                                                 res.configuration_keys, req.include_synonyms)
            elif res.resource_type == CLIENT_METRICS:
                result.configs = _describe_client_metrics(broker, res.resource_name,
                                                          res.configuration_keys)
            elif res.resource_type == BROKER:
                result.configs = _describe_broker(broker, res.resource_name,
                                                  res.configuration_keys, req.include_synonyms)
            else:
                raise errors.InvalidRequestError(f"unsupported resource type {res.resource_type}")
        except errors.KafkaError as exc:
            result.error_code, result.error_message = exc.code, exc.message
        doc = DOCS.get(res.resource_type)
        for entry in result.configs:
            entry.documentation = doc(entry.name) if doc and req.include_documentation \
                else None
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _apply(broker: Broker, resource_type: int, name: str, new: dict[str, str],
           validate_only: bool) -> None:
    if resource_type == BROKER:
        dynamic_configs.resource_node(name, broker.node_id, describe=False)
        dynamic_configs.validate(name, new)
        dynamic_configs.check_metadata_version(
            broker.controller.broker_configs, name, new, metadata_versions.cordoned_log_dirs(
                features.level(broker.controller, "metadata.version")))
        dynamic_configs.check_cleaner(broker.controller.broker_configs, name, new,
                                      broker.node_id, broker.config.props)
        staged = broker.tls.stage(name, new)    # new keystores: loaded and checked here
        if not validate_only:
            broker.controller.set_broker_configs(name, new)
            broker.tls.apply(staged)
        return
    if resource_type == GROUP:
        _apply_group(broker, name, new, validate_only)
        return
    if resource_type == CLIENT_METRICS:
        valid = validate_client_metrics(name, new)
        if not validate_only:
            broker.controller.set_client_metrics(name, valid)
        return
    if resource_type != TOPIC:
        raise errors.InvalidRequestError(f"unsupported resource type {resource_type}")
    if name not in broker.controller.topics:
        raise errors.UnknownTopicOrPartitionError(name)
    try:
        valid = validate_topic_configs(new)
    except ConfigError as exc:
        raise errors.InvalidConfigError(exc.message) from None
    if not validate_only:
        broker.controller.set_topic_configs(name, valid)


def _apply_group(broker: Broker, name: str, new: dict[str, str], validate_only: bool) -> None:
    if not name:
        raise errors.InvalidRequestError("Group name must not be empty")
    try:
        valid = validate_group_configs(new, broker.config.props)
    except ConfigError as exc:
        raise errors.InvalidConfigError(exc.message) from None
    if not validate_only:
        broker.controller.set_group_configs(name, valid)


def _current(broker: Broker, resource_type: int, name: str) -> dict[str, str]:
    """The dynamic configs a resource has now (what IncrementalAlterConfigs starts from)."""
    if resource_type == GROUP:
        return dict(broker.controller.group_configs.get(name, {}))
    if resource_type == CLIENT_METRICS:
        return dict(broker.controller.client_metrics.get(name, {}))
    if resource_type == BROKER:
        return dict(broker.controller.broker_configs.get(name, {}))
    topic = broker.controller.topics.get(name)
    return dict(topic.configs) if topic is not None else {}


def _config_type(resource_type: int, name: str) -> str | None:
    if resource_type == GROUP:
        return GROUP_CONFIG_TYPES.get(name)
    if resource_type == CLIENT_METRICS:
        return CLIENT_METRICS_CONFIG_TYPES.get(name)
    if resource_type == BROKER:
        return dynamic_configs.config_type(name)
    definition = TOPIC_CONFIGS.get(name)
    return None if definition is None else definition.type


def _list_base(broker: Broker, resource_type: int, name: str) -> str:
    """The value an APPEND or SUBTRACT starts from when the resource has none of its own."""
    if resource_type == BROKER:
        found = broker.dynamic_config(name)
        if found is not None:
            return found[0]
        if name in broker.config.props:
            return broker.config.props[name]
        synonym_of = [d for d in TOPIC_CONFIGS.values() if d.broker_synonym == name]
        return (synonym_of[0].default or "") if synonym_of else ""
    definition = TOPIC_CONFIGS.get(name)
    return (definition.default or "") if definition is not None else ""


async def handle_alter(broker: Broker, conn: ServerConnection, header: RequestHeader,
                       req: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for res in req.resources:
        out = acr.AlterConfigsResourceResponse(error_code=0, resource_type=res.resource_type,
                                               resource_name=res.resource_name)
        try:
            # AlterConfigs replaces the whole set of dynamic configs.
            new = {c.name: c.value for c in res.configs if c.value is not None}
            _apply(broker, res.resource_type, res.resource_name, new, req.validate_only)
        except errors.KafkaError as exc:
            out.error_code, out.error_message = exc.code, exc.message
        responses.append(out)
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_incremental(broker: Broker, conn: ServerConnection, header: RequestHeader,
                             req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    for res in req.resources:
        out = iacr.AlterConfigsResourceResponse(error_code=0, resource_type=res.resource_type,
                                                resource_name=res.resource_name)
        try:
            current = _current(broker, res.resource_type, res.resource_name)
            for c in res.configs:
                if c.name not in TOPIC_CONFIGS and res.resource_type == TOPIC:
                    raise errors.InvalidConfigError(f"Unknown topic config name: {c.name}")
                if c.name not in GROUP_CONFIG_TYPES and res.resource_type == GROUP:
                    raise errors.InvalidConfigError(f"Unknown group config name: {c.name}")
                if c.config_operation == SET:
                    if c.value is None:
                        raise errors.InvalidRequestError(f"null value for {c.name}")
                    current[c.name] = c.value
                elif c.config_operation == DELETE:
                    current.pop(c.name, None)
                elif c.config_operation in (APPEND, SUBTRACT):
                    if _config_type(res.resource_type, c.name) != "LIST":
                        raise errors.InvalidConfigError(f"{c.name} is not a list config")
                    items = [x for x in current.get(c.name, _list_base(
                        broker, res.resource_type, c.name)).split(",") if x]
                    for v in (c.value or "").split(","):
                        if c.config_operation == APPEND and v not in items:
                            items.append(v)
                        elif c.config_operation == SUBTRACT and v in items:
                            items.remove(v)
                    current[c.name] = ",".join(items)
                else:
                    raise errors.InvalidRequestError(f"unknown operation {c.config_operation}")
            _apply(broker, res.resource_type, res.resource_name, current, req.validate_only)
        except errors.KafkaError as exc:
            out.error_code, out.error_message = exc.code, exc.message
        responses.append(out)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


HANDLERS = [
    Handler(DescribeConfigsRequest, 1, 4, handle_describe),
    Handler(AlterConfigsRequest, 0, 2, handle_alter),
    Handler(IncrementalAlterConfigsRequest, 0, 1, handle_incremental),
]
