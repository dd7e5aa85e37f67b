"""Client telemetry (KIP-714, issue 38 §4): CLIENT_METRICS subscriptions, the
GetTelemetrySubscriptions and PushTelemetry wire behaviour, and librdkafka's pushes
decoded into the connection registry."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2 as otlp

from kaflite.cli.connections import telemetry_text
from kaflite.client.admin import Admin, ConfigResource
from kaflite.cluster import Cluster
from kaflite.cluster.controller import Controller
from kaflite.cluster.metadata_image import apply_records, records_for_brokers
from kaflite.cluster.metalog import snapshot_records
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    ListConfigResourcesRequest,
    PushTelemetryRequest,
)
from kaflite.protocol.primitives import ZERO_UUID
from kaflite.protocol.records import compress

CLIENT_METRICS = 16
ZSTD, GZIP = 4, 1


def _payload(value: float = 3.0) -> bytes:
    """An OTLP MetricsData with a gauge (one point per node), a sum and a histogram."""
    gauge = otlp.Metric(name="org.apache.kafka.producer.node.request.latency.avg",
                        gauge=otlp.Gauge(data_points=[otlp.NumberDataPoint(
                            as_double=value, attributes=[KeyValue(
                                key="node.id", value=AnyValue(string_value="0"))])]))
    total = otlp.Metric(name="org.apache.kafka.producer.record.send.total",
                        sum=otlp.Sum(data_points=[otlp.NumberDataPoint(as_int=42)]))
    hist = otlp.Metric(name="org.apache.kafka.producer.request.size",
                       histogram=otlp.Histogram(data_points=[otlp.HistogramDataPoint(
                           count=5, sum=100.0)]))
    data = otlp.MetricsData(resource_metrics=[otlp.ResourceMetrics(scope_metrics=[
        otlp.ScopeMetrics(metrics=[gauge, total, hist])])])
    return data.SerializeToString()


async def _subscribe(cluster: Cluster, name: str, configs: dict[str, str | None]) -> None:
    async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        await admin.alter_configs({ConfigResource(CLIENT_METRICS, name): configs})


async def _open(cluster: Cluster, client_id: str, software: str = "kaflite-test"
                ) -> BrokerConnection:
    return await BrokerConnection("127.0.0.1", cluster.broker(0).port, client_id=client_id,
                                  software_name=software, software_version="9.9").open()


async def _push(conn: BrokerConnection, instance: uuid.UUID, subscription: int, *,
                codec: int = ZSTD, data: bytes | None = None, terminating: bool = False
                ) -> int:
    raw = _payload() if data is None else data
    body = compress(codec, raw) if codec in (ZSTD, GZIP) else raw
    resp = await conn.request(PushTelemetryRequest(
        client_instance_id=instance, subscription_id=subscription, terminating=terminating,
        compression_type=codec, metrics=body))
    return int(resp.error_code)


async def _get(conn: BrokerConnection, instance: uuid.UUID = ZERO_UUID
               ) -> GetTelemetrySubscriptionsResponse:
    return await conn.request(GetTelemetrySubscriptionsRequest(client_instance_id=instance))


def test_subscriptions_are_validated_described_listed_and_replayed() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
                res = ConfigResource(CLIENT_METRICS, "sub1")
                for bad, error in (({"interval.ms": "50"}, errors.InvalidRequestError),
                                   ({"interval.ms": "3600001"}, errors.InvalidRequestError),
                                   ({"colour": "red"}, errors.InvalidRequestError),
                                   ({"match": "client_colour=x"}, errors.InvalidConfigError),
                                   ({"match": "client_id=("}, errors.InvalidConfigError),
                                   ({"interval.ms": "soon"}, errors.InvalidConfigError)):
                    with pytest.raises(error):
                        await admin.alter_configs({res: bad})
                with pytest.raises(errors.InvalidRequestError):
                    await admin.alter_configs({ConfigResource(CLIENT_METRICS, ""): {
                        "interval.ms": "1000"}})
                await admin.alter_configs({res: {"metrics": "org.apache.kafka.producer.",
                                                 "interval.ms": "1000",
                                                 "match": "client_id=app-.*"}})
                await admin.alter_configs({ConfigResource(CLIENT_METRICS, "sub2"): {
                    "metrics": "*"}})
                described = await admin.describe_config_entries([res])
                assert {(e.name, e.value, e.source) for e in described[res]} == {
                    ("metrics", "org.apache.kafka.producer.", "DYNAMIC_CLIENT_METRICS_CONFIG"),
                    ("interval.ms", "1000", "DYNAMIC_CLIENT_METRICS_CONFIG"),
                    ("match", "client_id=app-.*", "DYNAMIC_CLIENT_METRICS_CONFIG")}
            conn = await _open(cluster, "lister")
            try:
                listed = await conn.request(ListConfigResourcesRequest(), version=0)
                assert [r.resource_name for r in listed.config_resources] == ["sub1", "sub2"]
                await _subscribe(cluster, "sub2", {"metrics": None})     # the last config
                listed = await conn.request(ListConfigResourcesRequest(), version=0)
                assert [r.resource_name for r in listed.config_resources] == ["sub1"]
            finally:
                conn.close()
            # a broker process's replica replays the ConfigRecords (resource type 16)
            replica = Controller(None)
            apply_records(replica, records_for_brokers(
                list(snapshot_records(cluster.controller))))
            assert replica.client_metrics == cluster.controller.client_metrics
    asyncio.run(main())


def test_get_subscriptions_matches_clients_and_gives_a_stable_id() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            await _subscribe(cluster, "by-id", {"metrics": "org.apache.kafka.producer.",
                                                "interval.ms": "5000",
                                                "match": "client_id=app-.*"})
            await _subscribe(cluster, "by-software", {
                "metrics": "org.apache.kafka.consumer.", "interval.ms": "2000",
                "match": "client_software_name=librdkafka"})
            app = await _open(cluster, "app-1")
            other = await _open(cluster, "other")
            both = await _open(cluster, "app-2", software="librdkafka")
            try:
                first = await _get(app)
                assert first.error_code == 0 and first.client_instance_id != ZERO_UUID
                assert first.requested_metrics == ["org.apache.kafka.producer."]
                assert first.push_interval_ms == 5000
                assert first.accepted_compression_types == [4, 3, 1, 2]
                assert first.telemetry_max_bytes == 1048576 and first.delta_temporality
                none = await _get(other)
                assert none.error_code == 0 and none.requested_metrics == []
                assert none.push_interval_ms == 300000
                assert none.client_instance_id not in (ZERO_UUID, first.client_instance_id)
                union = await _get(both)
                assert sorted(union.requested_metrics) == ["org.apache.kafka.consumer.",
                                                           "org.apache.kafka.producer."]
                assert union.push_interval_ms == 2000
                # asking again before the interval: throttled
                again = await _get(app, first.client_instance_id)
                assert again.error_code == errors.ThrottlingQuotaExceededError.code
                # a changed subscription: matched again at once, with another id
                await _subscribe(cluster, "by-id", {"metrics": "org.apache.kafka.", "interval.ms":
                                                    "5000", "match": "client_id=app-.*"})
                changed = await _get(app, first.client_instance_id)
                assert changed.error_code == 0
                assert changed.client_instance_id == first.client_instance_id
                assert changed.requested_metrics == ["org.apache.kafka."]
                assert changed.subscription_id != first.subscription_id
                # a subscription for every metric answers "*" alone
                await _subscribe(cluster, "all", {"metrics": "*", "match": "client_id=other"})
                star = await _get(other, none.client_instance_id)
                assert star.requested_metrics == ["*"]
            finally:
                for c in (app, other, both):
                    c.close()
    asyncio.run(main())


def test_push_checks_and_decodes_metrics_into_the_registry() -> None:
    async def main() -> None:
        async with Cluster(brokers=1, config={"telemetry.max.bytes": "2000"}) as cluster:
            await _subscribe(cluster, "slow", {"metrics": "org.apache.kafka.",
                                               "interval.ms": "60000"})
            conn = await _open(cluster, "pusher")
            try:
                sub = await _get(conn)
                assert sub.telemetry_max_bytes == 2000
                iid, sid = sub.client_instance_id, sub.subscription_id

                assert await _push(conn, ZERO_UUID, sid) == errors.InvalidRequestError.code
                assert await _push(conn, iid, sid + 1) == \
                    errors.UnknownSubscriptionIdError.code
                # after UNKNOWN_SUBSCRIPTION_ID the client may ask again at once
                assert (await _get(conn, iid)).error_code == 0
                assert await _push(conn, iid, sid) == 0
                rows = [c for c in cluster.connections() if c.client_id == "pusher"]
                assert rows[0].client_instance_id == str(iid)
                assert rows[0].telemetry_pushes == 1
                assert rows[0].telemetry == {
                    "org.apache.kafka.producer.node.request.latency.avg{node.id=0}": 3.0,
                    "org.apache.kafka.producer.record.send.total": 42.0,
                    "org.apache.kafka.producer.request.size.count": 5.0,
                    "org.apache.kafka.producer.request.size.sum": 100.0}
                assert await _push(conn, iid, sid) == errors.ThrottlingQuotaExceededError.code
                # the terminating push is let through once; nothing after it
                assert await _push(conn, iid, sid, terminating=True) == 0
                assert await _push(conn, iid, sid, terminating=True) == errors.InvalidRequestError.code
            finally:
                conn.close()
            for error, kwargs in ((errors.UnsupportedCompressionTypeError.code,
                                   {"codec": 7}),
                                  (errors.TelemetryTooLargeError.code,
                                   {"codec": 0, "data": _payload() + b"\0" * 3000}),
                                  (errors.TelemetryTooLargeError.code,   # once decompressed
                                   {"data": b"\0" * 5000}),
                                  (errors.InvalidRecordError.code,
                                   {"codec": 0, "data": b"\xff\xff not protobuf"})):
                conn = await _open(cluster, f"pusher-{error}")
                try:
                    sub = await _get(conn)
                    assert await _push(conn, sub.client_instance_id, sub.subscription_id,
                                       **kwargs) == error, kwargs
                finally:
                    conn.close()
    asyncio.run(main())


def test_librdkafka_pushes_its_metrics() -> None:
    """confluent-kafka (librdkafka 2.16, enable.metrics.push on by default) subscribes,
    pushes OTLP metrics every second, and the registry shows them decoded."""
    from confluent_kafka import Consumer, Producer

    with Cluster(brokers=1) as cluster:
        cluster.create_topic("telemetry-e2e", partitions=1, replication_factor=1)
        asyncio.run(_subscribe(cluster, "rdkafka", {
            "metrics": "org.apache.kafka.", "interval.ms": "1000",
            "match": "client_id=tel-.*"}))
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers,
                             "client.id": "tel-producer"})
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers,
                             "client.id": "tel-consumer", "group.id": "tel-group",
                             "auto.offset.reset": "earliest"})
        try:
            for i in range(20):
                producer.produce("telemetry-e2e", f"v{i}".encode())
            assert producer.flush(30) == 0
            consumer.subscribe(["telemetry-e2e"])
            got, pushed = 0, {}
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    got += 1
                producer.poll(0)
                pushed = {c.client_id: c for c in cluster.connections() if c.telemetry_pushes}
                if got >= 20 and {"tel-producer", "tel-consumer"} <= set(pushed) \
                        and all(c.telemetry_pushes >= 2 for c in pushed.values()):
                    break
            assert got >= 20
            assert {"tel-producer", "tel-consumer"} <= set(pushed), pushed
            prod, cons = pushed["tel-producer"], pushed["tel-consumer"]
            assert prod.client_instance_id and cons.client_instance_id
            assert prod.client_instance_id != cons.client_instance_id
            assert prod.software_name == "confluent-kafka-python"
            names = {k.partition("{")[0] for k in prod.telemetry}
            assert "org.apache.kafka.producer.record.queue.time.avg" in names, names
            assert any(k.startswith("org.apache.kafka.producer.node.request.latency.avg{node.id=")
                       for k in prod.telemetry), prod.telemetry
            assert any(k.startswith("org.apache.kafka.consumer.") for k in cons.telemetry), \
                cons.telemetry
            # `kaflite connections` shows the instance and the count beside the role
            text = telemetry_text(prod.to_dict()).splitlines()
            assert text[:2] == [f"instance {prod.client_instance_id}",
                                f"{len(prod.telemetry)} metrics (x{prod.telemetry_pushes})"]
            assert "partition-leader" in prod.roles
        finally:
            consumer.close()
            producer.flush(5)


def test_client_metrics_cli_prints_kafka_client_metrics_lines() -> None:
    """The lines are those Kafka 4.4's ClientMetricsCommand printed against kaflite."""
    from typer.testing import CliRunner

    from kaflite.cli import app

    runner = CliRunner()
    with Cluster(brokers=1) as cluster:
        def cli(*args: str, code: int = 0) -> list[str]:
            result = runner.invoke(app, ["client-metrics", "--bootstrap-server",
                                         cluster.bootstrap_servers, *args])
            assert result.exit_code == code, (result.output, result.exception)
            return result.output.splitlines()

        assert cli("--alter", "--name", "sub1", "--metrics",
                   "org.apache.kafka.producer.,org.apache.kafka.consumer.", "--interval",
                   "1000", "--match", "client_id=x.*,client_software_name=librdkafka") == [
            "Altered client metrics config for sub1."]
        assert cli("--alter", "--name", "sub2", "--metrics", "*") == [
            "Altered client metrics config for sub2."]
        generated = cli("--alter", "--generate-name", "--interval", "2000")[0]
        new_name = generated.removeprefix("Altered client metrics config for ").rstrip(".")
        assert uuid.UUID(new_name)
        assert cli("--describe", "--name", "sub1") == [
            "Client metrics configs for sub1 are:", "  interval.ms=1000",
            "  match=client_id=x.*,client_software_name=librdkafka",
            "  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer."]
        assert cli("--list") == sorted(["sub1", "sub2", new_name])
        assert cli("--delete", "--name", "sub2") == ["Deleted client metrics config for sub2."]
        assert "sub2" not in cli("--list")
        assert cli("--describe", "--name", "sub2") == [
            "The client metric resource sub2 doesn't exist and doesn't have dynamic config."]
        assert cli("--alter", "--name", "bad", "--interval", "5", code=1) == [
            "Error while executing client metrics command : Invalid value 5 for interval.ms, "
            "interval must be between 100 and 3600000 (1 hour)"]
        cli("--list", "--name", "sub1", code=2)


def test_telemetry_crosses_from_broker_processes_to_the_registry() -> None:
    """A broker process sends its rows as JSON (observe_wire): the instance id and the
    pushed metrics travel with them."""
    from kaflite.cluster.observe import ConnectionRecord, snapshot
    from kaflite.cluster.observe_wire import record_from_json, record_to_json

    row = ConnectionRecord(7, 1, "127.0.0.1:5555", client_id="c",
                           client_instance_id=str(uuid.uuid4()),
                           telemetry={"org.apache.kafka.producer.x": 1.5}, telemetry_pushes=3,
                           telemetry_at=123.0)
    row.stats(18).count = row.stats(71).count = row.stats(72).count = 1
    assert row.roles == ["bootstrap"]       # telemetry alone makes no other role
    back = snapshot(record_from_json(record_to_json(row)))
    assert (back.client_instance_id, back.telemetry, back.telemetry_pushes,
            back.telemetry_at) == (row.client_instance_id, row.telemetry, 3, 123.0)
