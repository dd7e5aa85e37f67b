"""The shipped filters, loaded by name as the CLI loads them.

* topic-prefix: two tenants share one cluster through two proxies; each sees,
  creates, writes and reads only its own topics, under its own names, while
  upstream they live under the tenant's prefix; an API the filter cannot
  rewrite is refused. Group and transactional ids are prefixed too: two tenants
  with the same group name and transactional id neither share offsets nor
  fence each other, and each lists and deletes only its own group.
* audit: one JSON line per control-plane request (topic created, group joined,
  offsets committed), none for Produce or Fetch.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kaflite.cluster import Cluster
from kaflite.proxy import Proxy, load_filter


def test_topic_prefix_makes_two_virtual_clusters(cluster3: Cluster) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    with Proxy(cluster3.bootstrap_servers, filters=[load_filter("topic-prefix:prefix=a.")]) as a, \
            Proxy(cluster3.bootstrap_servers,
                  filters=[load_filter("topic-prefix:prefix=b.")]) as b:
        for tenant, proxy in (("a", a), ("b", b)):
            admin = AdminClient({"bootstrap.servers": proxy.bootstrap_servers})
            admin.create_topics([NewTopic("orders", 2, 3)])["orders"].result(30)
            producer = Producer({"bootstrap.servers": proxy.bootstrap_servers})
            for i in range(20):
                producer.produce("orders", f"{tenant}-{i}".encode(), partition=i % 2)
            assert producer.flush(30) == 0
        upstream = set(cluster3.controller.topics)
        assert {"a.orders", "b.orders"} <= upstream and "orders" not in upstream
        for tenant, proxy in (("a", a), ("b", b)):
            admin = AdminClient({"bootstrap.servers": proxy.bootstrap_servers})
            listed = set(admin.list_topics(timeout=10).topics)
            assert listed == {"orders"}, listed     # no prefix, no other tenant, no internals
            consumer = Consumer({"bootstrap.servers": proxy.bootstrap_servers,
                                 "group.id": f"g-{tenant}", "auto.offset.reset": "earliest"})
            consumer.subscribe(["orders"])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < 20 and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    assert msg.topic() == "orders"
                    got.append(msg.value())
            consumer.close()
            assert sorted(got) == sorted(f"{tenant}-{i}".encode() for i in range(20))
        # ACLs name resources the filter does not rewrite: refused
        admin = AdminClient({"bootstrap.servers": a.bootstrap_servers})
        binding = AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL,
                             "User:x", "*", AclOperation.READ, AclPermissionType.ALLOW)
        futures = admin.create_acls([binding], request_timeout=10)
        with pytest.raises(KafkaException) as info:
            futures[binding].result(15)
        # left out of the proxy's ApiVersions answer (the cluster itself serves CreateAcls)
        assert "not supported by broker" in str(info.value)


def test_topic_prefix_keeps_groups_and_transactions_apart(cluster3: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from kaflite.client import sync as ksync

    with Proxy(cluster3.bootstrap_servers, filters=[load_filter("topic-prefix:prefix=ga.")]) \
            as a, Proxy(cluster3.bootstrap_servers,
                        filters=[load_filter("topic-prefix:prefix=gb.")]) as b:
        tenants = {"a": a, "b": b}
        producers = {}
        for tenant, proxy in tenants.items():
            admin = AdminClient({"bootstrap.servers": proxy.bootstrap_servers})
            admin.create_topics([NewTopic("events", 2, 3)])["events"].result(30)
            # the same transactional id for both, both initialised before either
            # writes: were the ids shared, b's init would fence a's producer
            producers[tenant] = Producer({"bootstrap.servers": proxy.bootstrap_servers,
                                          "transactional.id": "tx"})
            producers[tenant].init_transactions(30)
        counts = {"a": 12, "b": 7}
        for tenant, producer in producers.items():
            producer.begin_transaction()
            for i in range(counts[tenant]):
                producer.produce("events", f"{tenant}-{i}".encode(), partition=i % 2)
            producer.commit_transaction(30)
        for tenant, proxy in tenants.items():
            consumer = Consumer({"bootstrap.servers": proxy.bootstrap_servers,
                                 "group.id": "shared", "auto.offset.reset": "earliest",
                                 "isolation.level": "read_committed",
                                 "enable.auto.commit": False})
            consumer.subscribe(["events"])
            got: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(got) < counts[tenant] and time.monotonic() < deadline:
                msg = consumer.poll(0.2)
                if msg is not None and not msg.error():
                    got.append(msg.value())
            assert sorted(got) == sorted(f"{tenant}-{i}".encode()
                                         for i in range(counts[tenant]))
            consumer.commit(asynchronous=False)
            consumer.close()
        with ksync.Admin({"bootstrap.servers": cluster3.bootstrap_servers}) as upstream:
            groups = {g[0] for g in upstream.list_groups()}
            assert {"ga.shared", "gb.shared"} <= groups and "shared" not in groups
            txns = {t[0] for t in upstream.list_transactions()}
            assert {"ga.tx", "gb.tx"} <= txns and "tx" not in txns
        for tenant, proxy in tenants.items():
            # each tenant's group holds its own offsets (a's commit is not b's)
            check = Consumer({"bootstrap.servers": proxy.bootstrap_servers,
                              "group.id": "shared"})
            committed = check.committed([TopicPartition("events", p) for p in (0, 1)], 30)
            check.close()
            # past each partition's records (and perhaps its commit marker): the
            # tenants' ranges do not overlap, so a shared group would show
            records = {0: (counts[tenant] + 1) // 2, 1: counts[tenant] // 2}
            for tp in committed:
                assert records[tp.partition] <= tp.offset <= records[tp.partition] + 1, tp
            admin = AdminClient({"bootstrap.servers": proxy.bootstrap_servers})
            listed = admin.list_consumer_groups(request_timeout=10).result(30)
            assert {g.group_id for g in listed.valid} == {"shared"}
            described = admin.describe_consumer_groups(["shared"])["shared"].result(30)
            assert described.group_id == "shared"
        admin = AdminClient({"bootstrap.servers": a.bootstrap_servers})
        admin.delete_consumer_groups(["shared"], request_timeout=10)["shared"].result(30)
        with ksync.Admin({"bootstrap.servers": cluster3.bootstrap_servers}) as upstream:
            groups = {g[0] for g in upstream.list_groups()}
            assert "ga.shared" not in groups and "gb.shared" in groups
        for producer in producers.values():
            producer.flush(10)


def test_audit_writes_control_plane_lines(cluster3: Cluster, tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    path = tmp_path / "audit.jsonl"
    with Proxy(cluster3.bootstrap_servers, filters=[load_filter(f"audit:path={path}")]) as p:
        admin = AdminClient({"bootstrap.servers": p.bootstrap_servers, "client.id": "auditor"})
        admin.create_topics([NewTopic("audited", 1, 3)])["audited"].result(30)
        producer = Producer({"bootstrap.servers": p.bootstrap_servers})
        producer.produce("audited", b"x")
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": p.bootstrap_servers, "group.id": "audit-g",
                             "client.id": "audit-reader", "auto.offset.reset": "earliest"})
        consumer.subscribe(["audited"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                break
        consumer.commit(asynchronous=False)
        consumer.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    apis = {line["api"] for line in lines}
    assert {"CreateTopics", "JoinGroup", "SyncGroup", "OffsetCommit"} <= apis
    assert not apis & {"Produce", "Fetch", "Metadata"}
    created = next(line for line in lines if line["api"] == "CreateTopics")
    assert created["topics"] == ["audited"] and created["client_id"] == "auditor"
    assert created["error"] is None
    joined = next(line for line in lines if line["api"] == "JoinGroup")
    assert joined["group"] == "audit-g" and joined["client_id"] == "audit-reader"
    committed = next(line for line in lines if line["api"] == "OffsetCommit")
    assert committed["topics"] == ["audited"]
