"""kaflite's client pushes its metrics (KIP-714, issue 38 §4): subscriptions, the
standard producer and consumer metrics, the pushes' rules and errors, on kaflite's
in-process cluster, whose registry shows what each client pushed."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import pytest

from kaflite.client import Admin, Consumer, Producer
from kaflite.client.admin import ConfigResource
from kaflite.client.events import EventLog
from kaflite.client.metrics import ClientMetrics, Sensor
from kaflite.client.pool import ConnectionPool
from kaflite.client.telemetry import State, Subscription, TelemetryReporter, encode_metrics
from kaflite.cluster import Cluster
from kaflite.cluster.observe import ConnectionSnapshot
from kaflite.cluster.otlp import decode_metrics
from kaflite.config import resolve
from kaflite.protocol import errors

CLIENT_METRICS = 16
P = "org.apache.kafka.producer."
C = "org.apache.kafka.consumer."
PRODUCER_METRICS = {P + n for n in (
    "connection.creation.rate", "connection.creation.total",
    "node.request.latency.avg{node.id=0}", "node.request.latency.max{node.id=0}",
    "produce.throttle.time.avg", "produce.throttle.time.max",
    "record.queue.time.avg", "record.queue.time.max")}
CONSUMER_METRICS = {C + n for n in (
    "connection.creation.rate", "connection.creation.total",
    "node.request.latency.avg{node.id=0}", "node.request.latency.max{node.id=0}",
    "coordinator.assigned.partitions", "coordinator.commit.latency.avg",
    "coordinator.commit.latency.max", "coordinator.rebalance.latency.avg",
    "coordinator.rebalance.latency.max", "coordinator.rebalance.latency.total",
    "fetch.manager.fetch.latency.avg", "fetch.manager.fetch.latency.max",
    "poll.idle.ratio.avg")}


async def _subscribe(cluster: Cluster, name: str, configs: dict[str, str | None]) -> None:
    async with Admin(bootstrap_servers=cluster.bootstrap_servers) as admin:
        await admin.alter_configs({ConfigResource(CLIENT_METRICS, name): configs})


def _pushed(cluster: Cluster, client_id: str) -> ConnectionSnapshot | None:
    """The connection of ``client_id`` that pushed most (None: none pushed)."""
    rows = [r for r in cluster.connections(client_id=client_id, include_closed=True)
            if r.telemetry_pushes]
    return max(rows, key=lambda r: r.telemetry_pushes) if rows else None


async def _until(condition: Callable[[], bool], what: str, timeout: float = 30,
                 work: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        if work is not None:
            result = work()
            if asyncio.iscoroutine(result):
                await result
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_producer_and_consumer_push_the_standard_metrics(protocol: str) -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("tel", partitions=3, replication_factor=1)
            await _subscribe(cluster, "app", {"metrics": f"{P},{C}", "interval.ms": "200",
                                              "match": "client_id=tel-.*"})
            servers = cluster.bootstrap_servers
            async with Producer(bootstrap_servers=servers, client_id="tel-producer") as prod, \
                    Consumer(bootstrap_servers=servers, client_id="tel-consumer",
                             group_id=f"tel-{protocol}", group_protocol=protocol,
                             auto_offset_reset="earliest") as cons:
                for i in range(20):
                    await prod.send("tel", f"v{i}".encode(), key=str(i).encode())
                cons.subscribe(["tel"])
                got = 0

                async def consume() -> None:
                    nonlocal got
                    got += len(await cons.poll(100))
                    if got >= 20:
                        await cons.commit()

                def pushed_all() -> bool:
                    p, c = _pushed(cluster, "tel-producer"), _pushed(cluster, "tel-consumer")
                    return got >= 20 and p is not None and c is not None and \
                        set(p.telemetry) >= PRODUCER_METRICS and \
                        set(c.telemetry) >= CONSUMER_METRICS and c.telemetry_pushes >= 2 and \
                        c.telemetry[C + "coordinator.assigned.partitions"] == 3
                await _until(pushed_all, "both clients' metrics", work=consume)
                prow, crow = _pushed(cluster, "tel-producer"), _pushed(cluster, "tel-consumer")
                assert prow is not None and crow is not None
                assigned = len(cons.assignment())
                p_id, c_id = await prod.client_instance_id(), await cons.client_instance_id()
            # the instance ids are the ones the broker assigned, one per client
            assert p_id is not None and c_id is not None and p_id != c_id
            assert (prow.client_instance_id, crow.client_instance_id) == (str(p_id), str(c_id))
            assert prow.software_name == crow.software_name == "kaflite"
            # each pushes its own metrics, named as Java's telemetry names them
            assert all(k.startswith(P) for k in prow.telemetry), prow.telemetry
            assert all(k.startswith(C) for k in crow.telemetry), crow.telemetry
            pt, ct = prow.telemetry, crow.telemetry
            assert 0 <= pt[P + "record.queue.time.avg"] <= pt[P + "record.queue.time.max"]
            assert pt[P + "node.request.latency.avg{node.id=0}"] > 0
            assert pt[P + "produce.throttle.time.max"] == 0       # no quota
            assert pt[P + "connection.creation.rate"] > 0
            assert ct[C + "coordinator.assigned.partitions"] == assigned == 3
            assert ct[C + "coordinator.commit.latency.avg"] > 0
            assert ct[C + "coordinator.rebalance.latency.max"] > 0
            assert ct[C + "fetch.manager.fetch.latency.avg"] > 0
            assert 0 < ct[C + "poll.idle.ratio.avg"] <= 1
            # closed: each sent its terminating push, and the broker took it
            instances = cluster.broker(0).telemetry.instances
            assert instances[p_id].terminating and instances[c_id].terminating
    asyncio.run(main())


def test_only_requested_metrics_and_a_changed_subscription_is_picked_up() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("chg", partitions=1, replication_factor=1)
            await _subscribe(cluster, "narrow", {"metrics": P + "record.queue",
                                                 "interval.ms": "200", "match": "client_id=chg"})
            async with Producer(bootstrap_servers=cluster.bootstrap_servers,
                                client_id="chg") as prod:
                await prod.send("chg", b"v")

                def pushed(n: int) -> bool:
                    row = _pushed(cluster, "chg")
                    return row is not None and row.telemetry_pushes >= n
                await _until(lambda: pushed(2), "two pushes")
                row = _pushed(cluster, "chg")
                assert row is not None
                assert set(row.telemetry) == {P + "record.queue.time.avg",
                                              P + "record.queue.time.max"}
                first = prod.telemetry.subscription
                assert first is not None and first.requested == (P + "record.queue",)
                await _subscribe(cluster, "narrow", {"metrics": P + "node.,"
                                                     + P + "record.queue",
                                                     "interval.ms": "200",
                                                     "match": "client_id=chg"})

                def node_latency_pushed() -> bool:
                    row = _pushed(cluster, "chg")
                    return row is not None and \
                        P + "node.request.latency.avg{node.id=0}" in row.telemetry
                await _until(node_latency_pushed, "the metrics of the new subscription")
                second = prod.telemetry.subscription
                assert second is not None and second.instance_id == first.instance_id
                assert second.subscription_id != first.subscription_id
                assert set(second.requested) == {P + "node.", P + "record.queue"}
                assert prod.telemetry.state is State.PUSH_NEEDED
                assert len(prod.events("telemetry")) == 2     # one per subscription
                row = _pushed(cluster, "chg")
                assert row is not None
                assert not any("produce.throttle" in k or "connection.creation" in k
                               for k in row.telemetry)
    asyncio.run(main())


def test_no_subscription_or_push_disabled_means_no_pushes() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("quiet", partitions=1, replication_factor=1)
            await _subscribe(cluster, "all", {"metrics": "*", "interval.ms": "100",
                                              "match": "client_id=on|off"})
            servers = cluster.bootstrap_servers
            async with Producer(bootstrap_servers=servers, client_id="on") as on, \
                    Producer(bootstrap_servers=servers, client_id="off",
                             enable_metrics_push=False) as off, \
                    Producer(bootstrap_servers=servers, client_id="unmatched") as none, \
                    Admin(bootstrap_servers=servers, client_id="off") as admin:
                for p in (on, off, none):
                    await p.send("quiet", b"v")

                def enough() -> bool:
                    row = _pushed(cluster, "on")
                    return row is not None and row.telemetry_pushes >= 3 \
                        and none.telemetry.subscription is not None
                await _until(enough, "three pushes of the subscribed producer")
                # disabled: never asks for a subscription, has no instance id
                assert off.telemetry.state is State.DISABLED
                assert await off.client_instance_id(timeout=0.1) is None
                assert admin.telemetry.state is State.DISABLED    # Java's admin default
                for row in cluster.connections(client_id="off", include_closed=True):
                    assert row.client_instance_id is None and row.telemetry_pushes == 0
                # no metrics requested: it has an instance id and asks again later
                sub = none.telemetry.subscription
                assert sub is not None and sub.requested == ()
                assert none.telemetry.state is State.SUBSCRIPTION_NEEDED
                rows = cluster.connections(client_id="unmatched", include_closed=True)
                assert {r.client_instance_id for r in rows} >= {str(sub.instance_id)}
                assert all(r.telemetry_pushes == 0 for r in rows)
                none_id = sub.instance_id
            # ... and nothing to push at close either
            inst = cluster.broker(0).telemetry.instances[none_id]
            assert inst.pushes == 0 and not inst.terminating
    asyncio.run(main())


def test_the_terminating_push_on_close() -> None:
    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("term", partitions=1, replication_factor=1)
            # an hour's interval: the first periodic push is half an hour away at least
            await _subscribe(cluster, "hourly", {"metrics": P, "interval.ms": "3600000",
                                                 "match": "client_id=term"})
            prod = Producer(bootstrap_servers=cluster.bootstrap_servers, client_id="term")
            await prod.start()
            try:
                await prod.send("term", b"v")
                iid = await prod.client_instance_id(timeout=30)
                assert iid is not None
                inst = cluster.broker(0).telemetry.instances[iid]
                assert inst.pushes == 0 and not inst.terminating
            finally:
                await prod.close()
            assert prod.telemetry.state is State.TERMINATED
            inst = cluster.broker(0).telemetry.instances[iid]
            assert inst.terminating and inst.pushes == 1
            assert P + "record.queue.time.avg" in inst.latest
    asyncio.run(main())


def test_sync_clients_push() -> None:
    from kaflite.client import sync

    with Cluster(brokers=1) as cluster:
        cluster.create_topic("sync-tel", partitions=2, replication_factor=1)
        asyncio.run(_subscribe(cluster, "sync", {"metrics": f"{P},{C}", "interval.ms": "200",
                                                 "match": "client_id=sync-.*"}))
        servers = cluster.bootstrap_servers
        with sync.Producer(bootstrap_servers=servers, client_id="sync-p") as prod, \
                sync.Consumer(bootstrap_servers=servers, client_id="sync-c",
                              group_id="sync-g", auto_offset_reset="earliest") as cons:
            for i in range(10):
                prod.produce("sync-tel", f"v{i}".encode())
            prod.flush()
            cons.subscribe(["sync-tel"])
            got = 0
            deadline = time.monotonic() + 30
            while True:
                got += len(cons.poll(100))
                p, c = _pushed(cluster, "sync-p"), _pushed(cluster, "sync-c")
                if got >= 10 and p is not None and c is not None and \
                        c.telemetry.get(C + "coordinator.assigned.partitions") == 2 and \
                        P + "record.queue.time.avg" in p.telemetry:
                    break
                assert time.monotonic() < deadline, (got, p, c)
            p_id, c_id = prod.client_instance_id(), cons.client_instance_id()
            assert p is not None and c is not None
            assert (p.client_instance_id, c.client_instance_id) == (str(p_id), str(c_id))
            assert c.telemetry[C + "coordinator.assigned.partitions"] == 2
        instances = cluster.broker(0).telemetry.instances
        assert p_id is not None and c_id is not None
        assert instances[p_id].terminating and instances[c_id].terminating


def test_errors_answered_to_pushes(monkeypatch: pytest.MonkeyPatch) -> None:
    """TELEMETRY_TOO_LARGE: ask again after the interval, keep trying; a broker that
    does not take the compression type: ask again at once and push uncompressed."""
    import kaflite.cluster.telemetry as broker_telemetry

    async def main() -> None:
        async with Cluster(brokers=1, config={"telemetry.max.bytes": "64"}) as cluster:
            cluster.create_topic("err", partitions=1, replication_factor=1)
            await _subscribe(cluster, "err", {"metrics": P, "interval.ms": "100"})
            async with Producer(bootstrap_servers=cluster.bootstrap_servers,
                                client_id="big") as prod:
                await prod.send("err", b"v")
                too_large = errors.TelemetryTooLargeError.code
                await _until(lambda: prod.telemetry.last_error == too_large,
                             "TELEMETRY_TOO_LARGE")
                assert prod.telemetry.state is not State.DISABLED
                assert prod.telemetry.pushes == 0
                assert _pushed(cluster, "big") is None
        monkeypatch.setattr(broker_telemetry, "KNOWN_COMPRESSION", frozenset({0}))
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("err", partitions=1, replication_factor=1)
            await _subscribe(cluster, "err", {"metrics": P, "interval.ms": "100"})
            async with Producer(bootstrap_servers=cluster.bootstrap_servers,
                                client_id="codec") as prod:
                await prod.send("err", b"v")
                await _until(lambda: _pushed(cluster, "codec") is not None, "a push")
                sub = prod.telemetry.subscription
                assert sub is not None and sub.accepted_compression[0] == 4    # zstd
                assert prod.telemetry._codec(sub) == 0          # fell back to none
    asyncio.run(main())


def _reporter(**config: object) -> TelemetryReporter:
    cfg = resolve("producer", {"bootstrap.servers": "127.0.0.1:1"}, **config)
    events = EventLog("t", 100)
    return TelemetryReporter(cfg, ConnectionPool(cfg, events), ClientMetrics(P), events, {})


def test_error_codes_map_as_java_does() -> None:
    sub = Subscription(uuid.uuid4(), 7, 5000, (4,), True, ("*",))
    for code, state, wait in (
            (errors.UnknownSubscriptionIdError.code, State.SUBSCRIPTION_NEEDED, 0.0),
            (errors.UnsupportedCompressionTypeError.code, State.SUBSCRIPTION_NEEDED, 0.0),
            (errors.TelemetryTooLargeError.code, State.SUBSCRIPTION_NEEDED, 5.0),
            (errors.ThrottlingQuotaExceededError.code, State.SUBSCRIPTION_NEEDED, 5.0),
            (errors.InvalidRequestError.code, State.DISABLED, None),
            (errors.InvalidRecordError.code, State.DISABLED, None),
            (errors.UnsupportedVersionError.code, State.DISABLED, None),
            (errors.UnknownServerError.code, State.DISABLED, None)):
        reporter = _reporter()
        reporter.subscription = sub
        reporter.state = State.PUSH_NEEDED
        before = time.monotonic()
        reporter._error(code, "PushTelemetry")
        assert reporter.state is state, code
        if wait is not None:
            assert before + wait <= reporter._due <= time.monotonic() + wait, code
    # no subscription yet: a throttled GetTelemetrySubscriptions waits Java's 5 minutes
    reporter = _reporter()
    reporter._error(errors.ThrottlingQuotaExceededError.code, "GetTelemetrySubscriptions")
    assert reporter._due >= time.monotonic() + 299
    assert _reporter(enable_metrics_push=False).state is State.DISABLED
    assert resolve("admin", {"bootstrap.servers": "h:1"})["enable.metrics.push"] is False
    assert resolve("consumer", {"bootstrap.servers": "h:1"})["enable.metrics.push"] is True
    assert resolve("admin", {"bootstrap.servers": "h:1",
                             "enable.metrics.push": "true"})["enable.metrics.push"] is True


def test_a_broker_without_the_apis_gets_no_telemetry() -> None:
    class Conn:
        label = "broker 0 at old:9092"
        api_versions = {0: (0, 11), 3: (0, 12)}

    class Pool:
        brokers = {0: None}

        def least_loaded(self) -> Conn:
            return Conn()

    async def main() -> None:
        reporter = _reporter()
        reporter.pool = Pool()   # type: ignore[assignment]
        reporter.start()
        assert reporter._task is not None
        await asyncio.wait_for(reporter._task, 5)
        assert reporter.state is State.DISABLED
        assert reporter.subscription is None
        await reporter.close()
        assert reporter.state is State.DISABLED
    asyncio.run(main())


def test_sums_are_pushed_as_deltas_or_cumulative_values() -> None:
    clock = [100.0]
    metrics = ClientMetrics(P, clock=lambda: clock[0])
    conns = metrics.sensor("connection.creation", ("rate", "total"))
    queue = metrics.sensor("record.queue.time")
    assert {m.name for m in metrics.collect()} == {      # nothing recorded: no avg, max
        P + "connection.creation.rate", P + "connection.creation.total"}
    for value in (2.0, 4.0):
        queue.record(value)
    conns.record()
    conns.record()
    last: dict[tuple[str, object], tuple[float, int]] = {}

    def push(delta: bool) -> dict[str, float]:
        return decode_metrics(encode_metrics(metrics.collect(), {"group_id": "g"}, delta,
                                             last, clock=lambda: clock[0]))
    first = push(True)
    assert first[P + "connection.creation.total"] == 2
    assert first[P + "record.queue.time.avg"] == 3 and first[P + "record.queue.time.max"] == 4
    # the rate counts over at least one sample window (30 s), as Java's Rate
    assert first[P + "connection.creation.rate"] == pytest.approx(2 / 30)
    conns.record()
    assert push(True)[P + "connection.creation.total"] == 1     # the change since
    assert push(True)[P + "connection.creation.total"] == 0
    assert push(False)[P + "connection.creation.total"] == 3    # cumulative
    # a window with no value leaves avg and max out (Java would push NaN)
    clock[0] += 61
    later = push(True)
    assert P + "record.queue.time.avg" not in later and P + "record.queue.time.max" not in later
    # the subscription's prefixes select; "*" alone selects all
    sub = Subscription(uuid.uuid4(), 1, 1000, (), True,
                       (P + "connection.",))
    assert {m.name for m in metrics.collect(sub.wants)} == {
        P + "connection.creation.rate", P + "connection.creation.total"}
    everything = Subscription(sub.instance_id, 1, 1000, (), True, ("*",))
    assert len(metrics.collect(everything.wants)) == len(metrics.collect())
    nothing = Subscription(sub.instance_id, 1, 1000, (), True, ())
    assert metrics.collect(nothing.wants) == []
    assert isinstance(queue, Sensor)


def test_share_consumer_and_admin_push_when_enabled() -> None:
    from kaflite.client import ShareConsumer

    async def main() -> None:
        async with Cluster(brokers=1) as cluster:
            cluster.create_topic("shared", partitions=1, replication_factor=1)
            await _subscribe(cluster, "all", {"metrics": "*", "interval.ms": "100",
                                              "match": "client_id=sh|adm"})
            servers = cluster.bootstrap_servers
            share: ShareConsumer[bytes, bytes] = ShareConsumer(
                {"bootstrap.servers": servers, "group.id": "sh-g", "client.id": "sh"})
            async with share, Admin(bootstrap_servers=servers, client_id="adm",
                                    enable_metrics_push=True) as admin:
                share.subscribe(["shared"])

                def both() -> bool:
                    s, a = _pushed(cluster, "sh"), _pushed(cluster, "adm")
                    return s is not None and a is not None and \
                        C + "connection.creation.rate" in s.telemetry and \
                        "org.apache.kafka.admin.client.connection.creation.rate" in a.telemetry
                await _until(both, "the share consumer's and the admin's pushes",
                             work=lambda: share.poll(100))
                assert admin.telemetry.state is State.PUSH_NEEDED
    asyncio.run(main())
