"""ACLs enforced by an authorizing 2-broker cluster, as third-party clients and kaflite's
own see them: users get exactly what their ACLs give, a DENY added while clients run
reaches the application as an authorization error (no retry loop), removing it lets a
new client work, and kafka-python, kafkajs and kcat get Kafka's codes and views.

The brokers replicate to each other over a PLAINTEXT listener as User:ANONYMOUS, who
has no ACL: the cluster's own inter-broker connections are recognized and pass.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kaflite.client import Admin, Consumer, NewTopic, Producer
from kaflite.client._quotas import ClientQuotaAlteration
from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import (
    AlterReplicaLogDirsRequest,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kaflite.protocol.messages import alter_replica_log_dirs_request as arq
from kaflite.protocol.messages import describe_topic_partitions_request as dtq
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kaflite.security.plain import PlainClient

T = TypeVar("T")
Op, RT, PT, P = AclOperation, ResourceType, PatternType, AclPermissionType
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
CONFIG = {
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.users": ",".join(f"{u}:{p}" for u, p in USERS.items()),
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
    "authorizer.class.name": "kaflite",
    "super.users": "User:admin",
}
KJS = Path(__file__).parent / "kafkajs_acl.js"
KJS_MODULES = Path(__file__).parent.parent / "kafkajs" / "node_modules" / "kafkajs"
_names = itertools.count()


def run(coro: Awaitable[T], timeout: float = 60) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


def props(cluster: Cluster, user: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": USERS[user], **extra}


def allow(principal: str, op: AclOperation, name: str, rt: ResourceType = RT.TOPIC,
          pattern: PatternType = PT.LITERAL, perm: AclPermissionType = P.ALLOW) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, "*", op, perm)


def deny(principal: str, op: AclOperation, name: str, rt: ResourceType = RT.TOPIC) -> AclBinding:
    return allow(principal, op, name, rt, perm=P.DENY)


def admin_call(cluster: Cluster, what: str, *args: Any) -> Any:
    async def go() -> Any:
        async with Admin(props(cluster, "admin")) as admin:
            return await getattr(admin, what)(*args)
    return run(go())


def topic(cluster: Cluster, prefix: str, partitions: int = 2) -> str:
    name = f"{prefix}-{next(_names)}"
    admin_call(cluster, "create_topics", [NewTopic(name, partitions, 2)])
    return name


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(brokers=2, listeners=LISTENERS, config=CONFIG) as c:
        yield c


def test_users_get_exactly_what_their_acls_give(cluster: Cluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    orders, secret = topic(cluster, "orders"), topic(cluster, "secret")
    admin_call(cluster, "create_acls", [
        allow("User:alice", Op.WRITE, orders),
        allow("User:bob", Op.READ, orders),
        allow("User:bob", Op.READ, "billing-", RT.GROUP, PT.PREFIXED)])
    producer = ck.Producer(props(cluster, "alice", acks="all"))
    outcomes: dict[str, list[int]] = {orders: [], secret: []}

    def report(err: Any, msg: Any) -> None:
        outcomes[msg.topic()].append(err.code() if err is not None else 0)
    for i in range(20):
        producer.produce(orders, f"v{i}".encode(), on_delivery=report)
    producer.produce(secret, b"nope", on_delivery=report)
    assert producer.flush(30) == 0
    assert outcomes[orders] == [0] * 20
    assert outcomes[secret] == [ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # acks=all was met: the brokers replicate to each other though ANONYMOUS has no ACL
    for state in cluster.controller.topics[orders].partitions:
        assert sorted(state.isr) == [0, 1]

    def consume(group: str, wanted: int) -> tuple[list[bytes], list[int]]:
        consumer = ck.Consumer(props(cluster, "bob", **{
            "group.id": group, "auto.offset.reset": "earliest"}))
        consumer.subscribe([orders])
        values: list[bytes] = []
        codes: list[int] = []
        try:
            for _ in range(60):
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                if msg.error():
                    codes.append(msg.error().code())
                    break
                values.append(msg.value())
                if len(values) >= wanted:
                    break
        finally:
            consumer.close()
        return values, codes
    values, codes = consume("billing-1", 20)
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(20)) and codes == []
    values, codes = consume("marketing", 20)
    assert values == [] and codes == [ck.KafkaError.GROUP_AUTHORIZATION_FAILED]
    # bob may write nowhere: as in Kafka 4, an idempotent producer needs WRITE on some
    # topic (or IDEMPOTENT_WRITE on the cluster) for its producer id
    assert run(_kaflite_send(cluster, "bob", orders)) == "ClusterAuthorizationFailedError"
    assert run(_kaflite_send(cluster, "alice", secret)) == "TopicAuthorizationFailedError"


async def _kaflite_send(cluster: Cluster, user: str, name: str) -> str:
    try:
        async with Producer(props(cluster, user, acks="all")) as producer:
            await producer.send(name, b"x")
    except errors.KafkaError as exc:
        return type(exc).__name__
    return "ok"


def test_a_deny_added_while_clients_run_reaches_the_application(cluster: Cluster) -> None:
    ck = pytest.importorskip("confluent_kafka")
    live = topic(cluster, "live", partitions=1)
    admin_call(cluster, "create_acls", [
        allow("User:alice", Op.WRITE, live), allow("User:bob", Op.READ, live),
        allow("User:bob", Op.READ, "live-group", RT.GROUP)])
    ck_producer = ck.Producer(props(cluster, "alice", acks="all",
                                    **{"message.timeout.ms": 20000}))
    codes: list[int] = []

    def report(err: Any, msg: Any) -> None:
        codes.append(err.code() if err is not None else 0)

    async def scenario() -> None:
        async with Producer(props(cluster, "alice", acks="all")) as producer, \
                Consumer(props(cluster, "bob", **{"group.id": "live-group",
                                                  "auto.offset.reset": "earliest"})) as consumer:
            await producer.send(live, b"before")
            consumer.subscribe([live])
            got: list[bytes] = []
            for _ in range(40):
                got += [r.value for r in await consumer.poll(timeout_ms=500)]
                if got:
                    break
            assert got == [b"before"]
            ck_producer.produce(live, b"ck-before", on_delivery=report)
            assert ck_producer.flush(20) == 0 and codes == [0]
            async with Admin(props(cluster, "admin")) as admin:
                await admin.create_acls([deny("User:alice", Op.WRITE, live),
                                         deny("User:bob", Op.READ, live)])
            with pytest.raises(errors.TopicAuthorizationFailedError):
                await asyncio.wait_for(producer.send(live, b"after"), 15)
            with pytest.raises(errors.TopicAuthorizationFailedError):
                for _ in range(40):
                    await consumer.poll(timeout_ms=500)
            ck_producer.produce(live, b"ck-after", on_delivery=report)
            assert ck_producer.flush(25) == 0
            assert codes == [0, ck.KafkaError.TOPIC_AUTHORIZATION_FAILED]
    run(scenario(), timeout=90)
    deleted = admin_call(cluster, "delete_acls", [AclBindingFilter(
        RT.TOPIC, live, PT.LITERAL, permission=P.DENY)])
    assert len(deleted) == 2
    assert run(_kaflite_send(cluster, "alice", live)) == "ok"


def test_kafka_python_gets_the_same_codes(cluster: Cluster) -> None:
    kafka = pytest.importorskip("kafka")
    kerrors = pytest.importorskip("kafka.errors")
    closed = topic(cluster, "kp-closed")
    common = {"bootstrap_servers": cluster.bootstrap("SASL_PLAINTEXT").split(","),
              "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
              "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}
    producer = kafka.KafkaProducer(**common, max_block_ms=10000)
    try:
        with pytest.raises(kerrors.TopicAuthorizationFailedError):
            producer.send(closed, b"x").get(timeout=20)
    finally:
        producer.close(timeout=5)
    admin = kafka.KafkaAdminClient(**common)
    try:
        with pytest.raises(kerrors.ClusterAuthorizationFailedError):
            admin.describe_acls(kafka.admin.ACLFilter(
                principal=None, host="*", operation=kafka.admin.ACLOperation.ANY,
                permission_type=kafka.admin.ACLPermissionType.ANY,
                resource_pattern=kafka.admin.ResourcePatternFilter(
                    kafka.admin.ResourceType.ANY, None, kafka.admin.ACLResourcePatternType.ANY)))
    finally:
        admin.close()


@pytest.mark.skipif(shutil.which("node") is None or not KJS_MODULES.is_dir(),
                    reason="kafkajs is not installed (tools/ensure_kafkajs.sh)")
@pytest.mark.peer
def test_kafkajs_gets_the_same_codes(cluster: Cluster) -> None:
    closed, readable = topic(cluster, "kjs-closed"), topic(cluster, "kjs-readable")
    admin_call(cluster, "create_acls", [allow("User:alice", Op.DESCRIBE, readable)])
    spec = {"brokers": cluster.bootstrap("SASL_PLAINTEXT"), "username": "alice",
            "password": "alice-secret", "topic": closed, "group": "kjs-no-group",
            "readable": readable}
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.run([node, str(KJS), json.dumps(spec)], text=True, timeout=90,
                          capture_output=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"produce": "TOPIC_AUTHORIZATION_FAILED", "group": "GROUP_AUTHORIZATION_FAILED"}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_lists_only_the_topics_it_may_describe(cluster: Cluster) -> None:
    seen, hidden = topic(cluster, "kcat-seen"), topic(cluster, "kcat-hidden")
    admin_call(cluster, "create_acls", [allow("User:alice", Op.READ, seen)])
    kcat = shutil.which("kcat")
    assert kcat is not None
    proc = subprocess.run(
        [kcat, "-L", "-b", cluster.bootstrap("SASL_PLAINTEXT"), "-X",
         "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X",
         "sasl.username=alice", "-X", "sasl.password=alice-secret"],
        capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f'topic "{seen}" with 2 partitions' in proc.stdout
    assert hidden not in proc.stdout
    named = subprocess.run(
        [kcat, "-L", "-t", hidden, "-b", cluster.bootstrap("SASL_PLAINTEXT"), "-X",
         "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=PLAIN", "-X",
         "sasl.username=alice", "-X", "sasl.password=alice-secret"],
        capture_output=True, text=True, timeout=60)
    assert "Broker: Topic authorization failed" in named.stdout + named.stderr


def test_cluster_operations_need_cluster_acls(cluster: Cluster) -> None:
    async def go() -> list[str]:
        out = []
        async with Admin(props(cluster, "alice")) as admin:
            for call in (admin.describe_acls(),
                         admin.create_acls([allow("User:alice", Op.ALL, "*")]),
                         admin.delete_acls([AclBindingFilter()]),
                         admin.create_topics([NewTopic(f"nope-{next(_names)}", 1, 1)])):
                try:
                    await call
                    out.append("ok")
                except errors.KafkaError as exc:
                    out.append(type(exc).__name__)
        return out
    before = admin_call(cluster, "describe_acls")
    assert run(go()) == ["ClusterAuthorizationFailedError"] * 3 + [
        "TopicAuthorizationFailedError"]
    assert admin_call(cluster, "describe_acls") == before


def test_describe_topic_partitions_shows_only_what_the_caller_may_describe(
        cluster: Cluster) -> None:
    """Named: a topic without DESCRIBE is TOPIC_AUTHORIZATION_FAILED (not UNKNOWN: its
    existence is not told); every topic: such a topic is left out, and not counted
    against the page."""
    seen, hidden = topic(cluster, "dtp-seen"), topic(cluster, "dtp-hidden")
    admin_call(cluster, "create_acls", [allow("User:bob", Op.DESCRIBE, seen)])
    host, port = cluster.bootstrap("SASL_PLAINTEXT").split(",")[0].rsplit(":", 1)

    async def ask(req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
        conn = await BrokerConnection(host, int(port),
                                      sasl=lambda: PlainClient("bob", USERS["bob"])).open()
        try:
            return await conn.request(req, version=0)
        finally:
            conn.close()
    named = run(ask(DescribeTopicPartitionsRequest(
        topics=[dtq.TopicRequest(hidden), dtq.TopicRequest(seen)])))
    assert sorted((t.name, t.error_code, len(t.partitions)) for t in named.topics) == sorted([
        (seen, 0, 2), (hidden, errors.TopicAuthorizationFailedError.code, 0)])
    # the topic's authorized operations: what bob's ACLs allow on it
    assert {t.name: t.topic_authorized_operations for t in named.topics}[seen] == \
        1 << Op.DESCRIBE
    described: list[str] = []
    cursor = None
    for _ in range(100):
        page = run(ask(DescribeTopicPartitionsRequest(
            topics=[], response_partition_limit=2, cursor=cursor)))
        assert all(t.error_code == 0 for t in page.topics)
        assert sum(len(t.partitions) for t in page.topics) <= 2
        described += [t.name for t in page.topics]
        if page.next_cursor is None:
            break
        cursor = dtq.Cursor(page.next_cursor.topic_name, page.next_cursor.partition_index)
    assert seen in described and hidden not in described


def test_quotas_and_log_dirs_need_cluster_acls(cluster: Cluster) -> None:
    """As Kafka's KafkaApis: DescribeClientQuotas needs DESCRIBE_CONFIGS on the cluster,
    AlterClientQuotas ALTER_CONFIGS (every entry refused, nothing changed), and
    AlterReplicaLogDirs ALTER (every partition refused). A user without them could
    otherwise lift their own quotas, or throttle everyone else's."""
    mine = ClientQuotaAlteration({"user": "alice"}, {"producer_byte_rate": 1.0})

    async def go() -> list[str]:
        out = []
        async with Admin(props(cluster, "alice")) as admin:
            for call in (admin.describe_client_quotas(), admin.alter_client_quotas([mine])):
                try:
                    await call
                    out.append("ok")
                except errors.KafkaError as exc:
                    out.append(type(exc).__name__)
        return out

    async def move() -> set[int]:
        host, port = cluster.bootstrap("SASL_PLAINTEXT").split(",")[0].rsplit(":", 1)
        conn = await BrokerConnection(host, int(port),
                                      sasl=lambda: PlainClient("alice", USERS["alice"])).open()
        try:
            resp = await conn.request(AlterReplicaLogDirsRequest(dirs=[arq.AlterReplicaLogDir(
                "/some/dir", [arq.AlterReplicaLogDirTopic("t", [0, 1])])]), version=2)
        finally:
            conn.close()
        return {p.error_code for t in resp.results for p in t.partitions} | {
            len([p for t in resp.results for p in t.partitions])}

    assert run(go()) == ["ClusterAuthorizationFailedError"] * 2
    assert admin_call(cluster, "describe_client_quotas") == {}
    assert run(move()) == {errors.ClusterAuthorizationFailedError.code, 2}
