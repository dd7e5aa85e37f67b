"""Delegation tokens (KIP-48, KIP-373) on a secured kaflite cluster, through kaflite's admin:
created over SASL_SSL/SCRAM, a new connection logs in with one and is its owner (ACLs say
so), renewed by its owner and renewers only, expired, removed once expired, refused over
a token login and over PLAINTEXT, off without a secret key, and kept across a restart."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kaflite.client import Admin, AuthenticationError, Producer
from kaflite.client._token_admin import DelegationToken
from kaflite.cluster import Cluster
from kaflite.net.connection import BrokerConnection
from kaflite.protocol import errors
from kaflite.protocol.messages import ApiVersionsRequest
from kaflite.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
)
from kaflite.security.acl import ResourceType as RT
from kaflite.security.certs import Pki

T = TypeVar("T")
LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret",
         "carol": "carol-secret"}
SECRET = "the-delegation-token-secret"
_names = itertools.count()


def config(pki: Pki, **extra: str) -> dict[str, str]:
    return {
        **pki.broker_properties(),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,"
                                          "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.users": ",".join(f"{u}:{p}" for u, p in USERS.items()),
        "authorizer.class.name": "kaflite",
        "super.users": "User:admin",
        "delegation.token.secret.key": SECRET,
        # the sweep of expired tokens runs often, so that a test sees it
        "delegation.token.expiry.check.interval.ms": "50",
        **extra,
    }


def run(coro: Awaitable[T], timeout: float = 60) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


@pytest.fixture(scope="module")
def cluster(pki: Pki) -> Iterator[Cluster]:
    with Cluster(brokers=1, listeners=LISTENERS, config=config(pki)) as c:
        yield c


def user_props(cluster: Cluster, pki: Pki, user: str, listener: str = "SASL_SSL"
               ) -> dict[str, Any]:
    props: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap(listener),
                             "security.protocol": listener, "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.username": user, "sasl.password": USERS[user]}
    if listener == "SASL_SSL":
        props["ssl.ca.location"] = str(pki.ca)
    return props


def token_props(cluster: Cluster, pki: Pki, token: DelegationToken,
                mechanism: str = "SCRAM-SHA-256") -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(pki.ca), "sasl.mechanism": mechanism,
            "sasl.username": token.token_id, "sasl.password": token.hmac_b64,
            "sasl.scram.tokenauth": True}


def call(props: dict[str, Any], what: str, *args: Any, **kwargs: Any) -> Any:
    async def go() -> Any:
        async with Admin(props) as admin:
            return await getattr(admin, what)(*args, **kwargs)
    return run(go())


def create(cluster: Cluster, pki: Pki, user: str, **kwargs: Any) -> DelegationToken:
    token: DelegationToken = call(user_props(cluster, pki, user), "create_delegation_token",
                                  **kwargs)
    return token


def described(cluster: Cluster, pki: Pki, user: str, **kwargs: Any) -> set[str]:
    tokens = call(user_props(cluster, pki, user), "describe_delegation_token", **kwargs)
    return {t.token_id for t in tokens}


def allow(principal: str, op: AclOperation, name: str, rt: RT = RT.TOPIC) -> AclBinding:
    return AclBinding(rt, name, PatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)


def exactly(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(b.resource_type, b.name, b.pattern_type, b.principal, b.host,
                            b.operation, b.permission)


def test_create_then_log_in_with_the_token_as_its_owner(cluster: Cluster, pki: Pki) -> None:
    token = create(cluster, pki, "alice")
    assert token.owner == token.requester == "User:alice"
    assert token.issue_timestamp_ms < token.expiry_timestamp_ms <= token.max_timestamp_ms
    # the owner's ACL is what the token's connection gets; bob's token does not have it
    topic = f"alice-only-{next(_names)}"
    cluster.create_topic(topic)
    call(user_props(cluster, pki, "admin"), "create_acls",
         [allow("User:alice", AclOperation.WRITE, topic),
          allow("User:alice", AclOperation.DESCRIBE, topic)])

    async def produce(props: dict[str, Any]) -> int:
        async with Producer(props, linger_ms=0, enable_idempotence=False) as producer:
            return (await producer.send(topic, b"via a token")).offset

    assert run(produce(token_props(cluster, pki, token))) == 0
    assert run(produce(token_props(cluster, pki, token, "SCRAM-SHA-512"))) == 1
    bobs = create(cluster, pki, "bob")
    with pytest.raises(errors.TopicAuthorizationFailedError):
        run(produce(token_props(cluster, pki, bobs)))


def test_the_session_is_the_owner_and_marked_as_a_token_login(cluster: Cluster,
                                                               pki: Pki) -> None:
    token = create(cluster, pki, "alice")

    async def look() -> list[tuple[str, bool]]:
        async with Admin(token_props(cluster, pki, token)) as admin:
            await admin.describe_cluster()
            return [(c.info.principal, c.sasl.token_authenticated)
                    for c in cluster.broker(0).connections.values()
                    if c.sasl is not None and c.sasl.mechanism is not None
                    and c.info.client_id == admin.config["client.id"]]
    assert set(run(look())) == {("User:alice", True)}


def test_a_wrong_hmac_or_unknown_token_cannot_log_in(cluster: Cluster, pki: Pki) -> None:
    token = create(cluster, pki, "alice")
    other = create(cluster, pki, "bob")
    forged = DelegationToken(token.token_id, other.hmac, "", "", (), 0, 0, 0)
    unknown = DelegationToken("not-a-token", token.hmac, "", "", (), 0, 0, 0)
    for bad in (forged, unknown):
        with pytest.raises(AuthenticationError):
            call(token_props(cluster, pki, bad), "describe_cluster")
    # without tokenauth the token id is just an unknown user
    props = token_props(cluster, pki, token)
    props["sasl.scram.tokenauth"] = False
    with pytest.raises(AuthenticationError):
        call(props, "describe_cluster")


def test_a_token_login_may_not_create_renew_expire_or_describe(cluster: Cluster,
                                                              pki: Pki) -> None:
    token = create(cluster, pki, "alice")
    props = token_props(cluster, pki, token)
    with pytest.raises(errors.DelegationTokenRequestNotAllowedError):
        call(props, "describe_delegation_token")
    with pytest.raises(errors.DelegationTokenRequestNotAllowedError):
        call(props, "create_delegation_token")
    with pytest.raises(errors.DelegationTokenRequestNotAllowedError):
        call(props, "renew_delegation_token", token.hmac)
    with pytest.raises(errors.DelegationTokenRequestNotAllowedError):
        call(props, "expire_delegation_token", token.hmac)


def test_not_over_plaintext(cluster: Cluster, pki: Pki) -> None:
    plain = {"bootstrap.servers": cluster.bootstrap("PLAINTEXT")}
    for what in ("create_delegation_token", "describe_delegation_token"):
        with pytest.raises(errors.DelegationTokenRequestNotAllowedError):
            call(plain, what)
    # SASL_PLAINTEXT is authenticated: allowed, as in Kafka
    token = call(user_props(cluster, pki, "carol", "SASL_PLAINTEXT"), "create_delegation_token")
    assert token.owner == "User:carol"


def test_renewed_by_the_owner_and_renewers_only(cluster: Cluster, pki: Pki) -> None:
    token = create(cluster, pki, "alice", renewers=["User:carol"])
    assert token.renewers == ("User:carol",)
    by_carol = call(user_props(cluster, pki, "carol"), "renew_delegation_token", token.hmac,
                    renew_period_ms=60_000)
    assert token.issue_timestamp_ms < by_carol <= token.max_timestamp_ms
    by_alice = call(user_props(cluster, pki, "alice"), "renew_delegation_token", token.hmac)
    assert by_alice <= token.max_timestamp_ms
    with pytest.raises(errors.DelegationTokenOwnerMismatchError):
        call(user_props(cluster, pki, "bob"), "renew_delegation_token", token.hmac)
    with pytest.raises(errors.DelegationTokenNotFoundError):
        call(user_props(cluster, pki, "alice"), "renew_delegation_token", b"no such hmac")
    # the renewal reached the metadata: describe shows the new expiry
    [seen] = [t for t in call(user_props(cluster, pki, "alice"), "describe_delegation_token")
              if t.token_id == token.token_id]
    assert seen.expiry_timestamp_ms == by_alice


def test_renewers_must_be_users(cluster: Cluster, pki: Pki) -> None:
    with pytest.raises(errors.InvalidPrincipalTypeError):
        create(cluster, pki, "alice", renewers=["Group:ops"])


def test_expire_at_once_removes_the_token(cluster: Cluster, pki: Pki) -> None:
    token = create(cluster, pki, "alice")
    with pytest.raises(errors.DelegationTokenOwnerMismatchError):
        call(user_props(cluster, pki, "bob"), "expire_delegation_token", token.hmac)
    call(user_props(cluster, pki, "alice"), "expire_delegation_token", token.hmac)
    assert token.token_id not in described(cluster, pki, "alice")
    with pytest.raises(errors.DelegationTokenNotFoundError):
        call(user_props(cluster, pki, "alice"), "renew_delegation_token", token.hmac)
    with pytest.raises(AuthenticationError):
        call(token_props(cluster, pki, token), "describe_cluster")


def test_an_expired_token_is_removed(cluster: Cluster, pki: Pki) -> None:
    token = create(cluster, pki, "alice", max_lifetime_ms=1)
    assert token.max_timestamp_ms == token.issue_timestamp_ms + 1
    for _ in range(400):    # bounded: the sweep runs every 50 ms
        if token.token_id not in described(cluster, pki, "alice"):
            break
    assert token.token_id not in described(cluster, pki, "alice")
    assert token.token_id not in cluster.controller.tokens
    with pytest.raises(AuthenticationError):
        call(token_props(cluster, pki, token), "describe_cluster")


def test_who_sees_a_token(cluster: Cluster, pki: Pki) -> None:
    token = create(cluster, pki, "alice", renewers=["User:carol"])
    assert token.token_id in described(cluster, pki, "alice")
    assert token.token_id in described(cluster, pki, "carol")      # a renewer
    assert token.token_id in described(cluster, pki, "admin")      # a super user
    assert token.token_id not in described(cluster, pki, "bob")
    assert token.token_id not in described(cluster, pki, "alice", owners=["User:bob"])
    assert described(cluster, pki, "alice", owners=[]) == set()
    # DESCRIBE_TOKENS on alice (a USER resource) shows bob her tokens
    grant = allow("User:bob", AclOperation.DESCRIBE_TOKENS, "User:alice", RT.USER)
    call(user_props(cluster, pki, "admin"), "create_acls", [grant])
    try:
        assert token.token_id in described(cluster, pki, "bob")
    finally:
        call(user_props(cluster, pki, "admin"), "delete_acls", [exactly(grant)])


def test_a_token_for_another_owner_needs_create_tokens(cluster: Cluster, pki: Pki) -> None:
    with pytest.raises(errors.DelegationTokenAuthorizationFailedError):
        create(cluster, pki, "bob", owner="User:alice")
    token = create(cluster, pki, "admin", owner="User:alice")
    assert (token.owner, token.requester) == ("User:alice", "User:admin")
    assert token.token_id in described(cluster, pki, "alice")
    grant = allow("User:bob", AclOperation.CREATE_TOKENS, "User:carol", RT.USER)
    call(user_props(cluster, pki, "admin"), "create_acls", [grant])
    try:
        assert create(cluster, pki, "bob", owner="User:carol").owner == "User:carol"
    finally:
        call(user_props(cluster, pki, "admin"), "delete_acls", [exactly(grant)])


def test_the_secret_key_is_not_described(cluster: Cluster, pki: Pki) -> None:
    from kaflite.client import ConfigResource

    [(_, entries)] = call(user_props(cluster, pki, "admin"), "describe_config_entries",
                          [ConfigResource(4, "0")]).items()
    [entry] = [e for e in entries if e.name == "delegation.token.secret.key"]
    assert entry.value is None and entry.sensitive


def test_off_without_a_secret_key(pki: Pki) -> None:
    props = config(pki)
    del props["delegation.token.secret.key"]
    with Cluster(brokers=1, listeners=LISTENERS, config=props) as cluster:
        alice = user_props(cluster, pki, "alice")
        for what, args in (("create_delegation_token", ()), ("describe_delegation_token", ()),
                           ("renew_delegation_token", (b"x",)),
                           ("expire_delegation_token", (b"x",))):
            with pytest.raises(errors.DelegationTokenAuthDisabledError):
                call(alice, what, *args)


def test_tokens_survive_a_restart(pki: Pki, tmp_path: Path) -> None:
    with Cluster(brokers=1, listeners=LISTENERS, config=config(pki), data_dir=tmp_path) as c:
        token = create(c, pki, "alice", renewers=["User:carol"])
        gone = create(c, pki, "alice")
        call(user_props(c, pki, "alice"), "expire_delegation_token", gone.hmac)
    with Cluster(brokers=1, listeners=LISTENERS, config=config(pki), data_dir=tmp_path) as c:
        [kept] = call(user_props(c, pki, "carol"), "describe_delegation_token")
        assert kept == token
        assert gone.token_id not in c.controller.tokens
        assert call(token_props(c, pki, token), "describe_cluster")["cluster_id"]


def test_api_versions_advertise_kafka_44s_token_versions(cluster: Cluster) -> None:
    async def ask() -> dict[int, tuple[int, int]]:
        conn = await BrokerConnection("127.0.0.1", cluster.broker(0).bound["PLAINTEXT"],
                                      client_id="dt-versions").open()
        try:
            resp = await conn.request(ApiVersionsRequest(client_software_name="t",
                                                         client_software_version="1"))
        finally:
            conn.close()
        return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    served = run(ask())
    assert {k: served[k] for k in (38, 39, 40, 41)} == {38: (1, 3), 39: (1, 2), 40: (1, 2),
                                                      41: (1, 3)}


def test_tokens_reach_every_broker_process(pki: Pki) -> None:
    with Cluster(brokers=2, processes=True, listeners=LISTENERS, config=config(pki)) as c:
        first, second = c.bootstrap("SASL_SSL").split(",")

        def at(props: dict[str, Any], address: str) -> dict[str, Any]:
            return {**props, "bootstrap.servers": address}

        token = call(at(user_props(c, pki, "alice"), first), "create_delegation_token",
                     renewers=["User:carol"])
        for address in (first, second):       # each broker process knows it
            assert call(at(token_props(c, pki, token), address), "describe_cluster")
        # a broker process started afterwards gets it in the metadata image
        c.call(c.restart_broker(1))
        second = c.bootstrap("SASL_SSL").split(",")[1]
        assert call(at(token_props(c, pki, token), second), "describe_cluster")
        expiry = call(at(user_props(c, pki, "carol"), second), "renew_delegation_token",
                      token.hmac, renew_period_ms=120_000)
        [seen] = call(at(user_props(c, pki, "alice"), first), "describe_delegation_token")
        assert seen.expiry_timestamp_ms == expiry
        call(at(user_props(c, pki, "alice"), second), "expire_delegation_token", token.hmac)
        for address in (first, second):
            assert call(at(user_props(c, pki, "alice"), address),
                        "describe_delegation_token") == []
            with pytest.raises(AuthenticationError):
                call(at(token_props(c, pki, token), address), "describe_cluster")


def test_no_hmac_or_secret_in_logs_or_reprs(cluster: Cluster, pki: Pki,
                                            caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = create(cluster, pki, "alice")
    texts = [repr(token), str(token)]

    async def log_in() -> None:
        async with Admin(token_props(cluster, pki, token)) as admin:
            await admin.describe_cluster()
            texts.extend(str(e) for e in admin.events())
            texts.extend(repr(c) for c in admin.connections())
    run(log_in())
    # expired now (a period of 0), then removed by the sweep, which logs it
    call(user_props(cluster, pki, "alice"), "expire_delegation_token", token.hmac,
         expiry_time_period_ms=0)
    for _ in range(400):    # bounded: the sweep runs every 50 ms
        if token.token_id not in cluster.controller.tokens:
            break
        run(asyncio.sleep(0.01))
    assert token.token_id not in cluster.controller.tokens
    texts.append(caplog.text)
    assert any(token.token_id in t for t in texts)
    for secret in (token.hmac_b64, SECRET, token.hmac.hex(), repr(token.hmac)[2:-1]):
        assert not [t for t in texts if secret in t]
