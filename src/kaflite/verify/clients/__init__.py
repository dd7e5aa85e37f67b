"""The clients under test, each behind the same small interface (``_base``).

==================  ===========================================================
``kaflite``         ``kaflite.client`` (asyncio), queue and txn workloads
``kaflite-sync``    ``kaflite.client.sync`` (blocking façade), queue
``confluent-kafka`` librdkafka, queue and txn
``kafka-python``    queue
``aiokafka``        queue
``spark``           ``kaflite.spark``'s source in a Structured Streaming query (one reader
                    per group, restarted from its checkpoint), kaflite's sync producer; queue
``kafkajs``         kafkajs (Node.js, from npm; a ``node`` process per client), queue and txn
==================  ===========================================================
"""

from __future__ import annotations

from collections.abc import Callable

from kaflite.verify.clients._base import (
    ClientFactory,
    ConsumerClient,
    Context,
    Listener,
    ProducerClient,
    ShareConsumerClient,
    TxnFailure,
)

__all__ = ["CLIENTS", "ClientFactory", "ConsumerClient", "Context", "Listener",
           "ProducerClient", "ShareConsumerClient", "TxnFailure", "factory"]


def make_kaflite() -> ClientFactory:
    from kaflite.verify.clients._kaflite import KafliteAsync
    return KafliteAsync()


def make_kaflite_sync() -> ClientFactory:
    from kaflite.verify.clients._kaflite import KafliteSync
    return KafliteSync()


def make_confluent() -> ClientFactory:
    from kaflite.verify.clients._confluent import ConfluentKafka
    return ConfluentKafka()


def make_spark() -> ClientFactory:
    from kaflite.verify.clients._spark import SparkStream
    return SparkStream()


def make_kafka_python() -> ClientFactory:
    from kaflite.verify.clients._pylibs import KafkaPython
    return KafkaPython()


def make_aiokafka() -> ClientFactory:
    from kaflite.verify.clients._pylibs import AioKafka
    return AioKafka()


def make_kafkajs() -> ClientFactory:
    from kaflite.verify.clients._kafkajs import KafkaJS
    return KafkaJS()


CLIENTS: dict[str, Callable[[], ClientFactory]] = {
    "kaflite": make_kaflite, "kaflite-sync": make_kaflite_sync, "confluent-kafka": make_confluent,
    "kafka-python": make_kafka_python, "aiokafka": make_aiokafka, "spark": make_spark,
    "kafkajs": make_kafkajs,
}


def factory(name: str) -> ClientFactory:
    try:
        return CLIENTS[name]()
    except KeyError:
        raise ValueError(f"unknown client {name!r}; known: {', '.join(CLIENTS)}") from None
